"""Retrieval's journal: each question's result as soon as it is measured, for `--resume`.

The stage's artifact is published only when the stage ends, so an interrupted retrieval left
nothing of what it measured. The journal is written beside the chain's index
(`artifacts/chains/<chain>/journal/<stage>.jsonl`), one line per question as it finishes,
after a header naming what the results depend on (the reconciled graph's output and the
repeat's sample identity). A resumed chain reads back the questions measured under the same
header — a question the pipeline's own infrastructure left unscored is not kept: it is
retrieved again — and retrieves only the rest. Another header (the graph was rebuilt, another
repeat) starts the journal afresh.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from eval_pipeline.llm.credentials import PRIVATE_FILE
from eval_pipeline.retrieve.results import QuestionRetrieval

JOURNAL_DIR = "journal"


def journal_path(chain_dir: Path, stage: str) -> Path:
    return Path(chain_dir) / JOURNAL_DIR / f"{stage}.jsonl"


def measured(path: Path, header: Mapping[str, Any]) -> dict[str, QuestionRetrieval]:
    """The questions the journal holds under exactly `header`, measured (no infrastructure
    failure); empty when there is none or its header differs. A torn last line is dropped."""
    try:
        lines = Path(path).read_text("utf-8").splitlines()
    except FileNotFoundError:
        return {}
    if not lines:
        return {}
    try:
        if json.loads(lines[0]) != {"header": dict(header)}:
            return {}
    except ValueError:
        return {}
    out: dict[str, QuestionRetrieval] = {}
    for line in lines[1:]:
        try:
            result = QuestionRetrieval.model_validate_json(line)
        except ValueError:
            continue  # the line an interrupt cut
        if not result.infra_failures:
            out[result.question_id] = result
    return out


class Journal:
    """Appends results under `header`; kept results (`measured`) are written again first, so
    the file always holds everything this chain measured under that header."""

    def __init__(self, path: Path, header: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        kept = measured(self.path, header)
        with tmp.open("w", encoding="utf-8") as f:
            f.write(json.dumps({"header": dict(header)}) + "\n")
            for result in kept.values():
                f.write(result.model_dump_json() + "\n")
        os.chmod(tmp, PRIVATE_FILE)
        os.replace(tmp, self.path)
        self._file = self.path.open("a", encoding="utf-8")

    def add(self, result: QuestionRetrieval) -> None:
        self._file.write(result.model_dump_json() + "\n")
        self._file.flush()  # an interrupt loses at most the line being written

    def close(self) -> None:
        self._file.close()


def merged(
    order: list[str], kept: Mapping[str, QuestionRetrieval], fresh: Iterator[QuestionRetrieval]
) -> Iterator[QuestionRetrieval]:
    """Results in `order`: a kept one where there is one, else the next fresh one (`fresh`
    yields the others, in the same order)."""
    for question_id in order:
        yield kept[question_id] if question_id in kept else next(fresh)
