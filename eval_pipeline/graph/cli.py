"""`eval-pipeline graph stop|status`, plugged into the project CLI with `register(subparsers)`.

The graph options (`--graph-uri`, `--graph-database`, ...) live on the `graph` parser;
credentials come from EVAL_GRAPH_USER / EVAL_GRAPH_PASSWORD. `add_graph_options` and
`store_from_args` let other commands accept the same options.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from eval_pipeline.graph.errors import GraphError
from eval_pipeline.llm.uri_credentials import mask_uri

if TYPE_CHECKING:  # the store pulls in dagster and the driver: only load them when used
    from eval_pipeline.graph.store import GraphStore

NOT_RUNNING = 3  # `graph status` exit code when the embedded server is down (as systemctl)


def add_graph_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("graph instance")
    g.add_argument(
        "--graph-uri",
        metavar="URI",
        help="bolt://host:port of an ArcadeDB or Memgraph instance (default: the embedded "
        "ArcadeDB); credentials from EVAL_GRAPH_USER / EVAL_GRAPH_PASSWORD",
    )
    g.add_argument("--graph-database", metavar="NAME", default="eval", help="database name")
    g.add_argument(
        "--graph-backend",
        choices=["arcadedb", "memgraph"],
        default=None,
        help="server kind (default: arcadedb; memgraph needs --graph-uri)",
    )
    g.add_argument(
        "--graph-http-url",
        metavar="URL",
        help="HTTP API of an external ArcadeDB (needed to create its full-text index)",
    )
    g.add_argument(
        "--graph-data-dir",
        metavar="DIR",
        help="embedded server directory (default: <state dir>/graph/arcadedb)",
    )


def store_from_args(args: argparse.Namespace) -> GraphStore:
    from eval_pipeline.graph.store import GraphStore

    return GraphStore(
        backend=args.graph_backend or "arcadedb",
        uri=args.graph_uri,
        database=args.graph_database,
        user=os.environ.get("EVAL_GRAPH_USER"),
        password=os.environ.get("EVAL_GRAPH_PASSWORD"),
        http_url=args.graph_http_url,
        data_dir=args.graph_data_dir,
    )


def register(subparsers: Any) -> None:
    """Add `graph stop` and `graph status` to the project's argparse subparsers."""
    graph = subparsers.add_parser("graph", help="the graph instance: status, stop")
    add_graph_options(graph)
    sub = graph.add_subparsers(dest="graph_command", required=True)
    p = sub.add_parser(
        "status",
        help="print URI, pid, data dir and node counts, then every embedded server the state "
        "dir knows (pid, ports, database, RSS, who started it)",
    )
    p.set_defaults(func=_guarded(cmd_status))
    p = sub.add_parser(
        "stop",
        help="stop every embedded ArcadeDB server the state dir knows (with --graph-data-dir: "
        "that one)",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="with --graph-data-dir: also its question batches' servers (<data dir>-batchNN)",
    )
    p.set_defaults(func=_guarded(cmd_stop))


def _guarded(cmd: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return cmd(args)
        except GraphError as exc:  # one line, no traceback: the message says what to do
            print(f"eval-pipeline: error: {exc}", file=sys.stderr)
            return 1

    return run


def cmd_stop(args: argparse.Namespace) -> int:
    if args.graph_uri:
        print(
            "eval-pipeline: error: `graph stop` stops only the embedded server; "
            f"{mask_uri(args.graph_uri)} is managed elsewhere",
            file=sys.stderr,
        )
        return 2
    from eval_pipeline.graph import instances, server
    from eval_pipeline.processes import megabytes

    if args.graph_data_dir:  # that one (and its batches' with --all)
        root = server.resolve_data_dir(args.graph_data_dir)
        roots = [root, *(instances.batch_roots(root) if getattr(args, "all", False) else [])]
        known = [i for r in roots if (i := instances.instance(r)) is not None]
        quiet = [r for r in roots if not any(i.data_dir == str(r) and i.running for i in known)]
        for root in quiet:
            print(f"no embedded graph server running for {root}")
    else:  # every one the state dir knows
        known = instances.known_instances()
        if not any(i.running for i in known):
            print("no embedded graph server running")
    for item in instances.stop(known):
        print(
            f"stopped embedded ArcadeDB (pid {item.pid}, {megabytes(item.rss)}, "
            f"data dir {item.data_dir})"
        )
    return 0


def print_instances() -> None:
    """Every embedded server the state dir knows, one line each."""
    from eval_pipeline.graph import instances
    from eval_pipeline.settings import state_dir

    known = instances.known_instances()
    running = sum(i.running for i in known)
    print(f"embedded servers known to {state_dir()}: {running} running of {len(known)}")
    for item in known:
        print(f"  {item.line()}")
    if running:
        print("  stop them all: eval-pipeline graph stop")


def _counts_line(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def cmd_status(args: argparse.Namespace) -> int:
    store = store_from_args(args)
    try:
        status = store.status()
    finally:
        store.close()
    embedded = store.embedded
    print(f"backend:  {status['backend']}{' (embedded)' if embedded else ''}")
    if embedded:
        print(f"data dir: {status['data_dir']}")
        if not status["running"]:
            print("state:    not running (started on demand by the pipeline)")
            print_instances()
            return NOT_RUNNING
        print(f"pid:      {status['pid']}")
    print(f"uri:      {status['uri']}")
    if status.get("http_url"):
        print(f"http:     {status['http_url']}")
    print(f"database: {status['database']}")
    print(f"server:   {status['server_version']}")
    counts = status["counts"]
    print(f"nodes:    {counts['nodes']} ({_counts_line(counts['labels'])})")
    print(
        f"relationships: {counts['relationships']} ({_counts_line(counts['relationship_types'])})"
    )
    if embedded:
        print_instances()
    return 0
