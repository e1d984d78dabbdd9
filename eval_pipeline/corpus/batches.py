"""Question batches: how a run is split across K graph instances.

A batch is a set of memory namespaces (one LongMemEval question is one user; tier 2 is one
organisation), so memory formation inside a batch is exactly what it is in one instance. The
assignment is pinned by content, not by position: a namespace goes to batch
`sha256(namespace) mod K`, so it does not move when the sample around it changes, and every
run with the same K puts it in the same batch.

The planted canaries (`corpus.canaries`) are the exception: every batch holds every canary,
so each graph instance is checked on its own.

Batch keys are the Dagster partition keys of the graph-bound assets: `batch-02-of-04` is the
second of four (1-based, as people count instances).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.corpus.canaries import is_canary
from eval_pipeline.graph.errors import FixtureError
from eval_pipeline.reconcile.namespace import namespace_of

MAX_BATCHES = 64
ASSIGNMENT = "sha256(namespace) mod K"
ASSIGNMENT_VERSION = 1
_KEY = re.compile(r"^batch-(?P<i>\d{2,})-of-(?P<k>\d{2,})$")


class BatchKey(BaseModel):
    """Batch `index` (1-based) of `batches`."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=1)
    batches: int = Field(ge=1, le=MAX_BATCHES)

    @property
    def key(self) -> str:
        return f"batch-{self.index:02d}-of-{self.batches:02d}"

    @classmethod
    def parse(cls, key: str) -> BatchKey:
        match = _KEY.match(key)
        if match is None:
            raise ValueError(f"not a question-batch key: {key!r} (expected batch-NN-of-KK)")
        batch = cls(index=int(match["i"]), batches=int(match["k"]))
        if batch.index > batch.batches:
            raise ValueError(f"batch {batch.index} of {batch.batches} does not exist ({key!r})")
        return batch

    def holds(self, question_id: str) -> bool:
        # Every batch holds every canary: each graph instance is checked on its own.
        return is_canary(question_id) or batch_index(question_id, self.batches) == self.index


def batch_keys(batches: int) -> list[BatchKey]:
    if not 1 <= batches <= MAX_BATCHES:
        raise ValueError(f"batches must be between 1 and {MAX_BATCHES}, got {batches}")
    return [BatchKey(index=i, batches=batches) for i in range(1, batches + 1)]


def batch_index(question_id: str, batches: int) -> int:
    """The 1-based batch of `question_id`'s namespace among `batches`."""
    digest = hashlib.sha256(namespace_of(question_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % batches + 1


def partitioning_pin(batches: int) -> dict[str, Any]:
    """What the manifest pins: a run over K batches measured each batch on its own instance."""
    return {"batches": batches, "assignment": ASSIGNMENT, "version": ASSIGNMENT_VERSION}


def batch_fixture_rows(rows: Iterable[dict[str, Any]], batch: BatchKey) -> Iterator[dict[str, Any]]:
    """The fixture rows batch `batch` injects: each session in one of its questions'
    haystacks, listing only those questions (a distractor shared with another batch's
    question is injected in both, as it is in each haystack)."""
    for row in rows:
        mine = [q for q in row["question_ids"] if batch.holds(q)]
        if mine:
            out = {**row, "question_ids": mine}
            if "holds_evidence" in row:
                out["holds_evidence"] = [q for q in row["holds_evidence"] if batch.holds(q)]
            yield out


def write_batch_fixtures(source: Path, target: Path, batch: BatchKey) -> int:
    """Stream batch `batch`'s rows of fixtures file `source` into `target` (one JSON object
    per line, as read); returns how many sessions it holds. Lines are parsed, filtered and
    re-serialised one at a time, so memory stays flat at M scale."""
    sessions = 0
    with open(source, encoding="utf-8") as src, open(target, "w", encoding="utf-8") as out:
        for lineno, line in enumerate(src, 1):
            if not line.strip():
                continue
            try:
                fixture = json.loads(line)
            except json.JSONDecodeError as exc:
                raise FixtureError(f"{source}:{lineno}: invalid JSON ({exc.msg})") from None
            for row in batch_fixture_rows([fixture], batch):
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                sessions += 1
    return sessions
