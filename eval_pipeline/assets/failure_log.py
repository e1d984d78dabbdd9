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
from collections.abc import Callable
from typing import Any

import dagster as dg

from eval_pipeline.assets.tags import CHAIN_TAG, TRIGGER_TAG
from eval_pipeline.failure_records import FailedStep, append_failure, read_failures


def trigger_of(run: dg.DagsterRun) -> str:
    return run.tags.get(TRIGGER_TAG, run.tags.get("dagster/schedule_name", "manual"))


def record_failure(
    run: dg.DagsterRun,
    *,
    assets: list[str],
    error: str,
    reason: str | None = "STEP_FAILURE",
    checks: list[str] | None = None,
    steps: list[FailedStep] | None = None,
    will_retry: bool = False,
) -> None:
    """One `FailureRecord` for a failed run (`eval_pipeline.failure_records`: redacted, to
    a private file); a run already recorded is not recorded twice."""
    if run.run_id in recorded_run_ids():
        return
    append_failure(
        run_id=run.run_id,
        chain_run_id=run.tags.get(CHAIN_TAG),
        job=run.job_name,
        trigger=trigger_of(run),
        failure_reason=reason,
        will_retry=will_retry,
        failed_assets=assets,
        failed_checks=checks,
        failed_steps=steps or [FailedStep(step=a, assets=[a], error=error) for a in assets],
        message=error,
    )


def recorded_run_ids() -> set[str]:
    return {r.run_id for r in read_failures() if r.run_id}


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
