"""`eval-pipeline graph status|stop` through argparse, as the project CLI wires them."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from eval_pipeline.graph import cli, server
from eval_pipeline.graph.store import GraphStore


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_status_then_stop(
    store: GraphStore, graph_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.wipe()
    info = server.running_info(graph_dir)
    assert info is not None
    where = ("--graph-data-dir", str(graph_dir), "--graph-database", store.database)
    assert run("graph", *where, "status") == 0
    out = capsys.readouterr().out
    assert f"uri:      {info.bolt_uri}" in out and f"pid:      {info.pid}" in out
    assert f"data dir: {graph_dir}" in out and "nodes:    1 (EvalPipelineClaim 1)" in out
    assert f"database: {store.database}" in out

    assert run("graph", *where, "stop") == 0
    assert f"stopped embedded ArcadeDB (pid {info.pid}" in capsys.readouterr().out
    assert server.running_info(graph_dir) is None
    assert run("graph", *where, "status") == cli.NOT_RUNNING
    assert "not running" in capsys.readouterr().out


def test_unreachable_uri_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = run("graph", "--graph-uri", "bolt://127.0.0.1:9", "status")
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and "bolt://127.0.0.1:9" in err and "does not answer" in err


def test_stop_refuses_an_external_instance(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("graph", "--graph-uri", "bolt://db:7687", "stop") == 2
    assert "only the embedded server" in capsys.readouterr().err
