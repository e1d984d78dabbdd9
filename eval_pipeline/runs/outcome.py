"""What `eval-pipeline compare` ends with: the conditions a comparison met, which of them fail
it (`--fail-on`), its exit code, and the one JSON document `--json` prints.

Exit codes (docs/cli.md lists them):

| code | condition |
|---|---|
| 0 | nothing chosen with `--fail-on` holds (IMPROVED, INCONCLUSIVE, or a condition not chosen) |
| 2 | unusable input (no such run, unreadable bundle or noise floor, a bad `--fail-on`) |
| 3 | `refused`: comparability pins differ, a protocol check failed, budgets differ |
| 4 | `incomplete`: base or candidate left questions unscored by infrastructure |
| 5 | `regressed`: the verdict is REGRESSED |
| 6 | `inconclusive`: the verdict is INCONCLUSIVE (NOT CALIBRATED included) |

1 is never chosen: it is what Python exits with on a traceback, and a crash must not read as
the system's regression. When several chosen conditions hold, the first of regressed,
incomplete, inconclusive decides the code; every one that held is in the JSON document.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel

from eval_pipeline.runs.calibrate import NoiseFloor
from eval_pipeline.runs.compare import Comparison
from eval_pipeline.runs.listing import RunEntry
from eval_pipeline.runs.load import RunBundle

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 3
EXIT_INCOMPLETE = 4
EXIT_REGRESSED = 5
EXIT_INCONCLUSIVE = 6

Condition = Literal["regressed", "incomplete", "inconclusive", "refused"]
CONDITIONS: tuple[Condition, ...] = ("regressed", "incomplete", "inconclusive", "refused")
DEFAULT_FAIL_ON: tuple[Condition, ...] = ("regressed", "incomplete", "refused")
# The code of each condition; their order is the precedence when several fail a comparison.
CODES: dict[Condition, int] = {
    "refused": EXIT_REFUSED,
    "regressed": EXIT_REGRESSED,
    "incomplete": EXIT_INCOMPLETE,
    "inconclusive": EXIT_INCONCLUSIVE,
}
OUTPUT_VERSION = 1  # of every `--json` document; bumped only when a reader would break


def parse_fail_on(text: str) -> tuple[Condition, ...]:
    """`regressed,incomplete` → the conditions; `none` (or empty) → none: never fail. A name
    that is not a condition is a ValueError naming it and the valid ones."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["none"]:
        return ()
    unknown = [n for n in names if n not in CONDITIONS]
    if unknown:
        raise ValueError(
            f"--fail-on: unknown condition {unknown[0]!r}; valid: {', '.join(CONDITIONS)}, none"
        )
    return tuple(c for c in CONDITIONS if c in names)


def exit_code(held: Iterable[Condition], fail_on: Iterable[Condition]) -> int:
    chosen = set(held) & set(fail_on)
    return next((CODES[c] for c in CODES if c in chosen), EXIT_OK)


class RunStatus(BaseModel):
    """Whether a compared run measured every question (summary.json's `status`)."""

    name: str
    path: str
    status: Literal["complete", "incomplete"] | None  # None: the bundle records none
    unscored_infrastructure: int = 0
    by_cause: dict[str, int] = {}

    @property
    def incomplete(self) -> bool:
        return self.status == "incomplete"

    def line(self, role: str) -> str:
        """One line for the terminal: the run and whether it is complete."""
        if self.status == "incomplete":
            causes = ", ".join(f"{k} {v}" for k, v in self.by_cause.items()) or "cause not recorded"
            return (
                f"{role}: {self.name} INCOMPLETE: {self.unscored_infrastructure} question(s) "
                f"unscored by infrastructure ({causes}); left out of every pair"
            )
        return f"{role}: {self.name} ({self.status or 'status not recorded'})"


def run_status(run: RunBundle) -> RunStatus:
    status = run.summary.get("status") or run.manifest.get("status")
    info = run.summary.get("incomplete") or run.manifest.get("incomplete") or {}
    return RunStatus(
        name=run.name,
        path=str(run.path),
        status=status if status in ("complete", "incomplete") else None,
        unscored_infrastructure=int(info.get("questions") or 0),
        by_cause={str(k): int(v) for k, v in (info.get("by_cause") or {}).items()},
    )


class Refusal(BaseModel):
    message: str
    differences: list[dict[str, Any]]  # {"name", "base", "candidate", "line"}


class CompareOutput(BaseModel):
    """`eval-pipeline compare --json`: one document on stdout, whatever happened.

    `outcome` is the verdict in lower case, or `refused` / `error` (then `comparison` is
    null and `refusal` / `error` says why). `conditions` lists every `--fail-on` condition
    that held, `failed_on` those among them that were chosen; `exit_code` is the process's.
    `comparison` is exactly comparison.json."""

    command: Literal["compare"] = "compare"
    output_version: int = OUTPUT_VERSION
    outcome: Literal["regressed", "improved", "inconclusive", "refused", "error"]
    exit_code: int
    fail_on: list[Condition]
    conditions: list[Condition]
    failed_on: list[Condition]
    base: RunStatus | None = None
    candidate: RunStatus | None = None
    report: str | None = None  # comparison.html
    comparison: Comparison | None = None
    refusal: Refusal | None = None
    error: str | None = None


def conditions_of(verdict: str, statuses: Iterable[RunStatus]) -> list[Condition]:
    held: list[Condition] = []
    if verdict == "REGRESSED":
        held.append("regressed")
    if any(s.incomplete for s in statuses):
        held.append("incomplete")
    if verdict == "INCONCLUSIVE":
        held.append("inconclusive")
    return held


def dumps(doc: BaseModel) -> str:
    """One JSON document: no NaN (a null is a null), keys as the model orders them."""
    return json.dumps(doc.model_dump(mode="json"), ensure_ascii=False, allow_nan=False)


class CalibrateOutput(BaseModel):
    """`eval-pipeline calibrate --json`: `noise_floor` is the file written (what compare
    reads), `floor` its content; on a refusal `refusal` holds the message's lines."""

    command: Literal["calibrate"] = "calibrate"
    output_version: int = OUTPUT_VERSION
    outcome: Literal["calibrated", "refused", "error"]
    exit_code: int
    noise_floor: str | None = None
    floor: NoiseFloor | None = None
    refusal: list[str] | None = None
    error: str | None = None


class ReportOutput(BaseModel):
    """`eval-pipeline report --json`: the report written, or why not."""

    command: Literal["report"] = "report"
    output_version: int = OUTPUT_VERSION
    outcome: Literal["written", "error"]
    exit_code: int
    run: str | None = None
    report: str | None = None
    error: str | None = None


class RunRepeat(BaseModel):
    """One pass of the chain (the run, or one of its repeats)."""

    run_dir: str | None  # its bundle; None when no bundle was written
    status: Literal["complete", "incomplete", "failed"]
    failed_stage: str | None = None
    error: str | None = None


class RunOutput(BaseModel):
    """`eval-pipeline run --json`: `outcome` is what the exit code says (complete 0, failed 1,
    refused 3, incomplete 4; a failure wins over an incomplete repeat); `runs` holds each
    bundle written as `eval-pipeline runs --json` lists it (status, keys, headline numbers
    per tier)."""

    command: Literal["run"] = "run"
    output_version: int = OUTPUT_VERSION
    outcome: Literal["complete", "incomplete", "failed", "refused", "interrupted"]
    exit_code: int
    error: str | None = None
    salt: str | None = None
    repeats: list[RunRepeat] = []
    runs: list[RunEntry] = []
    report: str | None = None  # the first bundle's report.html


class ErrorOutput(BaseModel):
    """Any command's `--json` document when its input could not be used (exit 2)."""

    command: str
    output_version: int = OUTPUT_VERSION
    outcome: Literal["error"] = "error"
    exit_code: int
    error: str
