"""The embedded ArcadeDB server: a separate JVM from the `arcadedb-embedded` wheel.

A separate process (not the wheel's in-process JPype server) so the graph outlives the Dagster
step that started it: an asset materialized tomorrow reads the graph injected today. One
server per data directory; `<data_dir>/eval_pipeline_server.json` records its pid and ports so
the next caller reuses it, and a lock file serialises callers racing to start it.

Probed settings (DESIGN.md section 5): bundled JRE, loopback-only Bolt and HTTP on free ports,
explicit -Xmx, the database created at start (without it every query is a TransientError the
driver retries silently for 30 s), Bolt message limits raised (an oversize message hangs the
client without an error; the store also caps batch bytes below the limit), and the data
directory as the working directory (the server writes ./log).
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import neo4j
from pydantic import BaseModel

from eval_pipeline.graph.arcadedb_http import ArcadeHttp
from eval_pipeline.graph.errors import GraphServerError
from eval_pipeline.ports import free_port, port_is_free
from eval_pipeline.settings import state_dir

MAIN_CLASS = "com.arcadedb.server.ArcadeDBServer"
SERVER_FILE = "eval_pipeline_server.json"
PASSWORD_FILE = "eval_pipeline_root_password"
LOCK_FILE = ".eval_pipeline_server.lock"
CONSOLE_LOG = "log/eval_pipeline_server.out"
ROOT_USER = "root"

# Server-side Bolt limits; the store keeps each message well below them.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0

# Popen handles of servers started by this process, so a dead child is reaped, not a zombie.
_children: dict[int, subprocess.Popen[bytes]] = {}


class ServerInfo(BaseModel):
    pid: int
    bolt_port: int
    http_port: int
    data_dir: str
    database: str
    heap: str
    started_at: str

    @property
    def bolt_uri(self) -> str:
        return f"bolt://127.0.0.1:{self.bolt_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"


class Credentials(BaseModel):
    user: str
    password: str


def default_data_dir() -> Path:
    return state_dir() / "graph" / "arcadedb"


def resolve_data_dir(data_dir: str | Path | None) -> Path:
    return Path(data_dir).expanduser().resolve() if data_dir else default_data_dir()


def credentials(data_dir: Path) -> Credentials:
    """The root credentials of this directory's server, created on first use (mode 0600).

    ArcadeDB stores the root password at its first start, so it must stay the same for the
    life of the directory: generated once, kept beside the data, and handed to the server as a
    file path (a password on the command line would show in `ps`).
    """
    path = data_dir / PASSWORD_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process created it first: read theirs
            pass
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(secrets.token_urlsafe(24))
    return Credentials(user=ROOT_USER, password=path.read_text(encoding="utf-8").strip())


def read_info(data_dir: Path) -> ServerInfo | None:
    path = data_dir / SERVER_FILE
    try:
        return ServerInfo.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_alive(info: ServerInfo) -> bool:
    """True when `info.pid` is our server for this directory (not a recycled pid)."""
    child = _children.get(info.pid)
    if child is not None and child.poll() is not None:
        _children.pop(info.pid, None)
        return False
    try:
        cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    args = [a.decode(errors="replace") for a in cmdline]
    return MAIN_CLASS in args and f"-Darcadedb.server.rootPath={info.data_dir}" in args


def ensure_running(
    data_dir: str | Path | None = None,
    *,
    database: str = "eval",
    heap: str = "1g",
    timeout_s: float = START_TIMEOUT_S,
) -> ServerInfo:
    """Reuse the server running for `data_dir`, or start one; return once it answers Bolt.

    A running server is reused as it is (a different `heap` applies at its next start); a
    missing `database` is created on it. A dead one (killed, crashed) is started again on the
    same directory and ports, and ArcadeDB recovers its data from the WAL.
    """
    root = resolve_data_dir(data_dir)
    creds = credentials(root)
    with _locked(root):
        info = read_info(root)
        if info is not None and is_alive(info):
            _wait_ready(info, creds, None, timeout_s)
            if info.database != database:
                _ensure_database(info, creds, database)
            return info
        return _start(root, creds, database=database, heap=heap, previous=info, timeout_s=timeout_s)


def stop(data_dir: str | Path | None = None, *, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop this directory's server: SIGTERM, then SIGKILL after `timeout_s`. False if none ran."""
    root = resolve_data_dir(data_dir)
    with _locked(root):
        info = read_info(root)
        if info is None:
            return False
        stopped = False
        if is_alive(info):
            _signal(info.pid, signal.SIGTERM)
            if not _wait_exit(info, timeout_s):
                _signal(info.pid, signal.SIGKILL)
                if not _wait_exit(info, 10.0):
                    raise GraphServerError(f"embedded ArcadeDB (pid {info.pid}) did not stop")
            stopped = True
        # The file stays: the next start reuses its ports, so the URI users saw stays valid.
        return stopped


def kill(data_dir: str | Path | None = None) -> bool:
    """SIGKILL this directory's server without cleanup (crash tests); the next start recovers."""
    root = resolve_data_dir(data_dir)
    info = read_info(root)
    if info is None or not is_alive(info):
        return False
    _signal(info.pid, signal.SIGKILL)
    _wait_exit(info, 10.0)
    return True


def running_info(data_dir: str | Path | None = None) -> ServerInfo | None:
    info = read_info(resolve_data_dir(data_dir))
    return info if info is not None and is_alive(info) else None


# --- internals ------------------------------------------------------------------------------


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / LOCK_FILE, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _package_dir() -> Path:
    spec = importlib.util.find_spec("arcadedb_embedded")
    if spec is None or spec.origin is None:
        raise GraphServerError("the arcadedb-embedded package is not installed")
    return Path(spec.origin).parent


def java_command(
    root: Path, creds: Credentials, *, database: str, heap: str, bolt_port: int, http_port: int
) -> list[str]:
    pkg = _package_dir()
    java = pkg / "jre" / "bin" / "java"
    if not java.exists():
        raise GraphServerError(f"no bundled JRE at {java}: reinstall arcadedb-embedded")
    props = {
        "arcadedb.server.rootPath": str(root),
        "arcadedb.server.rootPasswordPath": str(root / PASSWORD_FILE),
        "arcadedb.server.defaultDatabases": f"{database}[{creds.user}]",
        "arcadedb.server.plugins": "Bolt:com.arcadedb.bolt.BoltProtocolPlugin",
        "arcadedb.server.httpIncomingHost": "127.0.0.1",
        "arcadedb.server.httpIncomingPort": str(http_port),
        "arcadedb.bolt.host": "127.0.0.1",
        "arcadedb.bolt.port": str(bolt_port),
        "arcadedb.bolt.maxMessageSize": str(MAX_MESSAGE_BYTES),
        "arcadedb.bolt.packstream.maxValueLength": str(MAX_MESSAGE_BYTES),
    }
    return [
        str(java),
        f"-Xmx{heap}",
        # A JVM out of heap keeps half-working; exiting makes the failure visible and restartable.
        "-XX:+ExitOnOutOfMemoryError",
        "-Dfile.encoding=UTF-8",
        *(f"-D{k}={v}" for k, v in props.items()),
        "-cp",
        str(pkg / "jars" / "*"),
        MAIN_CLASS,
    ]


def _pick_ports(previous: ServerInfo | None) -> tuple[int, int]:
    # Keep the previous ports when free, so the URI a user saw in `graph status` stays valid.
    if previous and port_is_free(previous.bolt_port) and port_is_free(previous.http_port):
        return previous.bolt_port, previous.http_port
    bolt = free_port()
    http = free_port()
    while http == bolt:
        http = free_port()
    return bolt, http


def _start(
    root: Path,
    creds: Credentials,
    *,
    database: str,
    heap: str,
    previous: ServerInfo | None,
    timeout_s: float,
) -> ServerInfo:
    bolt_port, http_port = _pick_ports(previous)
    cmd = java_command(
        root, creds, database=database, heap=heap, bolt_port=bolt_port, http_port=http_port
    )
    log_path = root / CONSOLE_LOG
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not in our process group: a ^C to us does not kill it
        )
    _children[proc.pid] = proc
    info = ServerInfo(
        pid=proc.pid,
        bolt_port=bolt_port,
        http_port=http_port,
        data_dir=str(root),
        database=database,
        heap=heap,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    tmp = root / (SERVER_FILE + ".tmp")
    tmp.write_text(info.model_dump_json(indent=2), encoding="utf-8")
    tmp.replace(root / SERVER_FILE)
    try:
        _wait_ready(info, creds, proc, timeout_s)
    except BaseException:
        _signal(proc.pid, signal.SIGKILL)
        proc.wait()
        (root / SERVER_FILE).unlink(missing_ok=True)
        raise
    return info


def _wait_ready(
    info: ServerInfo, creds: Credentials, proc: subprocess.Popen[bytes] | None, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    last_error = "no answer yet"
    driver = neo4j.GraphDatabase.driver(
        info.bolt_uri, auth=(creds.user, creds.password), connection_timeout=2.0
    )
    try:
        while True:
            if proc is not None and proc.poll() is not None:
                raise GraphServerError(
                    f"embedded ArcadeDB exited with code {proc.returncode} while starting; "
                    f"see {Path(info.data_dir) / CONSOLE_LOG}: {_log_tail(info)}"
                )
            if proc is None and not is_alive(info):
                raise GraphServerError(f"embedded ArcadeDB (pid {info.pid}) is gone")
            try:
                with driver.session(database=info.database) as session:
                    session.run("RETURN 1 AS ok").consume()
                return
            except neo4j.exceptions.AuthError as exc:
                raise GraphServerError(
                    f"embedded ArcadeDB at {info.bolt_uri} refused the credentials in "
                    f"{Path(info.data_dir) / PASSWORD_FILE} ({exc.message})"
                ) from None
            except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, OSError) as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                raise GraphServerError(
                    f"embedded ArcadeDB (pid {info.pid}) did not answer on {info.bolt_uri} "
                    f"within {timeout_s:.0f} s ({last_error[:200]})"
                )
            time.sleep(0.25)
    finally:
        driver.close()


def _ensure_database(info: ServerInfo, creds: Credentials, database: str) -> None:
    # A reused server was started for another database: create this one over HTTP (Bolt
    # refuses CREATE DATABASE, and a missing database makes the driver retry for 30 s).
    http = ArcadeHttp(info.http_url, creds.user, creds.password)
    if database not in http.databases():
        http.create_database(database)


def _log_tail(info: ServerInfo, lines: int = 3) -> str:
    try:
        text = (Path(info.data_dir) / CONSOLE_LOG).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    tail = [ln.strip() for ln in text.strip().splitlines()[-lines:]]
    return " | ".join(tail)[:500]


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait_exit(info: ServerInfo, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    child = _children.get(info.pid)
    while time.monotonic() < deadline:
        if child is not None:
            if child.poll() is not None:
                _children.pop(info.pid, None)
                return True
        elif not is_alive(info):
            return True
        time.sleep(0.1)
    return False
