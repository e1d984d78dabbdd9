"""`eval-pipeline ui-check`: the operations commands, for eval_pipeline.cli to register.

    from eval_pipeline.ops.cli import register
    register(sub)  # sub = parser.add_subparsers(...)

Also runnable alone: `python -m eval_pipeline.ops.cli ui-check`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eval_pipeline.ops.ui_check import FailureScenarioResult


def print_failure_scenario(failure: FailureScenarioResult) -> None:
    """What the failure scenario found, precisely: the runs, what each asset reads as, which
    checks read EXECUTION_FAILED."""
    runs = ", ".join(f"{r.run_id[:8]} {r.job} {r.status}" for r in failure.runs) or "none"
    print(f"failure scenario: runs: {runs}")
    for key, reading in sorted(failure.readings.items()):
        checks = ", ".join(f"{name} {st}" for name, st in sorted(reading.checks.items()))
        gql = {None: "no data", True: "failed", False: "not failed"}[reading.graphql_failed]
        print(
            f"failure scenario: {key}: reads {reading.dom or 'no node'} "
            f"(page GraphQL: {gql}, latest run {reading.latest_run_status or 'none'}); "
            f"checks: {checks or 'none'}"
        )
    failed = ", ".join(failure.failed_assets) or "none"
    execution_failed = ", ".join(failure.execution_failed_checks) or "none"
    print(f"failure scenario: assets reading Failed: {failed}")
    print(f"failure scenario: checks reading EXECUTION_FAILED: {execution_failed}")
    state = "ok" if failure.ok else "FAILED"
    print(f"failure scenario: {state} → {failure.screenshot} (close-up: {failure.closeup})")


def cmd_ui_check(args: argparse.Namespace) -> int:
    from eval_pipeline.ops.ui_check import UiCheckError, run_ui_check

    try:
        result = run_ui_check(
            port=args.port,
            out_dir=args.out,
            timeout=args.timeout,
            scenario=args.scenario,
            run_timeout=args.run_timeout,
        )
    except UiCheckError as exc:
        print(f"eval-pipeline: error: ui-check: {exc}", file=sys.stderr)
        return 1
    for page in result.pages:
        state = "ok" if not page.missing else "MISSING " + ", ".join(page.missing)
        print(f"{page.name}: {state} ({page.url}) → {page.screenshot}")
    if result.failure is not None:
        print_failure_scenario(result.failure)
    if not result.ok:
        bad = [f"{p.name} page lacks {', '.join(p.missing)}" for p in result.pages if p.missing]
        if result.failure is not None and not result.failure.ok:
            bad.append("failure scenario: " + "; ".join(result.failure.problems))
        print(
            f"eval-pipeline: error: ui-check: {'; '.join(bad)} (screenshots in {result.out_dir})",
            file=sys.stderr,
        )
        return 1
    stopped = []
    if result.webserver_pid is not None:
        stopped.append(f"webserver (pid {result.webserver_pid})")
    if result.failure is not None:
        stopped.append(
            f"failure scenario's webserver (pid {result.failure.webserver_pid}) "
            f"and daemon (pid {result.failure.daemon_pid})"
        )
    print(f"ui-check passed; {' and '.join(stopped)} stopped")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `ui-check` subcommand to an `add_subparsers()` object."""
    p = subparsers.add_parser(
        "ui-check",
        help="open the Dagster UI in headless Chromium and check the graph and scored_run",
        description="Start dagster-webserver on 127.0.0.1, open the asset graph and the latest "
        "scored_run in headless Chromium (/usr/bin/chromium, driven by Playwright), assert every "
        "asset key and the score tables are shown, save screenshots, stop the server. Runs the "
        "chain first if no scored_run is materialized. --scenario failure instead launches "
        "eval_chain as the Launchpad does on a truncated upstream file, in a temporary "
        "DAGSTER_HOME and state dir of its own (webserver and daemon), and asserts that the "
        "lineage reads only longmemeval_upstream as failed and no check as execution-failed.",
    )
    p.add_argument("--port", type=int, metavar="P", help="webserver port (default: a free one)")
    p.add_argument(
        "--out", type=Path, metavar="DIR", help="screenshots and webserver log (default: "
        "<state dir>/ui_check)",
    )  # fmt: skip
    p.add_argument(
        "--timeout", type=float, default=90.0, metavar="S",
        help="seconds to wait for the server and for each page (default 90)",
    )  # fmt: skip
    p.add_argument(
        "--scenario", choices=("success", "failure", "all"), default="success",
        help="success: the materialized chain (default); failure: a malformed upstream launched "
        "from the Launchpad path, in its own temporary instance; all: both, success first",
    )  # fmt: skip
    p.add_argument(
        "--run-timeout", type=float, default=600.0, metavar="S",
        help="failure scenario: seconds to wait for every run it caused to finish (default 600)",
    )  # fmt: skip
    p.set_defaults(func=cmd_ui_check)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
