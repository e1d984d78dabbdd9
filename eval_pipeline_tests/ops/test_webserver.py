"""The UI check's dagster-webserver and dagster-daemon, real, on a tiny code location: ready,
stopped group and all (the code server with it), a location that fails to load, a daemon
that died."""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import pytest

from eval_pipeline import processes
from eval_pipeline.ops.webserver import DagsterDaemon, DagsterWebserver, WebserverError
from eval_pipeline.ports import free_port

# Real dagster-webserver and daemon processes: the full suite runs them, `make test-fast` not.
pytestmark = pytest.mark.slow

TINY = """
    import dagster as dg

    @dg.asset
    def tiny() -> int:
        return 1

    defs = dg.Definitions(assets=[tiny])
"""


def env_with(tmp_path: Path, module: str, source: str) -> dict[str, str]:
    """Our environment, with `module` importable from tmp_path and a DAGSTER_HOME of its own."""
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / f"{module}.py").write_text(textwrap.dedent(source))
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    path = os.pathsep.join(p for p in (str(code), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": path}


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            state, _, group = stat[stat.rindex(")") + 2 :].split()[:3]
            if int(group) == pgid and state != "Z":
                members.append(int(entry.name))
    return members


def test_the_webserver_is_ready_then_stopped_with_its_code_server(tmp_path):
    env = env_with(tmp_path, "tiny_defs", TINY)
    server = DagsterWebserver(free_port(), tmp_path / "webserver.log", "tiny_defs", env)
    with server:
        assert server.pid is not None
        server.wait_ready(180)
        data = server.graphql("{ version }")
        assert data["data"]["version"]
        members = group_members(server.pid)
        assert len(members) >= 2  # the webserver and the code server it spawned
    assert not processes.group_alive(server.pid)
    assert not any(processes.running(pid) for pid in members)


def test_a_code_location_that_fails_to_load_is_one_clear_error(tmp_path):
    env = env_with(tmp_path, "broken_defs", "raise RuntimeError('no definitions today')\n")
    server = DagsterWebserver(free_port(), tmp_path / "webserver.log", "broken_defs", env)
    with server, pytest.raises(WebserverError) as raised:
        server.wait_ready(180)
    assert str(raised.value).startswith("code location broken_defs failed to load")
    assert "\n" not in str(raised.value)
    assert server.pid is not None and not processes.group_alive(server.pid)


def test_a_daemon_that_died_says_so_with_its_log(tmp_path):
    env = env_with(tmp_path, "tiny_defs", TINY)
    daemon = DagsterDaemon(tmp_path / "daemon.log", "tiny_defs", env)
    with daemon:
        daemon.check_alive()
        assert daemon.pid is not None
        os.kill(daemon.pid, signal.SIGKILL)
        assert daemon.child is not None
        daemon.child.proc.wait(timeout=30)
        with pytest.raises(WebserverError) as raised:
            daemon.check_alive()
        assert f"dagster-daemon (pid {daemon.pid}) was killed by SIGKILL" in str(raised.value)
        assert f"log {tmp_path / 'daemon.log'}" in str(raised.value)
    assert not processes.group_alive(daemon.pid)


def test_no_dagster_home_is_refused_before_starting(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    with pytest.raises(WebserverError, match="DAGSTER_HOME is not set for dagster-daemon"):
        DagsterDaemon(tmp_path / "daemon.log", env=env).start()
