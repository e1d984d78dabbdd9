"""Child servers the project starts, watches and stops, and the records that find them again.

One way for all of them (the embedded graph JVM, the local model server, the UI check's
dagster-webserver and dagster-daemon): each is started in a session of its own (a ^C meant for
us does not reach it, and SIGTERM to its group reaches whatever it spawns), with its output in
a log file; it is waited for until a readiness probe passes, it dies (one line with the log's
tail) or a timeout passes; it is stopped group and all, SIGTERM then SIGKILL. A server meant to
outlive its starter is found again through a small JSON record written atomically.

Alive means running, not merely there: a zombie still takes signals, and a server whose
starter never reaps it (another process, a container's init) would otherwise never look gone.
Domain level: no Dagster here; each caller keeps its own ports, flags, probes and reuse rules.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A probe returns True once the server serves; False, or NotReady(reason), while it does not.
Probe = Callable[[], bool]

KILL_WAIT_S = 10.0  # how long a SIGKILLed group may take to go
_PROC = Path("/proc")
_NOT_RUNNING = ("Z", "X", "x")  # /proc states of a zombie, of a process being torn down

# Servers this process started, by pid, so a dead one is reaped (not left a zombie) by
# whichever check sees it first.
_started: dict[int, subprocess.Popen[bytes]] = {}


class ProcessError(RuntimeError):
    """A child server did not start, died, or would not stop."""


class ServerExited(ProcessError):
    """The server is gone (it exited while starting, or a running one died)."""


class ServerNotReady(ProcessError):
    """The server is running but its readiness probe did not pass in time."""


class NotReady(Exception):
    """Raised by a probe to say why the server does not serve yet (shown on timeout)."""


# --- is it there? -----------------------------------------------------------------------------


def signal_reaches(pid: int) -> bool:
    """True while a process with this pid exists (ours or another user's, zombies too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists; it is just not ours to signal
    return True


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, process group) from /proc/<pid>/stat; None if it cannot be read."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) ", comm may hold spaces
    return fields[0], int(fields[2])


def _reap(pid: int) -> None:
    child = _started.get(pid)
    if child is not None and child.poll() is not None:
        _started.pop(pid, None)


def running(pid: int) -> bool:
    """The process runs (not a zombie); one this process started is reaped once it exited."""
    _reap(pid)
    if not signal_reaches(pid):
        return False
    stat = _stat(pid)
    if stat is None:
        return not _PROC.is_dir()  # no /proc: trust the signal (with one, it has just gone)
    return stat[0] not in _NOT_RUNNING


def started_at(pid: int) -> float | None:
    """When process `pid` started (epoch seconds, to about a second); None without /proc.
    A pid outlives nothing: compared with when a record was written, it tells a reused pid."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
        boot = next(
            int(line.split()[1])
            for line in (_PROC / "stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration, ValueError):
        return None
    ticks = int(text[text.rindex(")") + 2 :].split()[19])  # field 22, starttime
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def command_line(pid: int) -> list[str] | None:
    """The arguments of running process `pid`; None if it is not running or has no /proc."""
    if not running(pid):
        return None
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    args = raw.split(b"\0")
    if args[-1] == b"":  # the usual trailing NUL (a process that rewrote its title may lack it)
        args.pop()
    return [arg.decode(errors="replace") for arg in args]


def signal_reaches_group(pgid: int) -> bool:
    """Group `pgid` still exists, zombies included."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def group_alive(pgid: int) -> bool:
    """Some process of group `pgid` still runs (zombies do not count)."""
    _reap(pgid)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's group (the id was reused): not ours to wait on
        return False
    if not _PROC.is_dir():
        return True
    # The leader still running settles it; else any other member still running does.
    if _runs_in(pgid, pgid):
        return True
    return any(_runs_in(int(e.name), pgid) for e in os.scandir(_PROC) if e.name.isdigit())


def _runs_in(pid: int, pgid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] == pgid and stat[0] not in _NOT_RUNNING


# --- start, wait, stop ------------------------------------------------------------------------


def log_tail(path: Path, lines: int = 3) -> str:
    """The last `lines` non-blank lines of a log on one line, each cut at 300 characters."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    kept = [line.strip()[:300] for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) if kept else "(empty log)"


def describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


@dataclass
class ChildServer:
    """A server this process started with `start`: its handle, its log, what errors call it."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    tail_lines: int = 3

    @property
    def pid(self) -> int:
        return self.proc.pid

    def check_alive(self, doing: str = "") -> None:
        """Raise ServerExited, with the exit code and the log's tail, if it is gone."""
        code = self.proc.poll()
        if code is not None:
            _started.pop(self.pid, None)
            raise ServerExited(
                f"{self.name} (pid {self.pid}) {describe_exit(code)}{doing}; "
                f"log {self.log_path}: {log_tail(self.log_path, self.tail_lines)}"
            )

    def wait_ready(self, probe: Probe, *, timeout_s: float, poll_s: float = 0.25) -> None:
        """Until `probe` passes. If it dies, times out or anything raises (a probe's own fatal
        error, a ^C), the group is killed first: a server that never served is of no use."""
        try:
            _poll(
                probe,
                check=lambda: self.check_alive(" while starting"),
                timed_out=lambda last: (
                    f"{self.name} (pid {self.pid}) did not answer within {timeout_s:.0f} s "
                    f"({last}); log {self.log_path}: {log_tail(self.log_path, self.tail_lines)}"
                ),
                timeout_s=timeout_s,
                poll_s=poll_s,
            )
        except BaseException:
            kill_group(self.pid)
            raise

    def stop(self, grace_s: float) -> None:
        """SIGTERM the group, SIGKILL what is left after `grace_s`; return once all is gone,
        our child reaped too (else its zombie keeps the group's id in use)."""
        if not stop_group(self.pid, grace_s=grace_s):
            raise ProcessError(f"{self.name} (pid {self.pid}) outlived SIGKILL")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=KILL_WAIT_S)
        _started.pop(self.pid, None)
        # A grandchild that outlived its parent is a zombie until init reaps it (seconds on
        # some hosts): give it that long, so the group's id is free when this returns.
        deadline = time.monotonic() + KILL_WAIT_S
        while time.monotonic() < deadline and signal_reaches_group(self.pid):
            time.sleep(0.1)


def start(
    name: str,
    args: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    fresh_log: bool = False,
    tail_lines: int = 3,
) -> ChildServer:
    """Start `args` in a session (process group) of its own, stdout and stderr to `log_path`
    (appended to unless `fresh_log`), stdin closed; `name` is how its errors call it."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb" if fresh_log else "ab") as log:
        proc = subprocess.Popen(
            list(args),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _started[proc.pid] = proc
    return ChildServer(name, proc, log_path, tail_lines)


def wait_ready(
    name: str,
    pid: int,
    probe: Probe,
    *,
    timeout_s: float,
    alive: Callable[[], bool] | None = None,
    poll_s: float = 0.25,
) -> None:
    """Until `probe` passes on a server found by its record (not started here): ServerExited
    once `alive()` (default: `running(pid)`) is False, ServerNotReady after `timeout_s`."""

    def check() -> None:
        if not (alive() if alive is not None else running(pid)):
            raise ServerExited(f"{name} (pid {pid}) is gone")

    _poll(
        probe,
        check=check,
        timed_out=lambda last: (
            f"{name} (pid {pid}) did not answer within {timeout_s:.0f} s ({last})"
        ),
        timeout_s=timeout_s,
        poll_s=poll_s,
    )


def _poll(
    probe: Probe,
    *,
    check: Callable[[], None],
    timed_out: Callable[[str], str],
    timeout_s: float,
    poll_s: float,
) -> None:
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    while True:
        check()
        try:
            if probe():
                return
        except NotReady as why:
            last = " ".join(str(why).split())[:200]  # one line, whatever the probe saw
        if time.monotonic() > deadline:
            raise ServerNotReady(timed_out(last))
        time.sleep(poll_s)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pgid, sig)  # not a group leader after all: at least the process itself
    except PermissionError:
        pass  # another user's: not ours to stop


def _gone(pgid: int, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        if not running(pgid) and not group_alive(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def stop_group(pgid: int, *, grace_s: float) -> bool:
    """SIGTERM process group `pgid` (a server started by `start`, here or by another process),
    SIGKILL whatever is left after `grace_s`. True once the group is gone, False if something
    outlived SIGKILL by KILL_WAIT_S; children (a code server, run workers) go with it."""
    _signal_group(pgid, signal.SIGTERM)
    if _gone(pgid, grace_s):
        return True
    return kill_group(pgid)


def kill_group(pgid: int) -> bool:
    """SIGKILL process group `pgid` without a chance to clean up (a crash, or a server that
    never became ready). True once it is gone."""
    _signal_group(pgid, signal.SIGKILL)
    return _gone(pgid, KILL_WAIT_S)


# --- who started it, what it costs ----------------------------------------------------------

# Set by a command for everything started under it (its own processes and the batch workers it
# spawns inherit the environment): which servers it started, and what `status` calls it.
OWNER_ENV = "EVAL_SERVER_OWNER"
STARTED_BY_ENV = "EVAL_SERVER_STARTED_BY"


def current_owner() -> str | None:
    return os.environ.get(OWNER_ENV) or None


def starter() -> str:
    """Who is starting a server, as `status` shows it: the command that set STARTED_BY_ENV
    (`eval-pipeline run (pid 123)`), else this process's program and first word."""
    named = os.environ.get(STARTED_BY_ENV)
    if named:
        return named
    import sys

    argv = [a for a in sys.argv if a]
    words = [Path(argv[0]).name] if argv else ["python"]
    if len(argv) > 1 and not argv[1].startswith("-"):
        words.append(argv[1])
    return f"{' '.join(words)} (pid {os.getpid()})"


def group_rss(pgid: int) -> int | None:
    """Resident memory (bytes) of every running process in group `pgid` (a server and what it
    spawned); None without /proc or when the group is gone."""
    if not _PROC.is_dir():
        return None
    total, seen = 0, False
    for entry in os.scandir(_PROC):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if not _runs_in(pid, pgid):
            continue
        try:
            status = (_PROC / entry.name / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
                seen = True
                break
    return total if seen else None


def megabytes(size: int | None) -> str:
    return "RSS unknown" if size is None else f"RSS {size / 1e6:.0f} MB"


# --- records and locks --------------------------------------------------------------------------


def write_record(path: Path, record: Mapping[str, Any], *, mode: int = 0o600) -> None:
    """Write a server's record (pid, ports, started_at...) as JSON: a reader sees the old
    file or the new one, never half of one; `mode` 0600 as it may hold a key."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(dict(record), fh, indent=2)
    os.replace(tmp, path)


def read_record(path: Path) -> dict[str, Any] | None:
    """A record `write_record` wrote; None if missing or not a JSON object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing): callers racing to start the same
    server take turns, so one starts it and the others reuse it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
