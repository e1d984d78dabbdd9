"""Nothing left running unannounced: what a command started, stopped or left up, said once.

A command (`eval-pipeline run`, `judge-check`) runs under `announced(...)`: every server started
inside — by it, by its Dagster steps, by the batch workers it spawns (they inherit the
environment) — records the command's token as its owner (`processes.OWNER_ENV`) and its name
(`processes.STARTED_BY_ENV`). On the way out:

- a local model server it started is stopped (a loaded model is 0.5–5 GB of RAM, and the
  next run starts it in seconds);
- an embedded graph server it started is left running when `keep_graph` (the default of
  `graph.keep_running`: a warm JVM saves the next run its start and its JIT warm-up) and said
  so, with pid, port, RSS and the command that stops it; else it is stopped;
- a graph server it reused (started earlier by someone else) is left as it was, and said so.

The lines are returned for the command to print at its end (stderr: stdout's last line is the
bundle). Plain Python: records and /proc only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipeline import processes
from eval_pipeline.scripts import command


@dataclass
class Scope:
    token: str
    lines: list[str] = field(default_factory=list)  # filled in when the block ends


def embedded_roots(data_dir: str | None, batches: int, *, external: bool) -> list[Path]:
    """The embedded servers' data directories a run of `batches` question batches uses."""
    if external:
        return []
    from eval_pipeline.corpus.batches import batch_keys
    from eval_pipeline.graph import server
    from eval_pipeline.graph.config import StoreConfig

    config = StoreConfig(data_dir=data_dir)
    if batches <= 1:
        return [server.resolve_data_dir(data_dir)]
    return [Path(config.batch_config(b).data_dir) for b in batch_keys(batches)]  # type: ignore[union-attr, arg-type]


@contextlib.contextmanager
def announced(
    command: str, *, keep_graph: bool = True, used_roots: Sequence[Path] = ()
) -> Iterator[Scope]:
    """Run the block as `command`; its servers are stopped or announced when it ends."""
    scope = Scope(token=secrets.token_hex(8))
    values = {
        processes.OWNER_ENV: scope.token,
        processes.STARTED_BY_ENV: f"{command} (pid {os.getpid()})",
    }
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield scope
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        scope.lines = finish(scope.token, keep_graph=keep_graph, used_roots=used_roots)


def _stop_hint(data_dir: str) -> str:
    """The command that stops the server of `data_dir`, runnable as printed."""
    from eval_pipeline.graph import instances, server

    cli = command("eval-pipeline")
    default = server.default_data_dir()
    if Path(data_dir) in (default, *instances.batch_roots(default)):
        return shlex.join([*cli, "graph", "stop"])
    return shlex.join([*cli, "graph", "--graph-data-dir", data_dir, "stop"])


def finish(token: str, *, keep_graph: bool, used_roots: Sequence[Path] = ()) -> list[str]:
    """Stop or announce what `token` started; announce the reused graph servers."""
    lines = _stop_local_models(token)
    from eval_pipeline.graph import instances

    started = instances.started_by_owner(token)
    for item in started:
        where = (
            f"pid {item.pid}, bolt port {item.bolt_port}, {processes.megabytes(item.rss)}, "
            f"data dir {item.data_dir}"
        )
        if keep_graph:
            lines.append(
                f"graph server left running for the next run ({where}): stop with "
                f"`{_stop_hint(item.data_dir)}` (or run with --no-keep-graph-running)"
            )
        else:
            instances.stop([item])
            lines.append(f"stopped the graph server this run started ({where})")
    mine = {i.data_dir for i in started}
    for root in used_roots:
        item = instances.instance(root)
        if item is None or not item.running or item.data_dir in mine:
            continue
        lines.append(
            f"graph server still running as it was (pid {item.pid}, bolt port "
            f"{item.bolt_port}, {processes.megabytes(item.rss)}, started by "
            f"{item.started_by or 'unknown'}): stop with `{_stop_hint(item.data_dir)}`"
        )
    return lines


def _stop_local_models(token: str) -> list[str]:
    from eval_pipeline.llm import local_server
    from eval_pipeline.llm.cli import model_name

    lines = []
    for record in local_server.records():
        if record.owner != token:
            continue
        rss = processes.group_rss(record.pid) if local_server.pid_alive(record.pid) else None
        local_server.stop(record)
        name = model_name(record)
        lines.append(
            f"stopped the local model server this command started ({name}, pid {record.pid}, "
            f"{processes.megabytes(rss)})"
        )
    return lines
