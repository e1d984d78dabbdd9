"""Comparison and calibration assets: `run_comparison` (with a blocking pins check) and
`noise_floor`, both downstream of `scored_run`.

`run_comparison` never crashes on mismatched pins: it records the refusal in its metadata and
its blocking check `run_comparison_pins_match` is what fails, so the UI shows a red check on a
materialized asset rather than a failed step with a traceback.
"""

from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.assets import GROUP
from eval_pipeline.assets.failure_log import records_failures
from eval_pipeline.assets.handoff import StageOutput
from eval_pipeline.assets.resources import (
    CalibrationResource,
    ComparisonResource,
    PathsResource,
    ScoringResource,
)
from eval_pipeline.config import ComparisonConfig
from eval_pipeline.runs.calibrate import (
    CalibrationRefused,
    NoiseFloor,
    NoiseFloorError,
    calibrate,
    floor_path_for,
    load_noise_floor,
    save_noise_floor,
)
from eval_pipeline.runs.compare import (
    Comparison,
    ComparisonRefused,
    NoiseFloorMismatch,
    check_comparable,
    check_floor,
    compare,
    comparison_markdown,
    find_noise_floor,
)
from eval_pipeline.runs.floor_in_force import FloorInForce, floor_in_force
from eval_pipeline.runs.load import BundleError, RunBundle, load_run, resolve_run
from eval_pipeline.runs.report import (
    RUN_REPORT,
    PoorerReport,
    write_comparison_report,
    write_run_report,
)
from eval_pipeline.runs.select import previous_comparable_run

PREVIOUS = "previous"


def bundle_of(scored_run: StageOutput, runs_dir: Path) -> RunBundle:
    """The bundle the consumed scored_run wrote."""
    return _load(str(scored_run.facts["run_dir"]), runs_dir)


def _load(ref: str, runs_dir: Path) -> RunBundle:
    try:
        return load_run(resolve_run(ref, runs_dir))
    except BundleError as exc:
        raise dg.Failure(str(exc)) from None


def _noise_floor(
    settings: ComparisonConfig, runs_dir: Path, base: RunBundle, candidate: RunBundle
) -> tuple[NoiseFloor | None, str]:
    """(floor, note). An explicitly configured floor must fit; else the one stored for the
    base's or the candidate's configuration, if any."""
    if settings.noise_floor:
        try:
            floor = load_noise_floor(settings.noise_floor)
            check_floor(floor, base)
        except (NoiseFloorError, NoiseFloorMismatch) as exc:
            raise dg.Failure(str(exc)) from None
        return floor, settings.noise_floor
    return find_noise_floor(runs_dir, base, candidate)


def comparison_metadata(c: Comparison, report: Path, run_report: Path) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "verdict": dg.MetadataValue.text(c.verdict),
        "verdict_reason": dg.MetadataValue.text(c.verdict_reason),
        "refused": False,
        "calibrated": c.calibrated,
        "deltas": dg.MetadataValue.md(comparison_markdown(c)),
        "baseline": dg.MetadataValue.path(c.base.path),
        "candidate": dg.MetadataValue.path(c.candidate.path),
        "report": dg.MetadataValue.path(str(report)),
        "comparison_json": dg.MetadataValue.path(str(report.with_suffix(".json"))),
        "run_report": dg.MetadataValue.path(str(run_report)),
        "lost": len(c.lost),
        "gained": len(c.gained),
    }
    # Numbers Dagster can chart across materializations; unscored ones are left out, not 0.
    for d in c.tiers:
        if d.delta_pp is not None:
            meta[f"tier{d.tier}_coverage_delta_pp"] = round(d.delta_pp, 3)
    for r in c.evidence_recall:  # reported beside coverage, never deciding
        if r.delta_pp is not None:
            meta[f"tier{r.tier}_evidence_recall_delta_pp"] = round(r.delta_pp, 3)
    for e in c.efficiency:
        if e.delta_tokens is not None:
            meta[f"tier{e.tier}_payload_tokens_delta"] = e.delta_tokens
    return meta


def _refused_check(refused: ComparisonRefused | None) -> dg.AssetCheckResult:
    if refused is None:
        return dg.AssetCheckResult(
            check_name=PINS_CHECK, passed=True, metadata={"refused_pins": dg.MetadataValue.json([])}
        )
    return dg.AssetCheckResult(
        check_name=PINS_CHECK,
        passed=False,
        description="comparison refused: comparability pins differ or protocol checks "
        "failed: " + ", ".join(refused.pin_names),
        metadata={
            "refused_pins": dg.MetadataValue.json(refused.pin_names),
            "refusal": dg.MetadataValue.md("\n".join(f"- {line}" for line in refused.lines())),
        },
    )


PINS_CHECK = "run_comparison_pins_match"


@dg.asset(
    group_name=GROUP,
    description="The chain's run compared with a baseline: deltas, classification, verdict, "
    "an HTML report. Mismatched pins are recorded here and fail its blocking check.",
    check_specs=[
        dg.AssetCheckSpec(
            PINS_CHECK,
            asset="run_comparison",
            blocking=True,
            description="Baseline and candidate share every comparability pin and retrieval "
            "budget, and neither failed a protocol check (else: refused).",
        )
    ],
)
@records_failures
def run_comparison(
    context: dg.AssetExecutionContext,
    paths: PathsResource,
    scoring: ScoringResource,
    comparison: ComparisonResource,
    scored_run: StageOutput,
) -> dg.MaterializeResult:
    runs_dir = paths.runs_dir(scoring)
    candidate = (
        _load(comparison.candidate, runs_dir)
        if comparison.candidate
        else bundle_of(scored_run, runs_dir)
    )
    try:
        run_report = write_run_report(candidate.path)
    except PoorerReport as exc:  # an old candidate's better report stays; nothing is lost
        context.log.warning(str(exc))
        run_report = candidate.path / RUN_REPORT
    if comparison.baseline == PREVIOUS:
        base = previous_comparable_run(runs_dir, candidate)
        if base is None:
            context.log.info("no earlier run with the same pins: nothing to compare with")
            return dg.MaterializeResult(
                metadata={
                    "verdict": dg.MetadataValue.text("NO BASELINE"),
                    "verdict_reason": dg.MetadataValue.text(
                        "no earlier run in the runs dir shares this run's comparability pins"
                    ),
                    "refused": False,
                    "candidate": dg.MetadataValue.path(str(candidate.path)),
                    "run_report": dg.MetadataValue.path(str(run_report)),
                },
                check_results=[_refused_check(None)],
            )
    else:
        base = _load(comparison.baseline, runs_dir)
    try:
        check_comparable(base, candidate)  # before the noise floor: a refusal comes first
    except ComparisonRefused as exc:
        context.log.error(str(exc))
        return dg.MaterializeResult(
            metadata={
                "verdict": dg.MetadataValue.text("REFUSED"),
                "verdict_reason": dg.MetadataValue.text(str(exc)),
                "refused": True,
                "refused_pins": dg.MetadataValue.json(exc.pin_names),
                "baseline": dg.MetadataValue.path(str(base.path)),
                "candidate": dg.MetadataValue.path(str(candidate.path)),
                "run_report": dg.MetadataValue.path(str(run_report)),
            },
            check_results=[_refused_check(exc)],
        )
    floor, floor_note = _noise_floor(comparison, runs_dir, base, candidate)
    result = compare(base, candidate, floor)
    if floor is not None:
        result = result.model_copy(update={"noise_floor": floor_note})
    report = write_comparison_report(result)
    context.log.info(f"{result.verdict}: {result.verdict_reason}; report {report}")
    meta = comparison_metadata(result, report, run_report)
    meta["noise_floor"] = dg.MetadataValue.text(floor_note)
    return dg.MaterializeResult(metadata=meta, check_results=[_refused_check(None)])


def floor_markdown(floor: NoiseFloor) -> str:
    out = [
        "| tier | scope | floor (pp) | spread (pp) | bootstrap (pp) | unstable questions |",
        "|---|---|---|---|---|---|",
    ]

    def cell(v: float | None) -> str:
        return "unscored" if v is None else f"{v:.1f}"

    for tier, entry in floor.tiers.items():
        scopes = [("all answerable", entry.coverage), *entry.by_type.items()]
        if entry.abstention is not None:
            scopes.append(("abstention", entry.abstention))
        for name, e in scopes:
            out.append(
                f"| {tier} | {name} | {cell(e.floor_pp)} | {cell(e.spread_pp)} | "
                f"{cell(e.bootstrap_half_width_pp)} | {e.unstable} |"
            )
    return "\n".join(out)


@dg.asset(
    group_name=GROUP,
    description="The noise floor of the run's configuration (noise_floors/<key>.json, found "
    "by run_comparison and `eval-pipeline compare`): calibrated only when asked (the "
    "calibration runs given, as `eval-pipeline run --repeat N` gives its repeats); otherwise "
    "the floor in force is read and reported, never replaced.",
)
@records_failures
def noise_floor(
    context: dg.AssetExecutionContext,
    paths: PathsResource,
    scoring: ScoringResource,
    calibration: CalibrationResource,
    scored_run: StageOutput,
) -> dg.MaterializeResult:
    runs_dir = paths.runs_dir(scoring)
    if not calibration.runs:  # not asked: report the floor in force, write nothing
        try:
            status = floor_in_force(runs_dir, bundle_of(scored_run, runs_dir), calibration.out)
        except NoiseFloorError as exc:
            raise dg.Failure(str(exc)) from None
        context.log.info(status.note())
        return dg.MaterializeResult(metadata=_in_force_metadata(status))
    runs = [_load(ref, runs_dir) for ref in calibration.runs]
    try:
        floor = calibrate(runs)
    except CalibrationRefused as exc:
        raise dg.Failure(str(exc)) from None
    path = save_noise_floor(floor, calibration.out or floor_path_for(runs_dir, runs[0]))
    context.log.info(f"noise floor over {len(runs)} repeats: {path}")
    meta: dict[str, Any] = {
        "calibrated": True,
        "written": True,
        "noise_floor": dg.MetadataValue.path(str(path)),
        "repeats": len(runs),
        "runs": dg.MetadataValue.json([r.name for r in runs]),
        "floors": dg.MetadataValue.md(floor_markdown(floor)),
        "stability": dg.MetadataValue.text(floor.stability_line),
    }
    for tier, entry in floor.tiers.items():
        if entry.coverage.floor_pp is not None:
            meta[f"tier{tier}_floor_pp"] = round(entry.coverage.floor_pp, 3)
    return dg.MaterializeResult(metadata=meta)


def _in_force_metadata(status: FloorInForce) -> dict[str, Any]:
    floor = status.floor
    meta: dict[str, Any] = {
        "calibrated": floor is not None,
        "written": False,  # an ordinary run never replaces the floor
        "noise_floor": dg.MetadataValue.path(status.path),
        "reason": dg.MetadataValue.text(status.note()),
        "repeats_available": len(status.repeats),
        "unused_repeats": dg.MetadataValue.json(status.unused),
    }
    if floor is None:
        return meta
    meta.update(
        repeats=status.calibrated_on,
        runs=dg.MetadataValue.json([Path(r).name for r in floor.runs]),
        floors=dg.MetadataValue.md(floor_markdown(floor)),
        stability=dg.MetadataValue.text(floor.stability_line),
    )
    for tier, entry in floor.tiers.items():
        if entry.coverage.floor_pp is not None:
            meta[f"tier{tier}_floor_pp"] = round(entry.coverage.floor_pp, 3)
    return meta


COMPARE_ASSETS = [run_comparison, noise_floor]
