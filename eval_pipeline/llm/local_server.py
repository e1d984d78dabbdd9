"""The `local` provider's server: llama.cpp behind an OpenAI-compatible API, on loopback.

One server per (weights sha256, server settings), started on first use by whichever process
needs it, found again by every later process through a state file in
`<state dir>/llm_servers/` (so Dagster steps, the CLI and tests reuse one loaded model), and
stopped by `eval-pipeline llm stop`, at the end of the `eval-pipeline run` that started it, or
by itself after `EVAL_LOCAL_IDLE_S` seconds without a request (default 900).

The server is llama-cpp-python's FastAPI app (`llama_cpp.server`), run by `serve_main` here so
that it gets an idle watchdog. It listens on 127.0.0.1 only and requires a random bearer key
that lives in the state file (0600) and never on a command line; the key is registered for
redaction. A server that died (llama.cpp segfaults on some grammars) is noticed by its pid and
restarted on the next request; the layer's retry covers the request that met the crash.

Traps met on this CPU and handled here: llama-cpp-python's `n_threads` defaults to 1 (we pass
the core count); `use_mlock` defaults to on (off here: it can fail under memory limits);
`logits_all` defaults to on (off: it costs memory and nothing uses it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from eval_pipeline import processes
from eval_pipeline.llm.credentials import redact, register_secret
from eval_pipeline.llm.errors import LLMConfigError, LLMError
from eval_pipeline.llm.local_models import LocalModel
from eval_pipeline.ports import free_port

SERVER_PACKAGE = "llama-cpp-python"
# Settings that decide answers are pins (and part of the cache key); threads do not.
CONTEXT_SIZE = 16384
DEFAULT_IDLE_S = 900.0
START_TIMEOUT_S = 240.0
OWNER_ENV = processes.OWNER_ENV  # one owner token for every server a command starts
_KEY_ENV = "EVAL_LOCAL_SERVER_KEY"
_MODULE = "eval_pipeline.llm.local_server"


class LocalServerError(LLMError):
    """The local server could not be started (missing package, bad weights, a crash)."""


@cache
def server_version() -> str | None:
    """`llama-cpp-python <version> (llama.cpp <commit or build>)`, or None if not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = f"{SERVER_PACKAGE} {version(SERVER_PACKAGE)}"
    except PackageNotFoundError:
        return None
    return text


def check_installed() -> str:
    version = server_version()
    if version is None:
        raise LLMConfigError(
            "the local provider needs llama-cpp-python[server]: run `make install` (it builds "
            "llama.cpp with -DGGML_NATIVE=OFF; see docs/local-models.md)"
        )
    return version


# Sent with every request, so the pins hold whatever the server's defaults become (these are
# llama-cpp-python 0.3.36's own). At temperature 0 sampling is greedy anyway; they matter when
# a user sets a temperature. Not top_k 0: with no truncation the grammar is checked against
# the whole vocabulary at every token (judge calls measured several times slower here).
REQUEST_SAMPLING: dict[str, object] = {"seed": 0, "top_p": 0.95, "top_k": 40, "min_p": 0.05}


def sampling_pins() -> dict[str, object]:
    """What decides sampling besides the role's temperature: sent per request, and n_ctx."""
    return {**REQUEST_SAMPLING, "n_ctx": CONTEXT_SIZE}


@dataclass
class ServerRecord:
    identity: str
    pid: int
    port: int
    model_path: str
    sha256: str
    n_ctx: int
    version: str
    started_at: float
    owner: str | None
    log: str
    key: str

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def public(self) -> dict[str, object]:
        """What `llm status` shows: everything but the key."""
        data = asdict(self)
        data.pop("key")
        data["base_url"] = self.base_url
        data["alive"] = pid_alive(self.pid)
        return data


def servers_dir() -> Path:
    from eval_pipeline.settings import state_dir

    return state_dir() / "llm_servers"


def identity_of(model: LocalModel) -> str:
    return f"{model.sha256[:16]}-ctx{CONTEXT_SIZE}"


def pid_alive(pid: int) -> bool:
    """Our server is alive under this pid (a reused pid running something else is not)."""
    if not processes.running(pid):
        return False
    args = processes.command_line(pid)
    return args is None or _MODULE in args  # no /proc: trust the signal


def _read(path: Path) -> ServerRecord | None:
    data = processes.read_record(path)
    try:
        record = ServerRecord(**data) if data is not None else None
    except TypeError:
        return None
    if record is not None:
        register_secret(record.key)
    return record


def _write(record: ServerRecord) -> None:
    processes.write_record(servers_dir() / f"{record.identity}.json", asdict(record))


@contextlib.contextmanager
def _locked(identity: str) -> Iterator[None]:
    directory = servers_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)  # records hold keys: ours alone
    with processes.locked(directory / f"{identity}.lock"):
        yield


def records() -> list[ServerRecord]:
    directory = servers_dir()
    if not directory.is_dir():
        return []
    out = [r for p in sorted(directory.glob("*.json")) if (r := _read(p)) is not None]
    return out


def healthy(record: ServerRecord, timeout_s: float = 2.0) -> bool:
    request = urllib.request.Request(
        record.base_url + "/models", headers={"Authorization": f"Bearer {record.key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def ensure_running(model: LocalModel) -> ServerRecord:
    """The running server for these weights, started (and waited for) if there is none."""
    identity = identity_of(model)
    with _locked(identity):
        path = servers_dir() / f"{identity}.json"
        record = _read(path) if path.exists() else None
        if record is not None and pid_alive(record.pid):
            return record
        return _start(model, identity)


def server_threads() -> int:
    """CPU threads per server: every core, unless EVAL_LOCAL_THREADS says otherwise (on a
    machine shared by several servers, fewer threads each avoids llama.cpp's threads spinning
    while they wait for a descheduled sibling). Threads do not change answers: not a pin."""
    text = os.environ.get("EVAL_LOCAL_THREADS", "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise LLMConfigError(f"EVAL_LOCAL_THREADS must be a positive integer, not {text!r}")
        return int(text)
    return os.cpu_count() or 2


def _start(model: LocalModel, identity: str) -> ServerRecord:
    version = check_installed()
    key = secrets.token_urlsafe(24)
    register_secret(key)
    port = free_port()
    log = servers_dir() / f"{identity}.log"
    idle = os.environ.get("EVAL_LOCAL_IDLE_S", str(DEFAULT_IDLE_S))
    command = [
        sys.executable,
        "-m",
        _MODULE,
        "serve",
        "--model",
        str(model.path),
        "--port",
        str(port),
        "--n-ctx",
        str(CONTEXT_SIZE),
        "--threads",
        str(server_threads()),
        "--idle-s",
        idle,
        "--activity-file",
        str(activity_file(log)),
    ]
    # Its own group: not killed with the step that started it. The key only in its env.
    child = processes.start(
        f"the local model server for {model.name}",
        command,
        log_path=log,
        env={**os.environ, _KEY_ENV: key},
        tail_lines=8,
    )
    record = ServerRecord(
        identity=identity,
        pid=child.pid,
        port=port,
        model_path=str(model.path),
        sha256=model.sha256,
        n_ctx=CONTEXT_SIZE,
        version=version,
        started_at=time.time(),
        owner=os.environ.get(OWNER_ENV),
        log=str(log),
        key=key,
    )
    try:
        child.wait_ready(
            lambda: healthy(record, timeout_s=1.0), timeout_s=START_TIMEOUT_S, poll_s=0.2
        )
    except processes.ProcessError as exc:
        raise LocalServerError(redact(str(exc))) from None
    _write(record)
    return record


def activity_file(log: Path | str) -> Path:
    """Touched by the server after every request: `llm status` reads its idle time there."""
    return Path(log).with_suffix(".activity")


def activity(record: ServerRecord) -> tuple[int, float]:
    """(requests in flight, seconds since a request last started or ended)."""
    path = activity_file(record.log)
    try:
        last = path.stat().st_mtime
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        last, text = record.started_at, ""
    in_flight = int(text) if text.isdigit() else 0
    return in_flight, max(0.0, time.time() - last)


def stop(record: ServerRecord) -> None:
    with _locked(record.identity):
        if pid_alive(record.pid):
            processes.stop_group(record.pid, grace_s=10.0)
        with contextlib.suppress(FileNotFoundError):
            (servers_dir() / f"{record.identity}.json").unlink()


def stop_all(*, owner: str | None = None) -> list[ServerRecord]:
    """Stop every server (or those `owner` started); returns what was stopped."""
    stopped = []
    for record in records():
        if owner is not None and record.owner != owner:
            continue
        stop(record)
        stopped.append(record)
    return stopped


@contextlib.contextmanager
def owned_servers() -> Iterator[str]:
    """Servers started inside (by this process or its children) are stopped on the way out;
    servers that were already running are reused and left running."""
    token = secrets.token_hex(8)
    previous = os.environ.get(OWNER_ENV)
    os.environ[OWNER_ENV] = token
    try:
        yield token
    finally:
        if previous is None:
            os.environ.pop(OWNER_ENV, None)
        else:
            os.environ[OWNER_ENV] = previous
        stop_all(owner=token)


# --- the server process ------------------------------------------------------------------


def serve_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {_MODULE} serve")
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-ctx", type=int, default=CONTEXT_SIZE)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--idle-s", type=float, default=DEFAULT_IDLE_S)
    parser.add_argument("--activity-file", default=None)
    args = parser.parse_args(argv)
    key = os.environ.pop(_KEY_ENV, None)
    if not key:
        print("serve: no key in the environment", file=sys.stderr)
        return 2

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    server_settings = ServerSettings(host="127.0.0.1", port=args.port, api_key=key)
    model_settings = ModelSettings(
        model=args.model,
        n_ctx=args.n_ctx,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        seed=0,
        use_mlock=False,
        logits_all=False,
        verbose=False,
    )
    app = create_app(server_settings=server_settings, model_settings=[model_settings])
    activity = {"last": time.monotonic(), "in_flight": 0}
    lock = threading.Lock()

    def publish(in_flight: int) -> None:
        # `llm status` reads it: the requests in flight, and (its mtime) the last change.
        if args.activity_file:
            with contextlib.suppress(OSError):
                Path(args.activity_file).write_text(str(in_flight), encoding="utf-8")

    @app.middleware("http")
    async def _track(request, call_next):  # type: ignore[no-untyped-def]
        with lock:
            activity["in_flight"] += 1
            publish(activity["in_flight"])
        try:
            return await call_next(request)
        finally:
            with lock:
                activity["in_flight"] -= 1
                activity["last"] = time.monotonic()
                publish(activity["in_flight"])

    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
    server = uvicorn.Server(config)

    def watchdog() -> None:
        while not server.should_exit:
            time.sleep(min(5.0, max(0.5, args.idle_s / 10)))
            with lock:
                idle = activity["in_flight"] == 0 and (
                    time.monotonic() - activity["last"] > args.idle_s
                )
            if idle:
                print(f"serve: idle for {args.idle_s:.0f} s, stopping", file=sys.stderr)
                server.should_exit = True

    threading.Thread(target=watchdog, name="idle-watchdog", daemon=True).start()
    server.run()
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        sys.exit(serve_main(sys.argv[2:]))
    print(f"usage: python -m {_MODULE} serve --model PATH --port N", file=sys.stderr)
    sys.exit(2)
