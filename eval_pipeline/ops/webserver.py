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
import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from eval_pipeline import processes
from eval_pipeline.ports import port_is_free

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


class _DagsterProcess:
    """One Dagster command in its own process group, as a context manager that stops it."""

    name = "dagster"

    def __init__(
        self, log_path: Path, module: str = DEFINITIONS_MODULE, env: dict[str, str] | None = None
    ) -> None:
        self.log_path = log_path
        self.module = module
        self.env = dict(env) if env is not None else None
        self.child: processes.ChildServer | None = None

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child else None

    def __enter__(self) -> Self:
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
            raise WebserverError(
                f"DAGSTER_HOME is not set for {self.name} (see ensure_dagster_home())"
            )
        # The same interpreter as ours: the same venv, the same dagster version.
        args = [sys.executable, "-m", *self.module_args()]
        self.child = processes.start(
            self.name, args, log_path=self.log_path, env=env, fresh_log=True
        )

    def module_args(self) -> list[str]:
        raise NotImplementedError

    def check_alive(self) -> None:
        assert self.child is not None
        try:
            self.child.check_alive()
        except processes.ServerExited as exc:
            raise WebserverError(str(exc)) from None

    def stop(self) -> None:
        # The whole group: the code server and run workers it spawned must not outlive it.
        if self.child is not None:
            try:
                self.child.stop(grace_s=15)
            except processes.ProcessError as exc:
                raise WebserverError(str(exc)) from None


class DagsterWebserver(_DagsterProcess):
    """`dagster-webserver -h 127.0.0.1 -p PORT -m eval_pipeline.definitions` as a context
    manager; DAGSTER_HOME (in `env`, else ours) must already point at the instance to show."""

    name = "dagster-webserver"

    def __init__(
        self,
        port: int,
        log_path: Path,
        module: str = DEFINITIONS_MODULE,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(log_path, module, env)
        self.port = port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        if not port_is_free(self.port):
            # Else we might check someone else's server (another instance, another version).
            raise WebserverError(f"port {self.port} on 127.0.0.1 is in use; pick another --port")
        super().start()

    def module_args(self) -> list[str]:
        return ["dagster_webserver", "-h", "127.0.0.1", "-p", str(self.port), "-m", self.module]

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
        assert self.child is not None
        try:
            self.child.wait_ready(self._locations_loaded, timeout_s=timeout, poll_s=0.5)
        except processes.ProcessError as exc:
            raise WebserverError(str(exc)) from None

    def _locations_loaded(self) -> bool:
        try:
            data = self.graphql(LOCATIONS_QUERY)
        except (OSError, urllib.error.URLError, ValueError) as exc:
            raise processes.NotReady(f"no answer ({exc})") from None
        entries = (data.get("data") or {}).get("workspaceOrError", {}).get("locationEntries")
        if not entries:
            why = data.get("errors") or data.get("data")
            raise processes.NotReady(f"no code location yet ({why})")
        for entry in entries:
            err = entry.get("locationOrLoadError") or {}
            if err.get("__typename") == "PythonError":
                first = (err.get("message") or "").strip().splitlines()[:1]
                raise WebserverError(
                    f"code location {entry['name']} failed to load: {' '.join(first)}"
                )
        if all(e.get("loadStatus") == "LOADED" for e in entries):
            return True
        raise processes.NotReady("code location loading")


class DagsterDaemon(_DagsterProcess):
    """`dagster-daemon run -m eval_pipeline.definitions` as a context manager, in its own
    process group: what dequeues runs (the instance's run coordinator is the queued one, with
    tag concurrency limits), runs sensors and retries crashed runs, as under `dagster dev`."""

    name = "dagster-daemon"

    def module_args(self) -> list[str]:
        return ["dagster._daemon", "run", "-m", self.module]
