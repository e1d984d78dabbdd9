"""Start and stop `dagster-webserver` (and, when runs must be dequeued, `dagster-daemon`) on
loopback for a check, each by its process group.

Each runs in its own session (the `set -m` of a shell script): SIGTERM to its group reaches
it and the code server and run workers it spawns, and a Ctrl-C meant for us does not reach it
half-way through a check. Both take the environment they are given (a check's own
DAGSTER_HOME and state dir), never more than the caller's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from eval_pipeline.ops.browser import kill_group
from eval_pipeline.ports import port_is_free


def _start_in_own_group(args: list[str], log_path: Path, env: dict[str, str]) -> subprocess.Popen:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=env, start_new_session=True,
        )  # fmt: skip


def _log_tail(log_path: Path) -> str:
    try:
        lines = log_path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


DEFINITIONS_MODULE = "eval_pipeline.definitions"

LOCATIONS_QUERY = """
{ workspaceOrError { __typename ... on Workspace { locationEntries {
    name loadStatus
    locationOrLoadError { __typename ... on PythonError { message } }
} } } }
"""


class WebserverError(RuntimeError):
    """The webserver did not start, or its code location did not load."""


def _opener() -> urllib.request.OpenerDirector:
    # Loopback only: never through an HTTP(S)_PROXY from the environment.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


class DagsterWebserver:
    """`dagster-webserver -h 127.0.0.1 -p PORT -m eval_pipeline.definitions` as a context
    manager; DAGSTER_HOME (in `env`, else ours) must already point at the instance to show."""

    def __init__(
        self,
        port: int,
        log_path: Path,
        module: str = DEFINITIONS_MODULE,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = port
        self.log_path = log_path
        self.module = module
        self.env = dict(env) if env is not None else None
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def __enter__(self) -> DagsterWebserver:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        if not port_is_free(self.port):
            # Else we might check someone else's server (another instance, another version).
            raise WebserverError(f"port {self.port} on 127.0.0.1 is in use; pick another --port")
        env = self.env if self.env is not None else os.environ.copy()
        if not env.get("DAGSTER_HOME"):
            raise WebserverError("DAGSTER_HOME is not set (call ensure_dagster_home() first)")
        # The same interpreter as ours: the same venv, the same dagster version.
        args = [sys.executable, "-m", "dagster_webserver", "-h", "127.0.0.1"]
        args += ["-p", str(self.port), "-m", self.module]
        self.proc = _start_in_own_group(args, self.log_path, env)

    def stop(self) -> None:
        if self.proc is not None:
            kill_group(self.proc, grace=15)

    def _check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise WebserverError(
                f"dagster-webserver exited with {self.proc.returncode}: "
                f"{_log_tail(self.log_path)} (log: {self.log_path})"
            )

    def graphql(
        self, query: str, variables: dict[str, Any] | None = None, timeout: float = 10
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"query": query}
        if variables is not None:
            payload["variables"] = variables
        body = json.dumps(payload).encode("utf-8")
        req = urllib.request.Request(
            f"{self.base_url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with _opener().open(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def wait_ready(self, timeout: float) -> None:
        """Until the server answers and the code location has loaded (or failed to)."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                data = self.graphql(LOCATIONS_QUERY)
            except (OSError, urllib.error.URLError, ValueError) as exc:
                last = f"no answer ({exc})"
                time.sleep(0.5)
                continue
            entries = (data.get("data") or {}).get("workspaceOrError", {}).get("locationEntries")
            if not entries:
                last = f"no code location yet ({data.get('errors') or data.get('data')})"
                time.sleep(0.5)
                continue
            for entry in entries:
                err = entry.get("locationOrLoadError") or {}
                if err.get("__typename") == "PythonError":
                    first = (err.get("message") or "").strip().splitlines()[:1]
                    raise WebserverError(
                        f"code location {entry['name']} failed to load: {' '.join(first)}"
                    )
            if all(e.get("loadStatus") == "LOADED" for e in entries):
                return
            last = "code location loading"
            time.sleep(0.5)
        raise WebserverError(f"dagster-webserver not ready after {timeout:.0f} s: {last}")


class DagsterDaemon:
    """`dagster-daemon run -m eval_pipeline.definitions` as a context manager, in its own
    process group: what dequeues runs (the instance's run coordinator is the queued one, with
    tag concurrency limits), runs sensors and retries crashed runs, as under `dagster dev`."""

    def __init__(
        self, log_path: Path, module: str = DEFINITIONS_MODULE, env: dict[str, str] | None = None
    ) -> None:
        self.log_path = log_path
        self.module = module
        self.env = dict(env) if env is not None else None
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def __enter__(self) -> DagsterDaemon:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        env = self.env if self.env is not None else os.environ.copy()
        if not env.get("DAGSTER_HOME"):
            raise WebserverError("DAGSTER_HOME is not set for dagster-daemon")
        args = [sys.executable, "-m", "dagster._daemon", "run", "-m", self.module]
        self.proc = _start_in_own_group(args, self.log_path, env)

    def check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise WebserverError(
                f"dagster-daemon exited with {self.proc.returncode}: "
                f"{_log_tail(self.log_path)} (log: {self.log_path})"
            )

    def stop(self) -> None:
        if self.proc is not None:
            kill_group(self.proc, grace=15)
