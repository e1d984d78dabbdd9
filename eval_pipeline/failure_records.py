"""The failure log: one `FailureRecord` per failed run in `<state dir>/ops/failures.jsonl`.

Which asset (or check) a Dagster run died in, and why, however it was launched: written by
a failing asset step, by the chain's stage runner (a failed blocking check) and by the
run-failure sensor (a crashed run). Not a question's infrastructure failure (that is
`failures.InfraFailure`, inside a bundle): this is the pipeline run itself failing.

`append_failure` is the one writer: it builds the record through the model, redacts the line
(error texts can quote anything, a key included) and keeps the file private. The JSON shape
is what the three writers wrote before versioning, plus `schema_version`; `chain_run_id` and
`failed_checks` appear only when the writer has them, as before.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel

from eval_pipeline.llm.credentials import PRIVATE_FILE, redact
from eval_pipeline.runs.records.base import Part, Record, for_reading, for_writing
from eval_pipeline.settings import state_dir

FAILURE_RECORD_SCHEMA_VERSION = 1


class FailedStep(Part):
    step: str
    assets: list[str]  # the asset keys the step planned (a multi-asset step is several)
    error: str | None  # one line: the innermost user-level error


class FailureRecord(Record):
    """One line of `<state dir>/ops/failures.jsonl`."""

    VERSION: ClassVar[int] = FAILURE_RECORD_SCHEMA_VERSION
    FILE: ClassVar[str] = "ops/failures.jsonl"

    recorded_at: str  # UTC, "%Y-%m-%dT%H:%M:%SZ"
    run_id: str | None  # the failed Dagster run (None: a stage that never started one)
    chain_run_id: str | None = None  # the eval_chain driver / CLI chain, when known
    job: str
    trigger: str  # manual | schedule | cli ... (eval_pipeline/trigger tag)
    # STEP_FAILURE, CHECK_FAILURE, or Dagster's crash reason (UNEXPECTED_TERMINATION, ...).
    failure_reason: str | None
    will_retry: bool = False
    failed_assets: list[str]
    failed_checks: list[str] | None = None
    failed_steps: list[FailedStep]
    message: str | None


def failures_path() -> Path:
    return state_dir() / "ops" / "failures.jsonl"


def utc_stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def append_failure(
    *,
    run_id: str | None,
    job: str,
    trigger: str,
    failed_steps: Sequence[FailedStep | dict],
    message: str | None,
    failure_reason: str | None = "STEP_FAILURE",
    will_retry: bool = False,
    failed_assets: Sequence[str] | None = None,
    chain_run_id: str | None = None,
    failed_checks: Sequence[str] | None = None,
    path: Path | None = None,
) -> FailureRecord:
    """Build one FailureRecord and append it, redacted, to the private failure log.

    `failed_assets` defaults to every asset of `failed_steps` (sorted, once each);
    `chain_run_id` and `failed_checks` are written only when given (not None)."""
    steps = [s.model_dump() if isinstance(s, BaseModel) else dict(s) for s in failed_steps]
    fields: dict = {
        "recorded_at": utc_stamp(),
        "run_id": run_id,
        "job": job,
        "trigger": trigger,
        "failure_reason": failure_reason,
        "will_retry": will_retry,
        "failed_assets": (
            list(failed_assets)
            if failed_assets is not None
            else sorted({a for s in steps for a in s.get("assets") or []})
        ),
        "failed_steps": steps,
        "message": message,
    }
    if chain_run_id is not None:
        fields["chain_run_id"] = chain_run_id
    if failed_checks is not None:
        fields["failed_checks"] = list(failed_checks)
    line = for_writing(FailureRecord, fields, FailureRecord.FILE)
    path = path or failures_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = redact(json.dumps(line, sort_keys=True))
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    os.chmod(path, PRIVATE_FILE)
    return FailureRecord.model_validate(line)


def read_failures(path: Path | None = None) -> list[FailureRecord]:
    """Every record of the failure log, oldest first; a line that is not valid JSON (a write
    cut short) is skipped, a record that does not match its model is an error."""
    path = path or failures_path()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for n, line in enumerate(lines, 1):
        try:
            raw = json.loads(line)
        except ValueError:
            continue
        out.append(for_reading(FailureRecord, raw, f"{path} line {n}"))
    return out
