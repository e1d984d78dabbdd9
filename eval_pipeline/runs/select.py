"""Pick runs out of a runs directory: the baseline for a comparison, the repeats to calibrate.

Run directory names start with the UTC start time, so name order is time order; a directory
that is not a complete bundle (a crashed write, a comparisons folder) is skipped.

`independent_repeats_of` is what a default calibration should use: `repeats_of` without the
runs calibration would refuse as replays (see `eval_pipeline.runs.calibrate`), each skipped
one with its reason.
"""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.runs.calibrate import replay_problems, run_identities, run_materializations
from eval_pipeline.runs.load import BundleError, RunBundle, list_runs, load_run
from eval_pipeline.runs.pins import (
    COMPARABILITY_PINS,
    CONFIGURATION_PINS,
    differing_values,
    pin_values,
)
from eval_pipeline.runs.protocol import budget_differences


def latest_run(runs_dir: Path) -> Path | None:
    runs = list_runs(runs_dir)
    return runs[-1] if runs else None


def _readable(path: Path) -> RunBundle | None:
    try:
        return load_run(path)
    except BundleError:
        return None  # an unreadable old run is no candidate; it must not block the others


def previous_comparable_run(runs_dir: Path, candidate: RunBundle) -> RunBundle | None:
    """The newest run older than `candidate` that `compare` would not refuse: no comparability
    pin differs (`pins.differing_values`: the embedder only between two runs that embed) and
    the retrieval budget (`runs.protocol`) is the same."""
    wanted = pin_values(candidate, COMPARABILITY_PINS)
    earlier = [p for p in list_runs(runs_dir) if p.name < candidate.name]
    for path in reversed(earlier):
        run = _readable(path)
        if (
            run is not None
            and not differing_values(pin_values(run, COMPARABILITY_PINS), wanted)
            and not budget_differences(run, candidate)
        ):
            return run
    return None


def repeats_of(runs_dir: Path, reference: RunBundle) -> list[RunBundle]:
    """Every run (oldest first, `reference` included) with the same comparability AND
    configuration pins as `reference`: the repeats calibration may use."""
    pins = (*COMPARABILITY_PINS, *CONFIGURATION_PINS)
    wanted = pin_values(reference, pins)
    out = []
    for path in list_runs(runs_dir):
        run = reference if path.resolve() == reference.path else _readable(path)
        if run is not None and pin_values(run, pins) == wanted:
            out.append(run)
    if all(run.path != reference.path for run in out):
        out.append(reference)  # the reference may live outside runs_dir
    return out


def independent_repeats_of(
    runs_dir: Path, reference: RunBundle
) -> tuple[list[RunBundle], list[str]]:
    """(repeats of `reference` that are independent samples, oldest first; one line per run
    left out and why).

    Newest first, a run is kept unless it cannot be told from a replay on its own (a replayed
    cache without sample identity, accounting from before replay counting), or it shares a
    sample identity or a stage materialization with a run already kept (the newer of a repeat
    and its reproduction is kept). `reference` itself is always kept, so a problem of its own
    is left for `calibrate` to refuse with.
    """
    candidates = repeats_of(runs_dir, reference)
    ordered = [reference, *(r for r in reversed(candidates) if r.path != reference.path)]
    kept: list[RunBundle] = []
    seen: set[str] = set()
    seen_stages: set[str] = set()
    skipped: list[str] = []
    for run in ordered:
        identities = run_identities(run)
        stages = run_materializations(run)
        if run is not reference:
            problems = replay_problems(run)
            if problems:
                skipped.append(f"{run.name} left out: {problems[0].removeprefix(run.name + ': ')}")
                continue
            shared = sorted(identities & seen)
            if shared:
                skipped.append(
                    f"{run.name} left out: sample identity {shared[0]!r} is already that of a "
                    "kept run (a reproduction is not another sample)"
                )
                continue
            reused = sorted(stages & seen_stages)
            if reused:
                skipped.append(
                    f"{run.name} left out: its stage {reused[0]} is also a kept run's "
                    "(one materialization, not another sample)"
                )
                continue
        kept.append(run)
        seen |= identities
        seen_stages |= stages
    position = {run.path: i for i, run in enumerate(candidates)}
    kept.sort(key=lambda run: position.get(run.path, len(position)))
    return kept, skipped
