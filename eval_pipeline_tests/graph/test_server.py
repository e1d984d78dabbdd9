"""The embedded server: start, reuse, stop, persistence across a restart, clear failures."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from eval_pipeline.graph import server
from eval_pipeline.graph.errors import GraphQueryError, GraphServerError
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


@pytest.mark.slow  # restarts or kills a graph server, or runs for seconds
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


# --- issue 13: limits set at start, unused endpoints off ----------------------------------

# 10^12 rows: ranges within the range cap of a small heap (arcadedb.queryMaxRangeSize).
RUNAWAY = "UNWIND range(1,1000000) AS x UNWIND range(1,1000000) AS y RETURN count(*) AS n"


def _http_status(url: str, auth: tuple[str, str], body: dict | None = None) -> int:
    token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    req = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_server_runs_with_its_limits_in_force(store: GraphStore, graph_dir: Path) -> None:
    info = server.running_info(graph_dir)
    assert info is not None and info.command_timeout_s == server.COMMAND_TIMEOUT_S
    http = store.http()
    assert http is not None
    applied = server.effective_settings(http, store.database)
    # Every key exists in this ArcadeDB (an unknown -D key would be ignored silently) and
    # holds our value.
    for key, value in server.server_settings().items():
        assert key in applied, f"{key} is not an ArcadeDB setting"
        assert str(applied[key]).lower() == value, (key, applied[key])
    cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes().decode().split("\0")
    assert "-XX:+ExitOnOutOfMemoryError" not in cmdline
    classpath = cmdline[cmdline.index("-cp") + 1]
    assert "arcadedb-bolt-" in classpath and "arcadedb-server-" in classpath
    assert not any(name in classpath for name in server.UNUSED_JARS)


def test_the_mcp_endpoint_is_gone_and_the_http_api_answers(
    store: GraphStore, graph_dir: Path
) -> None:
    info = server.running_info(graph_dir)
    assert info is not None
    creds = server.credentials(graph_dir)
    auth = (creds.user, creds.password)
    mcp_call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert _http_status(f"{info.http_url}/api/v1/mcp", auth, mcp_call) == 404
    assert _http_status(f"{info.http_url}/api/v1/mcp/config", auth) == 404
    # What the pipeline uses still answers: SQL commands and server commands over HTTP.
    http = store.http()
    assert http is not None
    assert http.sql(store.database, "SELECT 1 AS one") == [{"one": 1}]
    assert store.database in http.databases()
    assert _http_status(f"{info.http_url}/api/v1/server", auth) == 200
    log = (graph_dir / server.CONSOLE_LOG).read_text(encoding="utf-8", errors="replace")
    assert "MCP server endpoint registered" not in log.split("is starting up")[-1]


@pytest.mark.slow  # restarts or kills a graph server, or runs for seconds
def test_the_server_stops_any_statement_at_its_command_timeout(tmp_path: Path) -> None:
    """The ceiling holds even for a statement no client stops (GraphStore.read alone only
    gives up waiting): the server aborts it, and a core is free again."""
    root = tmp_path / "ceiling"
    info = server.ensure_running(root, heap="256m", command_timeout_s=2)
    store = GraphStore(data_dir=str(root), heap="256m")
    try:
        started = time.monotonic()
        with pytest.raises(GraphQueryError, match=r"arcadedb\.command\.timeout of 2000ms"):
            store.read(RUNAWAY, timeout_s=60)
        elapsed = time.monotonic() - started
        assert elapsed < 10, elapsed
        assert store.read("RETURN 1 AS ok") == [{"ok": 1}]
        after = server.running_info(root)
        assert after is not None and after.pid == info.pid
    finally:
        store.close()
        server.stop(root)


def test_a_server_started_without_the_limits_is_reported(store: GraphStore, graph_dir: Path):
    info = server.running_info(graph_dir)
    assert info is not None
    current = Path(f"/proc/{info.pid}/cmdline").read_bytes().decode().split("\0")
    assert server.outdated_settings(current) == []
    # The command line this module used before issue 13.
    old = ["java", "-Xmx1g", "-XX:+ExitOnOutOfMemoryError", "-cp", "/pkg/jars/*", server.MAIN_CLASS]
    missing = server.outdated_settings(old)
    assert any(m.startswith("arcadedb.command.timeout=") for m in missing)
    assert any("ExitOnOutOfMemoryError" in m for m in missing)
    assert any("MCP" in m for m in missing)
