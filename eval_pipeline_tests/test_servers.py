"""Nothing left running unannounced (issue 27, part 6): what a command started is stopped or
said to stay up, with pid, port, RSS and the command that stops it; `graph status` lists and
`graph stop` stops every embedded server the state dir knows.

The servers are real: the session's embedded ArcadeDB (`graph_dir`), stopped and started again
here under `servers.announced` as `eval-pipeline run` does; the listing of batch instances reads
real records on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
from pathlib import Path

import pytest

from eval_pipeline import processes, servers
from eval_pipeline.graph import cli, instances, server
from eval_pipeline.scripts import command


def graph_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["graph", *argv])
    return args.func(args)


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


def test_rss_and_starter_are_read_from_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    rss = processes.group_rss(os.getpgid(0))
    assert rss is not None and rss > 10_000_000  # a Python interpreter, at least
    assert processes.megabytes(rss) == f"RSS {rss / 1e6:.0f} MB"
    assert processes.megabytes(None) == "RSS unknown"
    monkeypatch.setenv(processes.STARTED_BY_ENV, "eval-pipeline run (pid 1)")
    assert processes.starter() == "eval-pipeline run (pid 1)"
    monkeypatch.delenv(processes.STARTED_BY_ENV)
    assert processes.starter().endswith(f"(pid {os.getpid()})")


def test_every_batch_instance_is_listed_from_its_record(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The records `--batches 2` leaves beside the default directory; their servers are gone.
    default = server.default_data_dir()
    for root in (
        default,
        default.with_name(f"{default.name}-batch01"),
        default.with_name(f"{default.name}-batch02"),
    ):
        root.mkdir(parents=True)
        record = {
            "pid": 2**22 + 7,  # above pid_max's default: no such process
            "bolt_port": 1,
            "http_port": 2,
            "data_dir": str(root),
            "database": "eval",
            "heap": "1g",
            "started_at": "2026-01-01T00:00:00+00:00",
            "started_by": "eval-pipeline run (pid 9)",
        }
        (root / server.SERVER_FILE).write_text(json.dumps(record))
    listed = instances.known_instances()
    assert [Path(i.data_dir).name for i in listed] == [
        "arcadedb",
        "arcadedb-batch01",
        "arcadedb-batch02",
    ]
    assert not any(i.running for i in listed)
    assert graph_cli("status") == cli.NOT_RUNNING
    out = capsys.readouterr().out
    assert f"embedded servers known to {state}: 0 running of 3" in out
    assert out.count("  stopped   ") == 3 and "arcadedb-batch02" in out
    assert graph_cli("stop") == 0
    assert "no embedded graph server running" in capsys.readouterr().out
    assert servers.embedded_roots(None, 2, external=False) == [
        default.with_name(f"{default.name}-batch01"),
        default.with_name(f"{default.name}-batch02"),
    ]
    assert servers.embedded_roots(None, 1, external=False) == [default]
    assert servers.embedded_roots(None, 2, external=True) == []


@pytest.mark.slow  # two JVM starts
def test_a_command_stops_or_announces_what_it_started(
    state: Path, graph_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.stop(graph_dir)  # the session's server, started again under each command below

    with servers.announced("test-keep", keep_graph=True) as scope:
        info = server.ensure_running(graph_dir)
    (line,) = scope.lines
    assert line.startswith("graph server left running for the next run (")
    assert f"pid {info.pid}, bolt port {info.bolt_port}, RSS " in line
    assert re.search(r"RSS \d+ MB", line) and f"data dir {graph_dir}" in line
    script = shlex.join(command("eval-pipeline"))  # runnable as printed, on PATH or not
    assert f"`{script} graph --graph-data-dir {graph_dir} stop`" in line
    assert server.running_info(graph_dir) is not None

    # Another command reuses it: left as it was, and said so, naming who started it.
    with servers.announced("test-reuse", keep_graph=False, used_roots=[graph_dir]) as scope:
        assert server.ensure_running(graph_dir).pid == info.pid
    (line,) = scope.lines
    assert line.startswith(f"graph server still running as it was (pid {info.pid}, ")
    assert f"started by test-keep (pid {os.getpid()})" in line
    assert server.running_info(graph_dir) is not None

    # `graph status` lists it with who started it; `graph stop` (no directory) stops it.
    assert graph_cli("status") == cli.NOT_RUNNING  # the state dir's default one never ran
    out = capsys.readouterr().out
    # Other tests' batch instances beside the session's are listed too (stopped, or running).
    assert re.search(r"\b\d+ running of \d+", out), out
    assert f"running   pid {info.pid}, bolt {info.bolt_port}, http {info.http_port}" in out
    assert f"by test-keep (pid {os.getpid()}): {graph_dir}" in out
    assert graph_cli("stop") == 0
    assert f"stopped embedded ArcadeDB (pid {info.pid}, RSS " in capsys.readouterr().out
    assert server.running_info(graph_dir) is None

    # keep_graph off: what the command started is stopped at its end.
    with servers.announced("test-stop", keep_graph=False) as scope:
        again = server.ensure_running(graph_dir)
    (line,) = scope.lines
    assert line.startswith(f"stopped the graph server this run started (pid {again.pid}, ")
    assert server.running_info(graph_dir) is None
    assert processes.OWNER_ENV not in os.environ  # the scope's token does not outlive it
