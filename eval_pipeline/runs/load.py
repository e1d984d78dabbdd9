"""Read a run bundle back: the manifest, one validated row per question, the summary.

Every file is parsed through its record model (`eval_pipeline.runs.records`): a bundle that
does not match is a BundleError naming the file, line and field. A record without
`schema_version` (a bundle from before versioning) reads as version 1; a field this code
does not know is kept, so a newer bundle with more fields still loads.

Readers keep the access they had: `manifest` and `summary` are the dicts as read, and each
row is a `ResultRow` view (tier as text, the fields they use typed, the rest kept as it is).
The typed records are on `RunBundle.records` for code that wants them.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.runs import records
from eval_pipeline.runs.bundle import BUNDLE_FILES
from eval_pipeline.runs.records import for_reading


class BundleError(ValueError):
    """A directory that is not a readable run bundle (missing or malformed file)."""


class MetricEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    score: float | None = None
    passed: bool | None = None
    gating: bool = False
    reason: str = ""
    error: str | None = None


class ResultRow(BaseModel):
    """A reader's view of one line of results.jsonl (the record is `records.ResultRow`).
    `covered` is None when the question was not scored."""

    model_config = ConfigDict(extra="allow")

    question_id: str
    tier: str
    question_type: str
    abstention: bool
    covered: bool | None
    weakest_link: str | None = None
    payload_tokens: int | None = None
    metrics: dict[str, MetricEntry] = Field(default_factory=dict)
    retrieval_metrics: dict[str, Any] = Field(default_factory=dict)
    failure_stage: str | None = None  # absent before stages were attributed
    evidence_memory: dict[str, Any] | None = None

    @field_validator("tier", mode="before")
    @classmethod
    def _tier_as_text(cls, value: Any) -> str:
        # summary.json keys tiers by string; rows carry an int. One spelling everywhere.
        return str(value)


class BundleRecords(BaseModel):
    """A bundle's files as their typed records."""

    manifest: records.Manifest
    rows: list[records.ResultRow]
    summary: records.Summary
    hypotheses: list[records.Hypothesis]


class RunBundle(BaseModel):
    path: Path
    manifest: dict[str, Any]
    rows: list[ResultRow]
    summary: dict[str, Any]
    records: BundleRecords | None = None  # None for a bundle not read by load_run

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def pins(self) -> dict[str, Any]:
        return self.manifest.get("pins") or {}

    @property
    def repeat(self) -> dict[str, Any] | None:
        """`manifest["repeat"]`: {"index", "of", "salt", "sample_identity", "includes_reconcile"}
        for a repeat of `run --repeat N`; None for a plain run (or a bundle from before)."""
        value = self.manifest.get("repeat")
        return value if isinstance(value, dict) else None

    @property
    def sample_identity(self) -> str | None:
        """The repeat's sample identity ("<salt>/<k>"); None for a plain run."""
        value = (self.repeat or {}).get("sample_identity")
        return value if isinstance(value, str) and value else None

    @property
    def llm_usage(self) -> dict[str, Any]:
        """`manifest["llm_usage"]`: stage → accounting (None for an offline stage)."""
        value = self.manifest.get("llm_usage")
        return value if isinstance(value, dict) else {}

    @property
    def started_at(self) -> datetime | None:
        try:
            return datetime.fromisoformat(self.manifest["started_at"])
        except (KeyError, TypeError, ValueError):
            return None

    def by_id(self) -> dict[str, ResultRow]:
        return {r.question_id: r for r in self.rows}

    def tiers(self) -> list[str]:
        return sorted({r.tier for r in self.rows}, key=_tier_key)


def _tier_key(tier: str) -> tuple[int, str]:
    return (int(tier), "") if tier.isdigit() else (1 << 30, tier)


def is_bundle(path: Path) -> bool:
    return all((path / name).is_file() for name in BUNDLE_FILES)


def load_run(path: str | Path) -> RunBundle:
    path = Path(path).expanduser().resolve()
    if not path.is_dir():
        raise BundleError(f"not a run directory: {path}")
    missing = [name for name in BUNDLE_FILES if not (path / name).is_file()]
    if missing:
        raise BundleError(f"not a complete run bundle: {path} lacks {', '.join(missing)}")
    try:
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
        summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
        raw_rows = list(read_jsonl(path / "results.jsonl"))
        typed = BundleRecords(
            manifest=for_reading(records.Manifest, manifest, "manifest.json"),
            rows=[
                for_reading(records.ResultRow, r, _row_where(n, r))
                for n, r in enumerate(raw_rows, 1)
            ],
            summary=for_reading(records.Summary, summary, "summary.json"),
            hypotheses=[
                for_reading(records.Hypothesis, h, f"hypotheses.jsonl line {n}")
                for n, h in enumerate(read_jsonl(path / "hypotheses.jsonl"), 1)
            ],
        )
        rows = [ResultRow.model_validate(r) for r in raw_rows]
    except (ValueError, ValidationError) as exc:  # a RecordError is a ValueError
        first = str(exc).splitlines()[0]
        raise BundleError(f"unreadable run bundle {path}: {first}") from None
    ids = [r.question_id for r in rows]
    if len(set(ids)) != len(ids):
        raise BundleError(f"run bundle {path}: a question id appears twice in results.jsonl")
    return RunBundle(path=path, manifest=manifest, rows=rows, summary=summary, records=typed)


def _row_where(n: int, row: Any) -> str:
    qid = row.get("question_id") if isinstance(row, dict) else None
    return f"results.jsonl line {n}" + (f" (question {qid})" if qid else "")


def list_runs(runs_dir: str | Path) -> list[Path]:
    """Complete bundles in a runs directory, oldest first (names start with a UTC stamp)."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    return sorted(p for p in runs_dir.iterdir() if p.is_dir() and is_bundle(p))


def resolve_run(ref: str | Path, runs_dir: Path | None = None) -> Path:
    """A run given as a path, or as a run directory name inside `runs_dir`."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return path.resolve()
    if runs_dir is not None and (Path(runs_dir) / str(ref)).is_dir():
        return (Path(runs_dir) / str(ref)).resolve()
    where = f" (nor a run name in {runs_dir})" if runs_dir is not None else ""
    raise BundleError(f"no such run directory: {ref}{where}")
