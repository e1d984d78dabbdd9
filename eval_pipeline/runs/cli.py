"""`eval-pipeline compare`, `calibrate`, `report` and `runs`: argparse subcommands.

`register(subparsers)` adds them to the main parser. Exit codes: 0 when the command completed,
3 when it refused (comparability pins differ, runs are not repeats), 2 for input that cannot
be used (no such run, unreadable bundle or noise floor). `compare` also fails on what
`--fail-on` chooses (`runs.outcome`: 4 incomplete, 5 regressed, 6 inconclusive). Each problem
is printed on stderr, one line per differing pin. With `--json` each prints one JSON document
on stdout (`runs.outcome`, `runs.listing`) and nothing else there.

Noise floors live per configuration in `<runs_dir>/noise_floors/<key>.json` (see
`eval_pipeline.runs.calibrate`), `<runs_dir>` being `--runs-dir` when given, else the
directory holding the (first / base) run. `calibrate` without `--out` writes there; `compare`
without `--noise-floor` looks there for the base's configuration, then the candidate's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

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
from eval_pipeline.runs.listing import (
    SORT_KEYS,
    RunsListing,
    list_entries,
    table_lines,
    to_csv,
)
from eval_pipeline.runs.load import BundleError, RunBundle, load_run, resolve_run
from eval_pipeline.runs.outcome import (
    DEFAULT_FAIL_ON,
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    CalibrateOutput,
    CompareOutput,
    Condition,
    Refusal,
    ReportOutput,
    RunStatus,
    conditions_of,
    dumps,
    exit_code,
    parse_fail_on,
    run_status,
)
from eval_pipeline.runs.recall_delta import recall_line
from eval_pipeline.runs.report import write_comparison_report, write_run_report

PROG = "eval-pipeline"
JSON_HELP = "print one JSON document on stdout and nothing else (docs/cli.md has its shape)"


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


def print_comparison(c: Comparison, report: Path, statuses: Sequence[RunStatus] = ()) -> None:
    print(f"base:      {c.base.name}")
    print(f"candidate: {c.candidate.name}")
    for role, status in zip(("base", "candidate"), statuses, strict=False):
        if status.incomplete:  # said where a reader of the terminal sees it, not only in HTML
            print(status.line(role))
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
    for r in c.evidence_recall:  # what separates memories when the reader dominates coverage
        print(recall_line(r))
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
    incomplete = [s for s in statuses if s.incomplete]
    if incomplete:
        print(
            "INCOMPLETE: " + ", ".join(s.name for s in incomplete) + " left questions unscored "
            "by infrastructure; they are out of every pair, so fewer questions decide"
        )
    print(f"verdict: {c.verdict} ({c.verdict_reason})")
    print(f"report: {report}")


def _emit(args: argparse.Namespace, doc: BaseModel) -> None:
    if getattr(args, "json", False):
        print(dumps(doc))


def _failing(code: int, failed_on: Sequence[str], fail_on: Sequence[str]) -> None:
    """One line on stderr saying why the command exits non-zero (a CI log reads it)."""
    if code != EXIT_OK:
        chosen = ",".join(fail_on) or "none"
        print(
            f"{PROG}: compare fails on {', '.join(failed_on)} (exit {code}; --fail-on {chosen})",
            file=sys.stderr,
        )


def cmd_compare(args: argparse.Namespace) -> int:
    runs_dir = _runs_dir(args)
    as_json = bool(getattr(args, "json", False))

    def bad(message: str, fail_on: Sequence[Condition] = ()) -> int:
        _error(message)
        _emit(
            args,
            CompareOutput(
                outcome="error",
                exit_code=EXIT_BAD_INPUT,
                fail_on=list(fail_on),
                conditions=[],
                failed_on=[],
                error=message,
            ),
        )
        return EXIT_BAD_INPUT

    try:
        fail_on = parse_fail_on(args.fail_on)
    except ValueError as exc:
        return bad(str(exc))
    try:
        base_dir = resolve_run(args.base, runs_dir)
        candidate_dir = resolve_run(args.candidate, runs_dir)
    except BundleError as exc:
        return bad(str(exc), fail_on)
    if base_dir.samefile(candidate_dir):
        # A run against itself: every delta 0 and an exit 0 that says nothing.
        return bad(
            f"BASE and CANDIDATE are the same run ({base_dir.name}): nothing to compare; "
            "name two runs",
            fail_on,
        )
    try:
        base = load_run(base_dir)
        candidate = load_run(candidate_dir)
        statuses = (run_status(base), run_status(candidate))
        if args.noise_floor:
            comparison = compare(base, candidate, args.noise_floor)
        else:
            comparison = compare(base, candidate, runs_dir=_floors_home(args, base))
        report = write_comparison_report(comparison, args.out)
    except ComparisonRefused as exc:
        _error(str(exc))
        for line in exc.lines():
            print(f"  {line}", file=sys.stderr)
        refused = _held_output(
            "refused",
            ["refused"],
            fail_on,
            statuses,
            refusal=Refusal(
                message=str(exc),
                differences=[
                    {"name": d.name, "base": d.left, "candidate": d.right, "line": line}
                    for d, line in zip(exc.differences, exc.lines(), strict=True)
                ],
            ),
        )
        _emit(args, refused)
        return refused.exit_code
    except (BundleError, NoiseFloorError, NoiseFloorMismatch, OSError) as exc:
        return bad(str(exc), fail_on)
    out = _held_output(
        comparison.verdict.lower(),
        conditions_of(comparison.verdict, statuses),
        fail_on,
        statuses,
        report=str(report),
        comparison=comparison,
    )
    if as_json:
        _emit(args, out)
    else:
        print_comparison(comparison, report, statuses)
    _failing(out.exit_code, out.failed_on, fail_on)
    return out.exit_code


def _held_output(
    outcome: str,
    held: list[Condition],
    fail_on: Sequence[Condition],
    statuses: tuple,
    **rest: object,
) -> CompareOutput:
    """compare's answer for the conditions that held: its exit code and what it failed on."""
    return CompareOutput(
        outcome=outcome,  # type: ignore[arg-type]
        exit_code=exit_code(held, fail_on),
        fail_on=list(fail_on),
        conditions=held,
        failed_on=[c for c in held if c in fail_on],
        base=statuses[0],
        candidate=statuses[1],
        **rest,  # type: ignore[arg-type]
    )


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
        _emit(
            args,
            CalibrateOutput(
                outcome="refused", exit_code=EXIT_REFUSED, refusal=[x.strip() for x in lines]
            ),
        )
        return EXIT_REFUSED
    except (BundleError, OSError) as exc:
        _error(str(exc))
        _emit(args, CalibrateOutput(outcome="error", exit_code=EXIT_BAD_INPUT, error=str(exc)))
        return EXIT_BAD_INPUT
    if getattr(args, "json", False):
        _emit(
            args,
            CalibrateOutput(
                outcome="calibrated", exit_code=EXIT_OK, noise_floor=str(path), floor=floor
            ),
        )
    else:
        print_floor(floor, path)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    try:
        run = resolve_run(args.run, _runs_dir(args))
        path = write_run_report(run)
    except (BundleError, OSError) as exc:
        _error(str(exc))
        _emit(args, ReportOutput(outcome="error", exit_code=EXIT_BAD_INPUT, error=str(exc)))
        return EXIT_BAD_INPUT
    if getattr(args, "json", False):
        _emit(
            args,
            ReportOutput(outcome="written", exit_code=EXIT_OK, run=str(run), report=str(path)),
        )
    else:
        print(path)
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    """The runs of a runs directory, or the ones comparable with a run, ranked."""
    runs_dir = _runs_dir(args)
    reference = None
    try:
        if args.comparable_with:
            reference = load_run(resolve_run(args.comparable_with, runs_dir))
        entries = list_entries(runs_dir, comparable_with=reference, sort=args.sort, tier=args.tier)
    except (BundleError, OSError) as exc:
        _error(str(exc))
        return EXIT_BAD_INPUT
    if args.json:
        listing = RunsListing(
            runs_dir=str(runs_dir),
            comparable_with=str(reference.path) if reference else None,
            sort=args.sort,
            tier=args.tier,
            runs=entries,
        )
        print(dumps(listing))
    elif args.csv:
        sys.stdout.write(to_csv(entries))
    elif entries:
        for line in table_lines(entries, args.tier):
            print(line)
    if not entries:
        what = f"comparable with {reference.name} " if reference else ""
        print(f"{PROG}: no runs {what}in {runs_dir}", file=sys.stderr)
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
    p.add_argument(
        "--fail-on",
        metavar="C,C",
        default=",".join(DEFAULT_FAIL_ON),
        help="conditions that make compare exit non-zero: regressed (5), incomplete (4), "
        "inconclusive (6), refused (3), or none (default: %(default)s)",
    )
    p.add_argument("--runs-dir", metavar="DIR", help=runs_help)
    p.add_argument("--json", action="store_true", help=JSON_HELP)
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
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_calibrate)

    p = subparsers.add_parser("report", help="write (or refresh) a run's report.html")
    p.add_argument("run", metavar="RUN", help="run directory or run name")
    p.add_argument("--runs-dir", metavar="DIR", help=runs_help)
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_report)

    p = subparsers.add_parser(
        "runs",
        help="list past runs: status, pins digest, headline numbers; rank comparable ones",
        description="One line per run of the runs directory (an unreadable directory: one "
        "line saying why). --comparable-with RUN keeps the runs compare would accept beside "
        "RUN: a leaderboard to pick a baseline from.",
    )
    p.add_argument("--runs-dir", metavar="DIR", help=runs_help)
    p.add_argument("--comparable-with", metavar="RUN", help="only the runs comparable with RUN")
    p.add_argument(
        "--sort",
        choices=SORT_KEYS,
        default="time",
        help="time (newest first, default), coverage or recall (highest first), tokens "
        "(fewest first), name",
    )
    p.add_argument(
        "--tier", default="1", metavar="T", help="the tier whose numbers rank and show (default 1)"
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help=JSON_HELP)
    out.add_argument("--csv", action="store_true", help="CSV on stdout: one row per run")
    p.set_defaults(func=cmd_runs)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (tests, and until the lead wires `register` into the main CLI)."""
    parser = argparse.ArgumentParser(prog=PROG)
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
