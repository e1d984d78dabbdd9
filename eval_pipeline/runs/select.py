"""Pick runs out of a runs directory: the baseline for a comparison, the repeats to calibrate.

Run directory names start with the UTC start time, so name order is time order; a directory
that is not a complete bundle (a crashed write, a comparisons folder) is skipped.
"""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.runs.load import BundleError, RunBundle, list_runs, load_run
from eval_pipeline.runs.pins import COMPARABILITY_PINS, CONFIGURATION_PINS, pin_values


def latest_run(runs_dir: Path) -> Path | None:
    runs = list_runs(runs_dir)
    return runs[-1] if runs else None


def _readable(path: Path) -> RunBundle | None:
    try:
        return load_run(path)
    except BundleError:
        return None  # an unreadable old run is no candidate; it must not block the others


def previous_comparable_run(runs_dir: Path, candidate: RunBundle) -> RunBundle | None:
    """The newest run older than `candidate` whose comparability pins all equal its own."""
    wanted = pin_values(candidate, COMPARABILITY_PINS)
    earlier = [p for p in list_runs(runs_dir) if p.name < candidate.name]
    for path in reversed(earlier):
        run = _readable(path)
        if run is not None and pin_values(run, COMPARABILITY_PINS) == wanted:
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
