"""Child-server supervision with real processes: a tiny HTTP server started, waited for and
stopped; a command that dies at once; a group with a grandchild; zombies; records."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline import processes
from eval_pipeline.ports import free_port, port_is_free


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError) as exc:
        raise processes.NotReady(f"port {port}: {exc}") from None


def pids_in_log(log: Path, count: int, timeout_s: float = 30) -> list[int]:
    """The pids a child printed, one a line, once it printed `count` of them."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = log.read_text().split()
        if len(lines) >= count:
            return [int(x) for x in lines[:count]]
        time.sleep(0.05)
    raise AssertionError(f"no {count} pids in {log}: {log.read_text()!r}")


@pytest.fixture
def started() -> Iterator[list[processes.ChildServer]]:
    """Children a test starts; killed at the end whatever the test did."""
    children: list[processes.ChildServer] = []
    yield children
    for child in children:
        processes.kill_group(child.pid)


def test_an_http_server_is_ready_then_stopped_with_its_port_freed(tmp_path, started):
    port = free_port()
    log = tmp_path / "http.log"
    args = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]
    child = processes.start("tiny http", args, log_path=log, cwd=tmp_path)
    started.append(child)
    child.wait_ready(lambda: answers(port), timeout_s=30, poll_s=0.1)
    assert processes.running(child.pid) and processes.group_alive(child.pid)
    assert os.getpgid(child.pid) == child.pid != os.getpgid(0)  # a group of its own
    assert "http.server" in (processes.command_line(child.pid) or [])

    child.stop(grace_s=10)
    assert not processes.running(child.pid) and not processes.group_alive(child.pid)
    assert child.proc.returncode is not None  # reaped: no zombie left behind
    assert port_is_free(port)


def test_a_command_that_exits_at_once_is_one_line_with_its_log_tail(tmp_path, started):
    log = tmp_path / "boom.log"
    code = """
        import sys
        print("loading settings")
        print("fatal: no such model file", file=sys.stderr)
        sys.exit(3)
    """
    child = processes.start("boom server", python(code), log_path=log)
    started.append(child)
    with pytest.raises(processes.ServerExited) as raised:
        child.wait_ready(lambda: False, timeout_s=30)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"boom server (pid {child.pid}) exited with code 3 while starting")
    assert f"log {log}: loading settings | fatal: no such model file" in message


def test_a_server_that_never_answers_times_out_and_is_killed(tmp_path, started):
    child = processes.start("mute", python("import time; time.sleep(300)"), log_path=tmp_path / "m")
    started.append(child)

    def probe() -> bool:
        raise processes.NotReady("still loading")

    with pytest.raises(processes.ServerNotReady, match=r"did not answer within 1 s \(still load"):
        child.wait_ready(probe, timeout_s=1, poll_s=0.1)
    assert not processes.group_alive(child.pid)  # nothing left running after the error


def test_a_probe_fatal_error_kills_the_server_and_passes_through(tmp_path, started):
    child = processes.start(
        "picky", python("import time; time.sleep(300)"), log_path=tmp_path / "p"
    )
    started.append(child)

    def probe() -> bool:
        raise PermissionError("wrong credentials")

    with pytest.raises(PermissionError, match="wrong credentials"):
        child.wait_ready(probe, timeout_s=30)
    assert not processes.running(child.pid)


# A leader (ignoring SIGTERM when stubborn) and a grandchild that only SIGKILL stops; the
# grandchild prints its pid once it ignores SIGTERM.
GRANDCHILD = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(os.getpid(), flush=True)
time.sleep(300)
"""
GROUP = """
    import signal, subprocess, sys, time
    if "{leader}" == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    subprocess.Popen([sys.executable, "-c", {grandchild!r}])
    time.sleep(300)
"""


@pytest.mark.parametrize("leader", ["obedient", "stubborn"])
def test_stop_takes_the_whole_group_grandchild_included(tmp_path, started, leader):
    log = tmp_path / "group.log"
    code = GROUP.format(leader=leader, grandchild=GRANDCHILD)
    child = processes.start("group", python(code), log_path=log)
    started.append(child)
    (grandchild,) = pids_in_log(log, 1)
    assert os.getpgid(grandchild) == child.pid

    began = time.monotonic()
    assert processes.stop_group(child.pid, grace_s=1.0)
    assert time.monotonic() - began >= 1.0  # the grandchild ignored SIGTERM: SIGKILL took it
    assert not processes.running(grandchild) and not processes.group_alive(child.pid)
    assert child.proc.returncode == (-signal.SIGTERM if leader == "obedient" else -signal.SIGKILL)


def test_a_zombie_is_not_running(tmp_path, started):
    # A child forks a process that exits at once and is never reaped: a zombie we cannot reap.
    code = """
        import os, time
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        print(pid, flush=True)
        time.sleep(300)
    """
    log = tmp_path / "zombie.log"
    child = processes.start("parent", python(code), log_path=log)
    started.append(child)
    (zombie,) = pids_in_log(log, 1)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{zombie}/stat").read_text().split(") ")[1][0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert processes.signal_reaches(zombie)  # still takes signals...
    assert not processes.running(zombie)  # ...but runs no more
    assert processes.command_line(zombie) is None


def test_a_server_found_by_its_record_is_waited_for_until_it_is_gone(tmp_path, started):
    child = processes.start(
        "found", python("import time; time.sleep(300)"), log_path=tmp_path / "f"
    )
    started.append(child)
    calls = []

    def probe() -> bool:
        calls.append(1)
        if len(calls) == 2:
            os.kill(child.pid, signal.SIGKILL)
        return False

    with pytest.raises(processes.ServerExited, match=rf"^found \(pid {child.pid}\) is gone$"):
        processes.wait_ready("found", child.pid, probe, timeout_s=30, poll_s=0.05)


def test_a_record_is_written_whole_private_and_read_back(tmp_path):
    path = tmp_path / "server.json"
    assert processes.read_record(path) is None
    record = {"pid": 123, "port": 4567, "started_at": "2026-01-01T00:00:00+00:00"}
    processes.write_record(path, record)
    assert processes.read_record(path) == record
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["server.json"]  # no temporary file left
    path.write_text('{"pid": 12')  # cut short by a crash of an older writer
    assert processes.read_record(path) is None
    path.write_text("[1, 2]")
    assert processes.read_record(path) is None


def test_the_log_tail_is_one_line(tmp_path):
    log = tmp_path / "x.log"
    assert processes.log_tail(log) == "(no log)"
    log.write_text("")
    assert processes.log_tail(log) == "(empty log)"
    log.write_text("a\n\n  b  \nc\n" + "d" * 400 + "\n")
    assert processes.log_tail(log) == "b | c | " + "d" * 300
    assert processes.describe_exit(-9) == "was killed by SIGKILL"
