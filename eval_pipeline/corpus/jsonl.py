"""Our own JSONL writing, and atomic publication of a set of output files.

deepeval's own `save_as` joins `context` with `|` (corrupting turn text that contains it)
and drops fields, so goldens are written here: one JSON object per line, lists kept lists.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
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


@contextmanager
def staged_outputs(out_dir: Path, names: Iterable[str]) -> Iterator[Path]:
    """Yield a private staging directory; on success move `names` into `out_dir`.

    On any error nothing new is left in `out_dir` (it is removed again if we created it).
    The staging directory sits beside `out_dir`, on the same file system, so each move is a
    rename; the manifest should be listed last so its presence means "complete".
    """
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.staging-", dir=out_dir.parent))
    try:
        yield stage
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in names:
            os.replace(stage / name, out_dir / name)
    except BaseException:
        if created and out_dir.exists() and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
