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

Reads that could harm the server (issue 13) are bounded by the server itself:
- time: `arcadedb.command.timeout` aborts any statement still running after COMMAND_TIMEOUT_S,
  even when the client that sent it is gone (ArcadeDB ignores the Bolt transaction timeout);
  agent queries are stopped much sooner, at their own timeout, by `GuardedReader`, which
  terminates them on the server (`terminate query`, see `running_queries`/`terminate_query`);
- memory: ArcadeDB's per-query heap guards stay on (`queryMaxHeapElementsAllowedPerOp`,
  `queryMaxHeapRAM`, `queryMaxRangeSize`), and a statement that still exhausts the heap (one
  huge string: nothing in ArcadeDB or the JVM caps a value's size) fails alone: the JVM no
  longer exits on OutOfMemoryError, and the query admission gate is off, because the Bolt
  thread an OutOfMemoryError kills never gives its admission slot back (probed on 26.10.2:
  four such statements wedged every later query, Bolt and HTTP alike);
- surface: the MCP endpoint (`/api/v1/mcp`, auto-discovered whatever `arcadedb.server.plugins`
  says) and the Postgres, Redis and GraphQL modules are left off the classpath; Bolt and the
  HTTP API (`/api/v1/command`, `/api/v1/server`) are all the pipeline uses. LOAD CSV may read
  neither local files nor URLs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import neo4j
from pydantic import BaseModel

from eval_pipeline import processes
from eval_pipeline.graph.arcadedb_http import ArcadeHttp
from eval_pipeline.graph.errors import GraphServerError
from eval_pipeline.ports import free_port, port_is_free
from eval_pipeline.settings import state_dir

log = logging.getLogger(__name__)

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
# Server-side ceiling on any one statement (arcadedb.command.timeout). The pipeline's longest
# statement measured on the full LongMemEval-S graph (234k turns) is the fingerprint's read of
# every turn, 18 s; agent queries are terminated at their own, much shorter, timeout.
COMMAND_TIMEOUT_S = 300.0
# Jars of the wheel the server must not load: modules the pipeline never uses that add an
# endpoint or a query language (MCP registers /api/v1/mcp by itself once on the classpath).
UNUSED_JARS = ("arcadedb-mcp-", "arcadedb-postgresw-", "arcadedb-redisw-", "arcadedb-graphql-")
NAME = "embedded ArcadeDB"  # what errors call it


class ServerInfo(BaseModel):
    pid: int
    bolt_port: int
    http_port: int
    data_dir: str
    database: str
    heap: str
    started_at: str
    command_timeout_s: float | None = None  # None: started before the ceiling existed
    started_by: str | None = None  # the command that started it (`graph status` shows it)
    owner: str | None = None  # the starting command's token (processes.OWNER_ENV)

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


def known_dir() -> Path:
    """Where the state dir notes every data directory a server was started on (one outside
    the state dir too), so `graph status` and `graph stop` find them all."""
    return state_dir() / "graph" / "instances"


def remember(root: Path) -> None:
    name = hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:16]
    known_dir().mkdir(parents=True, exist_ok=True)
    processes.write_record(known_dir() / f"{name}.json", {"data_dir": str(root)})


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
    record = processes.read_record(data_dir / SERVER_FILE)
    try:
        return ServerInfo.model_validate(record) if record is not None else None
    except ValueError:
        return None


def is_alive(info: ServerInfo) -> bool:
    """True when `info.pid` is our server for this directory (not a recycled pid)."""
    args = processes.command_line(info.pid) or []
    return MAIN_CLASS in args and f"-Darcadedb.server.rootPath={info.data_dir}" in args


def ensure_running(
    data_dir: str | Path | None = None,
    *,
    database: str = "eval",
    heap: str = "1g",
    timeout_s: float = START_TIMEOUT_S,
    command_timeout_s: float = COMMAND_TIMEOUT_S,
) -> ServerInfo:
    """Reuse the server running for `data_dir`, or start one; return once it answers Bolt.

    A running server is reused as it is (a different `heap` or `command_timeout_s` applies at
    its next start; one started without today's limits is reported in the log); a missing
    `database` is created on it. A dead one (killed, crashed) is started again on the same
    directory and ports, and ArcadeDB recovers its data from the WAL.
    """
    root = resolve_data_dir(data_dir)
    creds = credentials(root)
    with processes.locked(root / LOCK_FILE):
        info = read_info(root)
        if info is not None and is_alive(info):
            _wait_ready(info, creds, None, timeout_s)
            if info.database != database:
                _ensure_database(info, creds, database)
            _warn_if_outdated(info)
            return info
        return _start(
            root,
            creds,
            database=database,
            heap=heap,
            command_timeout_s=command_timeout_s,
            previous=info,
            timeout_s=timeout_s,
        )


def stop(data_dir: str | Path | None = None, *, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop this directory's server (its process group): SIGTERM, then SIGKILL after `timeout_s`.
    False if none ran."""
    root = resolve_data_dir(data_dir)
    with processes.locked(root / LOCK_FILE):
        info = read_info(root)
        if info is None:
            return False
        stopped = False
        if is_alive(info):
            if not processes.stop_group(info.pid, grace_s=timeout_s):
                raise GraphServerError(f"{NAME} (pid {info.pid}) did not stop")
            stopped = True
        # The file stays: the next start reuses its ports, so the URI users saw stays valid.
        return stopped


def kill(data_dir: str | Path | None = None) -> bool:
    """SIGKILL this directory's server without cleanup (crash tests); the next start recovers."""
    root = resolve_data_dir(data_dir)
    info = read_info(root)
    if info is None or not is_alive(info):
        return False
    processes.kill_group(info.pid)
    return True


def running_info(data_dir: str | Path | None = None) -> ServerInfo | None:
    info = read_info(resolve_data_dir(data_dir))
    return info if info is not None and is_alive(info) else None


# How ArcadeDB lists a statement's text (RunningQuery.maskAndTruncate in 26.10.2): credentials
# after these keywords masked, then cut at 1024 characters plus "...". Java's characters are
# UTF-16 units: a character outside the BMP counts twice, and a pair cut in two leaves a lone
# surrogate, which the JSON answer carries as "?" (probed on 26.10.2).
_LISTED_MAX = 1024
_LISTED_MARGIN = 256
_LISTED_CREDENTIAL = re.compile(
    r"\b(identified\s+by|password|passwd|pwd|token|secret|api[_-]?key|authorization|bearer)\b"
    r"([\"']?+\s*+(?:[=:]\s*+)?(?:(?:bearer|basic)\s++)?)('[^']*'|\"[^\"]*\"|[^\s,;)}\]]+)",
    re.IGNORECASE | re.ASCII,
)


def listed_text(statement: str) -> str:
    """`statement` as `list queries` shows it, to recognise it there."""
    scanned = statement[: _LISTED_MAX + _LISTED_MARGIN]
    masked = _LISTED_CREDENTIAL.sub(r"\1\2***", scanned)
    units = masked.encode("utf-16-le", "surrogatepass")
    if len(units) <= 2 * _LISTED_MAX:
        return masked
    cut = units[: 2 * _LISTED_MAX].decode("utf-16-le", "surrogatepass")
    if "\ud800" <= cut[-1] <= "\udbff":
        cut = cut[:-1] + "?"  # the high half of a pair, as the JSON answer spells it
    return cut + "..."


def running_queries(http: ArcadeHttp, database: str | None = None) -> list[dict[str, Any]]:
    """Statements running on an ArcadeDB server now (`list queries`): id, database, user,
    protocol, text (masked and cut at 1024 UTF-16 units), startedAt (epoch ms), elapsedMs."""
    command = "list queries" + (f" database {database}" if database else "")
    return list(http.server_command(command).get("result") or [])


def terminate_query(http: ArcadeHttp, query_id: str) -> str:
    """Ask the server to stop statement `query_id` (`terminate query`); its status after."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", query_id):
        raise GraphServerError(f"not an ArcadeDB query id: {query_id!r}")
    result = http.server_command(f"terminate query {query_id}").get("result") or {}
    return str(result.get("status", "unknown"))


def effective_settings(http: ArcadeHttp, database: str) -> dict[str, Any]:
    """The settings a running ArcadeDB applies: the server's (`GET /api/v1/server`), then
    `database`'s own over them (`schema:database`), by key."""
    out = {str(s["key"]): s.get("value") for s in http.server_settings()}
    rows = http.sql(database, "SELECT settings FROM schema:database")
    for s in (rows[0].get("settings") if rows else None) or []:
        out[str(s["key"])] = s.get("value")
    return out


# --- internals ------------------------------------------------------------------------------


def _package_dir() -> Path:
    spec = importlib.util.find_spec("arcadedb_embedded")
    if spec is None or spec.origin is None:
        raise GraphServerError("the arcadedb-embedded package is not installed")
    return Path(spec.origin).parent


def server_classpath(pkg: Path) -> str:
    """The wheel's jars minus UNUSED_JARS, as a classpath (a `jars/*` wildcard would load the
    MCP module, whose plugin registers its HTTP endpoint whatever the plugin list says)."""
    jars = sorted(j for j in (pkg / "jars").glob("*.jar") if not j.name.startswith(UNUSED_JARS))
    if not any(j.name.startswith("arcadedb-server-") for j in jars):
        raise GraphServerError(
            f"no arcadedb-server jar in {pkg / 'jars'}: reinstall arcadedb-embedded"
        )
    return os.pathsep.join(str(j) for j in jars)


def server_settings(*, command_timeout_s: float = COMMAND_TIMEOUT_S) -> dict[str, str]:
    """The ArcadeDB settings that bound what one statement can do to the server (issue 13);
    every key exists in 26.10.2's GlobalConfiguration (checked by the tests)."""
    return {
        # Time: no statement runs longer than this, whoever sent it and whether or not its
        # client still waits (checked inside scans, expansions and UNWIND loops).
        "arcadedb.command.timeout": str(int(command_timeout_s * 1000)),
        # The admission gate leaks the slot of a Bolt thread an OutOfMemoryError killed: four
        # such statements wedged the server. Off; the heap budget below still holds.
        "arcadedb.queryMaxConcurrent": "0",
        # LOAD CSV: no local file, no URL (the pipeline never loads CSV).
        "arcadedb.opencypher.loadCsv.allowFileUrls": "false",
        "arcadedb.opencypher.loadCsv.allowRemoteUrls": "false",
    }


def java_command(
    root: Path,
    creds: Credentials,
    *,
    database: str,
    heap: str,
    bolt_port: int,
    http_port: int,
    command_timeout_s: float = COMMAND_TIMEOUT_S,
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
        **server_settings(command_timeout_s=command_timeout_s),
    }
    return [
        str(java),
        f"-Xmx{heap}",
        # No -XX:+ExitOnOutOfMemoryError: one agent statement building a huge value must not
        # take the graph down. Such a statement fails alone (its Bolt connection is dropped)
        # and the server keeps answering; see the module docstring.
        "-Dfile.encoding=UTF-8",
        *(f"-D{k}={v}" for k, v in props.items()),
        "-cp",
        server_classpath(pkg),
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
    command_timeout_s: float,
    previous: ServerInfo | None,
    timeout_s: float,
) -> ServerInfo:
    bolt_port, http_port = _pick_ports(previous)
    cmd = java_command(
        root,
        creds,
        database=database,
        heap=heap,
        bolt_port=bolt_port,
        http_port=http_port,
        command_timeout_s=command_timeout_s,
    )
    child = processes.start(NAME, cmd, log_path=root / CONSOLE_LOG, cwd=root)
    info = ServerInfo(
        pid=child.pid,
        bolt_port=bolt_port,
        http_port=http_port,
        data_dir=str(root),
        database=database,
        heap=heap,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        command_timeout_s=command_timeout_s,
        started_by=processes.starter(),
        owner=processes.current_owner(),
    )
    remember(root)
    # Written before the wait: a caller that finds it while the server loads waits for it.
    processes.write_record(root / SERVER_FILE, info.model_dump(mode="json"))
    try:
        _wait_ready(info, creds, child, timeout_s)
    except BaseException:
        (root / SERVER_FILE).unlink(missing_ok=True)  # the wait killed the server
        raise
    return info


def _wait_ready(
    info: ServerInfo,
    creds: Credentials,
    child: processes.ChildServer | None,
    timeout_s: float,
) -> None:
    """Until Bolt answers: the server `child` this process just started, else the running one
    `info` names (a server started by another process, maybe still loading)."""
    driver = neo4j.GraphDatabase.driver(
        info.bolt_uri, auth=(creds.user, creds.password), connection_timeout=2.0
    )

    def answers_bolt() -> bool:
        try:
            with driver.session(database=info.database) as session:
                session.run("RETURN 1 AS ok").consume()
        except neo4j.exceptions.AuthError as exc:
            raise GraphServerError(
                f"{NAME} at {info.bolt_uri} refused the credentials in "
                f"{Path(info.data_dir) / PASSWORD_FILE} ({exc.message})"
            ) from None
        except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, OSError) as exc:
            raise processes.NotReady(f"{info.bolt_uri}: {type(exc).__name__}: {exc}") from None
        return True

    try:
        if child is not None:
            child.wait_ready(answers_bolt, timeout_s=timeout_s)
        else:
            processes.wait_ready(
                NAME, info.pid, answers_bolt, timeout_s=timeout_s, alive=lambda: is_alive(info)
            )
    except processes.ProcessError as exc:
        raise GraphServerError(str(exc)) from None
    finally:
        driver.close()


def _ensure_database(info: ServerInfo, creds: Credentials, database: str) -> None:
    # A reused server was started for another database: create this one over HTTP (Bolt
    # refuses CREATE DATABASE, and a missing database makes the driver retry for 30 s).
    http = ArcadeHttp(info.http_url, creds.user, creds.password)
    if database not in http.databases():
        http.create_database(database)


def outdated_settings(args: list[str]) -> list[str]:
    """What a server started with command line `args` lacks of today's limits (issue 13)."""
    missing = [f"{k}={v}" for k, v in server_settings().items() if not _has_property(args, k)]
    if "-XX:+ExitOnOutOfMemoryError" in args:
        missing.append("surviving an OutOfMemoryError (it has -XX:+ExitOnOutOfMemoryError)")
    classpath = args[args.index("-cp") + 1] if "-cp" in args[:-1] else ""
    if classpath.endswith("*") or any(jar in classpath for jar in UNUSED_JARS):
        missing.append("the unused modules left out (its MCP endpoint answers)")
    return missing


def _has_property(args: list[str], key: str) -> bool:
    return any(a.startswith(f"-D{key}=") for a in args)


def _warn_if_outdated(info: ServerInfo) -> None:
    # A server started by an older version of this module runs without today's limits until
    # it is restarted; say so rather than reuse it silently.
    args = processes.command_line(info.pid)
    missing = outdated_settings(args) if args is not None else []
    if missing:
        log.warning(
            "embedded ArcadeDB (pid %s, %s) was started without %s; `eval-pipeline graph "
            "stop` lets the next start apply them",
            info.pid,
            info.data_dir,
            "; ".join(missing),
        )
