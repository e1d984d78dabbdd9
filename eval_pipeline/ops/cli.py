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


def cmd_ui_check(args: argparse.Namespace) -> int:
    from eval_pipeline.ops.ui_check import UiCheckError, run_ui_check

    try:
        result = run_ui_check(port=args.port, out_dir=args.out, timeout=args.timeout)
    except UiCheckError as exc:
        print(f"eval-pipeline: error: ui-check: {exc}", file=sys.stderr)
        return 1
    for page in result.pages:
        state = "ok" if not page.missing else "MISSING " + ", ".join(page.missing)
        print(f"{page.name}: {state} ({page.url}) → {page.screenshot}")
    if not result.ok:
        bad = "; ".join(
            f"{p.name} page lacks {', '.join(p.missing)}" for p in result.pages if p.missing
        )
        print(
            f"eval-pipeline: error: ui-check: {bad} (screenshots in {result.out_dir})",
            file=sys.stderr,
        )
        return 1
    print(f"ui-check passed; webserver (pid {result.webserver_pid}) stopped")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `ui-check` subcommand to an `add_subparsers()` object."""
    p = subparsers.add_parser(
        "ui-check",
        help="open the Dagster UI in headless Chromium and check the graph and scored_run",
        description="Start dagster-webserver on 127.0.0.1, open the asset graph and the latest "
        "scored_run in headless Chromium (/usr/bin/chromium), assert every asset key and the "
        "score tables are shown, save screenshots, stop the server. Runs the chain first if "
        "no scored_run is materialized.",
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
    p.set_defaults(func=cmd_ui_check)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
