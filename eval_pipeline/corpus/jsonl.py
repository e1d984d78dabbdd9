"""Our own JSONL writing (publication of a set of output files: `eval_pipeline.atomic`).

deepeval's own `save_as` joins `context` with `|` (corrupting turn text that contains it)
and drops fields, so goldens are written here: one JSON object per line, lists kept lists.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from eval_pipeline.corpus import strict_input


def dumps_line(obj: Any) -> str:
    """One JSONL line: stable, UTF-8 text kept readable, no trailing newline."""
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def write_jsonl(path: Path, rows: Iterable[Any]) -> int:
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(dumps_line(row))
            fh.write("\n")
            n += 1
    return n


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    value = strict_input.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}: line {lineno}: invalid JSON ({exc.msg})") from None
                except strict_input.StrictInputError as exc:
                    raise ValueError(f"{path}: line {lineno}: {exc}") from None
                yield value


def write_json(path: Path, obj: Any) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        json.dump(obj, fh, ensure_ascii=False, indent=2, sort_keys=False)
        fh.write("\n")
