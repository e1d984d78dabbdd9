"""The embedded server: start, reuse, stop, persistence across a restart, clear failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.graph import server
from eval_pipeline.graph.errors import GraphServerError
from eval_pipeline.graph.store import GraphStore


def test_reuses_the_running_server(store: GraphStore, graph_dir: Path) -> None:
    first = server.running_info(graph_dir)
    assert first is not None
    again = server.ensure_running(graph_dir)
    assert again.pid == first.pid
    # A second resource on the same directory talks to the same server.
    other = GraphStore(data_dir=str(graph_dir))
    try:
        assert other.ensure_running() == first.bolt_uri
    finally:
        other.close()
    assert first.bolt_uri.startswith("bolt://127.0.0.1:")


def test_data_survives_stop_and_restart(store: GraphStore, graph_dir: Path) -> None:
    store.wipe()
    store.write("CREATE (:Marker {name: 'kept'})")
    before = server.running_info(graph_dir)
    assert before is not None

    assert server.stop(graph_dir) is True
    assert server.running_info(graph_dir) is None
    assert server.stop(graph_dir) is False  # nothing left to stop

    store.ensure_running()
    after = server.running_info(graph_dir)
    assert after is not None and after.pid != before.pid
    assert after.bolt_port == before.bolt_port  # the URI users saw stays valid
    assert store.read("MATCH (m:Marker) RETURN m.name AS name") == [{"name": "kept"}]


def test_status_reports_uri_pid_dir_and_counts(store: GraphStore, graph_dir: Path) -> None:
    store.wipe()
    status = store.status()
    info = server.running_info(graph_dir)
    assert info is not None
    assert status["running"] is True
    assert status["uri"] == info.bolt_uri and status["pid"] == info.pid
    assert status["data_dir"] == str(graph_dir)
    assert status["counts"]["labels"] == {"EvalPipelineClaim": 1}
    assert status["server_version"].startswith("ArcadeDB ")


def test_password_stays_private(graph_dir: Path, store: GraphStore) -> None:
    mode = (graph_dir / server.PASSWORD_FILE).stat().st_mode & 0o777
    assert mode == 0o600
    info = server.running_info(graph_dir)
    assert info is not None
    cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes().decode()
    assert server.credentials(graph_dir).password not in cmdline


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    with pytest.raises(GraphServerError, match="exited with code"):
        server.ensure_running(tmp_path / "bad", heap="not-a-size", timeout_s=30)
    assert server.running_info(tmp_path / "bad") is None
