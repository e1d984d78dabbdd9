"""Record which asset a failed run died in, however the run was launched.

Each failure becomes one JSON line in `<state dir>/ops/failures.jsonl`, one per failed run
(deduplicated by run id), written by one function (`record_failure`) from three places:
- every asset records its own failure as it raises (`records_failures`), so a step failure is
  recorded with or without a daemon, from the CLI, the UI or the schedule;
- the chain driver records a failed blocking check and a batch worker that died
  (`ops/chain.py`);
- the run-failure sensor (needs the daemon) records what no step could: a crashed run.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.assets.tags import CHAIN_TAG, TRIGGER_TAG
from eval_pipeline.llm.credentials import PRIVATE_FILE, redact
from eval_pipeline.settings import state_dir


def failures_path() -> Path:
    return state_dir() / "ops" / "failures.jsonl"


def trigger_of(run: dg.DagsterRun) -> str:
    return run.tags.get(TRIGGER_TAG, run.tags.get("dagster/schedule_name", "manual"))


def record_failure(
    run: dg.DagsterRun,
    *,
    assets: list[str],
    error: str,
    reason: str = "STEP_FAILURE",
    checks: list[str] | None = None,
    steps: list[dict[str, Any]] | None = None,
    will_retry: bool = False,
) -> None:
    """Append one failure record (redacted: error texts can quote anything) to a private
    file; a run already recorded is not recorded twice."""
    if run.run_id in recorded_run_ids():
        return
    record = {
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run_id": run.run_id,
        "chain_run_id": run.tags.get(CHAIN_TAG),
        "job": run.job_name,
        "trigger": trigger_of(run),
        "failure_reason": reason,
        "will_retry": will_retry,
        "failed_assets": assets,
        "failed_checks": checks or [],
        "failed_steps": steps
        if steps is not None
        else [{"step": a, "assets": [a], "error": error} for a in assets],
        "message": error,
    }
    path = failures_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(redact(json.dumps(record, sort_keys=True)) + "\n")
    os.chmod(path, PRIVATE_FILE)


def recorded_run_ids(path: Path | None = None) -> set[str]:
    try:
        lines = (path or failures_path()).read_text(encoding="utf-8").splitlines()
    except OSError:
        return set()
    out = set()
    for line in lines:
        try:
            out.add(json.loads(line).get("run_id"))
        except ValueError:
            continue
    return out


def one_line(exc: BaseException) -> str:
    """An error as one line: a dg.Failure's own description, else `Type: message`."""
    text = " ".join(str(getattr(exc, "description", None) or exc).split())
    return text if isinstance(exc, dg.Failure) else f"{type(exc).__name__}: {text}"


def records_failures(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an asset's function (plain or generator): a failure is recorded as it happens
    (no daemon needed), then re-raised unchanged."""

    def note(context: Any, exc: BaseException) -> None:
        asset = context.asset_key.to_user_string()
        record_failure(context.run, assets=[asset], error=one_line(exc))

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator(context, *args, **kwargs):  # unannotated: the wrapped signature counts
            try:
                yield from fn(context, *args, **kwargs)
            except Exception as exc:
                note(context, exc)
                raise

        return generator

    @functools.wraps(fn)
    def wrapper(context, *args, **kwargs):
        try:
            return fn(context, *args, **kwargs)
        except Exception as exc:
            note(context, exc)
            raise

    return wrapper
