"""`eval-pipeline compare`, `calibrate` and `report`: argparse subcommands.

`register(subparsers)` adds them to the main parser. Exit codes: 0 when the command completed
(whatever the verdict), 3 when it refused (comparability pins differ, runs are not repeats),
2 for input that cannot be used (no such run, unreadable bundle or noise floor). Each problem
is printed on stderr, one line per differing pin.

Noise floors live per configuration in `<runs_dir>/noise_floors/<key>.json` (see
`eval_pipeline.runs.calibrate`), `<runs_dir>` being `--runs-dir` when given, else the
directory holding the (first / base) run. `calibrate` without `--out` writes there; `compare`
without `--noise-floor` looks there for the base's configuration, then the candidate's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eval_pipeline.runs.calibrate import (
    CalibrationRefused,
    NoiseFloor,
    NoiseFloorError,
    calibrate,
    floor_path_for,
    save_noise_floor,
)
from eval_pipeline.runs.compare import (
    Comparison,
    ComparisonRefused,
    NoiseFloorMismatch,
    compare,
    delta_line,
    efficiency_line,
    flip_line,
    formation_line,
    judge_agreement_line,
    panel_lines,
    stage_line,
)
from eval_pipeline.runs.load import BundleError, RunBundle, load_run, resolve_run
from eval_pipeline.runs.report import write_comparison_report, write_run_report

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 3
PROG = "eval-pipeline"


def default_runs_dir() -> Path:
    from eval_pipeline.settings import state_dir

    return state_dir() / "runs"


def _runs_dir(args: argparse.Namespace) -> Path:
    return Path(args.runs_dir).expanduser() if args.runs_dir else default_runs_dir()


def _floors_home(args: argparse.Namespace, run: RunBundle) -> Path:
    """The runs directory whose noise_floors/ serves `run`: --runs-dir, else the run's own."""
    return Path(args.runs_dir).expanduser() if args.runs_dir else run.path.parent


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def print_comparison(c: Comparison, report: Path) -> None:
    print(f"base:      {c.base.name}")
    print(f"candidate: {c.candidate.name}")
    if c.calibrated:
        print(f"noise floor: {c.noise_floor_source or c.noise_floor or 'given'}")
    else:
        print("noise floor: NOT CALIBRATED (every delta is 'cannot tell'; see `calibrate`)")
        if c.noise_floor_source:
            print(f"  {c.noise_floor_source}")
    for tier in c.tiers:
        print(delta_line(tier))
        for d in c.by_type:
            if d.tier == tier.tier:
                print("  " + delta_line(d))
    for d in c.abstention:
        print(delta_line(d) + " (abstention: apart, never decides)")
    for e in c.efficiency:
        print(efficiency_line(e))
    if c.formation is not None:
        print(formation_line(c.formation))
    for tier, moved in c.stages.items():
        print(stage_line(tier, moved))
    print(f"lost ({len(c.lost)}): covered in base, not in candidate")
    for f in c.lost:
        print("  " + flip_line(f))
    print(f"gained ({len(c.gained)}): covered in candidate, not in base")
    for f in c.gained:
        print("  " + flip_line(f))
    for a in c.judge_agreement:
        print(judge_agreement_line(a))
    for line in panel_lines(c):  # the judge panel's band, when the runs were scored under one
        print(line)
    print(f"verdict: {c.verdict} ({c.verdict_reason})")
    print(f"report: {report}")


def cmd_compare(args: argparse.Namespace) -> int:
    runs_dir = _runs_dir(args)
    try:
        base = load_run(resolve_run(args.base, runs_dir))
        candidate = load_run(resolve_run(args.candidate, runs_dir))
        if args.noise_floor:
            comparison = compare(base, candidate, args.noise_floor)
        else:
            comparison = compare(base, candidate, runs_dir=_floors_home(args, base))
        report = write_comparison_report(comparison, args.out)
    except ComparisonRefused as exc:
        _error(str(exc))
        for line in exc.lines():
            print(f"  {line}", file=sys.stderr)
        return EXIT_REFUSED
    except (BundleError, NoiseFloorError, NoiseFloorMismatch, OSError) as exc:
        _error(str(exc))
        return EXIT_BAD_INPUT
    print_comparison(comparison, report)
    return EXIT_OK


def print_floor(floor: NoiseFloor, path: Path) -> None:
    print(
        f"calibrated on {len(floor.runs)} repeats: " + ", ".join(Path(r).name for r in floor.runs)
    )
    for tier, entry in floor.tiers.items():
        cov = entry.coverage
        if cov.floor_pp is None:
            print(f"tier {tier}: no floor (nothing scored in the repeats)")
            continue
        types = ", ".join(
            f"{t} {e.floor_pp:.1f}" for t, e in entry.by_type.items() if e.floor_pp is not None
        )
        print(
            f"tier {tier}: noise floor {cov.floor_pp:.1f} pp (spread {cov.spread_pp:.1f} pp, "
            f"bootstrap {cov.bootstrap_half_width_pp:.1f} pp); per type (pp): {types or 'none'}"
        )
    print(f"stability: {floor.stability_line}")
    if floor.independence:
        print(f"independent samples: {floor.independence}")
    print(f"noise floor: {path}")


def cmd_calibrate(args: argparse.Namespace) -> int:
    runs_dir = _runs_dir(args)
    try:
        runs = [load_run(resolve_run(ref, runs_dir)) for ref in args.runs]
        floor = calibrate(runs)
        path = save_noise_floor(
            floor, args.out or floor_path_for(_floors_home(args, runs[0]), runs[0])
        )
    except CalibrationRefused as exc:
        lines = str(exc).splitlines()
        _error(lines[0])
        for line in lines[1:]:
            print(line, file=sys.stderr)
        return EXIT_REFUSED
    except (BundleError, OSError) as exc:
        _error(str(exc))
        return EXIT_BAD_INPUT
    print_floor(floor, path)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    try:
        path = write_run_report(resolve_run(args.run, _runs_dir(args)))
    except (BundleError, OSError) as exc:
        _error(str(exc))
        return EXIT_BAD_INPUT
    print(path)
    return EXIT_OK


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `compare`, `calibrate` and `report` to the main `eval-pipeline` parser."""
    runs_help = "where run names are looked up (default: <state dir>/runs)"

    p = subparsers.add_parser(
        "compare",
        help="compare two runs: per-tier coverage deltas, classification and a verdict",
        description="Refuses (exit 3) when any comparability pin differs, naming every one.",
    )
    p.add_argument("base", metavar="BASE_RUN", help="baseline run directory (or run name)")
    p.add_argument("candidate", metavar="CANDIDATE_RUN", help="candidate run directory or name")
    p.add_argument(
        "--noise-floor",
        metavar="FILE",
        help="a floor file from `calibrate`; default: the one stored for the base's (else the "
        "candidate's) configuration in <runs_dir>/noise_floors/; none: NOT CALIBRATED",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="where comparison.json/.html go (default: <runs_dir>/comparisons/<base>__vs__<cand>)",
    )
    p.add_argument("--runs-dir", metavar="DIR", help=runs_help)
    p.set_defaults(func=cmd_compare)

    p = subparsers.add_parser(
        "calibrate",
        help="noise floor from repeat runs of one configuration",
        description="Repeats: `eval-pipeline run --repeat N` (each repeat its own sample "
        "identity). Refuses (exit 3) runs that are not repeats of one configuration, or not "
        "independent samples (one replaying another's cached LLM answers).",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="two or more repeat runs")
    p.add_argument(
        "--out",
        metavar="FILE",
        help="default: <runs_dir>/noise_floors/<key>.json, one file per configuration "
        "(runs_dir: --runs-dir, else the first run's directory)",
    )
    p.add_argument("--runs-dir", metavar="DIR", help=runs_help)
    p.set_defaults(func=cmd_calibrate)

    p = subparsers.add_parser("report", help="write (or refresh) a run's report.html")
    p.add_argument("run", metavar="RUN", help="run directory or run name")
    p.add_argument("--runs-dir", metavar="DIR", help=runs_help)
    p.set_defaults(func=cmd_report)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (tests, and until the lead wires `register` into the main CLI)."""
    parser = argparse.ArgumentParser(prog=PROG)
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
