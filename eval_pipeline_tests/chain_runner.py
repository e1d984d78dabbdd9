"""`eval-pipeline run` in this process, as a user runs it but without a new interpreter and a
new JVM per chain: the real CLI entry point (`eval_pipeline.cli.main`) with stdout and stderr
captured, its state dir and DAGSTER_HOME the test's own, and the graph a fresh database on the
session's one embedded ArcadeDB (`graph_dir` in conftest.py), given as a `--config` section.

Output is captured at the file descriptors, as a shell sees it: what this process prints and
what the processes it starts print (the batch workers of `--batches K`), in the order written.

A few tests still run the console script as a subprocess (exit codes and one-line errors as a
shell sees them, chains racing from two processes): `shell_run`, `spawn_run`, `shell_cli`.
The `dagster` CLI runs here too (`dagster(...)`): its own entry point, in this process.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from eval_pipeline.cli import main
from eval_pipeline.settings import REPO_DIR

EXE = str(Path(sys.executable).with_name("eval-pipeline"))
# Never in a test's chain: deepeval would upload results (the pipeline refuses to start).
UNSET_BY_DEFAULT = ("CONFIDENT_API_KEY",)

Env = Mapping[str, str | None]  # a value None: unset for the run


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str

    @property
    def run_dir(self) -> Path:
        """The bundle: the last line of stdout."""
        return Path(self.stdout.strip().splitlines()[-1])

    @property
    def run_dirs(self) -> list[Path]:
        """Every bundle of a run with repeats: the lines of stdout after `calibrate with:`,
        or the last one."""
        lines = self.stdout.strip().splitlines()
        start = next((i + 1 for i, x in enumerate(lines) if "calibrate with:" in x), len(lines) - 1)
        return [Path(x) for x in lines[start:]]

    @property
    def stage_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("[")]

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr.strip().splitlines()


@contextlib.contextmanager
def captured_fds() -> Iterator[dict[str, str]]:
    """fd 1 and 2 (and sys.stdout/sys.stderr over them) into files for the block; their text
    in the dict yielded, filled in when the block ends."""
    got: dict[str, str] = {}
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        saved_fds = os.dup(1), os.dup(2)
        saved_streams = sys.stdout, sys.stderr
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        # Not closed afterwards: a logging handler made during the run may still hold one;
        # closefd=False, so it writes to whatever fd 1/2 are then.
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        try:
            yield got
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = saved_streams
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            os.close(saved_fds[0])
            os.close(saved_fds[1])
            for name, f in (("stdout", out), ("stderr", err)):
                f.seek(0)
                got[name] = f.read().decode("utf-8", errors="replace")


# Python's own warning filters, as a console script starts with them (not pytest's).
CONSOLE_WARNING_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, None),
    ("ignore", PendingDeprecationWarning, None),
    ("ignore", ImportWarning, None),
    ("ignore", ResourceWarning, None),
)


@contextlib.contextmanager
def console_warnings() -> Iterator[None]:
    """Warnings shown on stderr (captured with the command's output) under the filters a
    console script has, instead of recorded by pytest."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    with warnings.catch_warnings():
        warnings.resetwarnings()
        for action, category, module in reversed(CONSOLE_WARNING_FILTERS):
            warnings.filterwarnings(action, category=category, module=module or "")
        warnings.showwarning = show
        yield


class Chain:
    """Chains of one test (or one module): one state dir, one Dagster instance, one graph.

    The instance is in memory unless `persistent`: the CLI's `local_instance()` gives this
    chain's own ephemeral instance (Dagster's SQLite storage costs about 0.2 s a stage run,
    and what the stages do does not depend on where Dagster keeps its records). A chain
    whose runs another process must see — batch workers, a console script or the `dagster`
    CLI beside it — is persistent: DAGSTER_HOME on disk, as a user's."""

    def __init__(
        self, root: Path, graph_dir: Path, database: str, env: Env, *, persistent: bool = False
    ) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.state = root / "state"
        self.dagster_home = self.state / "dagster_home"
        self.graph_dir = graph_dir
        self.graph = {"data_dir": str(graph_dir), "database": database, "heap": "512m"}
        self.env: dict[str, str | None] = {
            **dict.fromkeys(UNSET_BY_DEFAULT),
            "EVAL_PIPELINE_HOME": str(self.state),
            "DAGSTER_HOME": str(self.dagster_home),
            **env,
        }
        self._configs = 0
        self.persistent = persistent
        self._memory = None  # the ephemeral instance, made on first use

    @contextlib.contextmanager
    def environment(self, env: Env | None = None) -> Iterator[None]:
        """This chain's environment (and `env`) for the block; the umask restored after it
        (the CLI makes everything it creates private, for the rest of its process)."""
        values = {**self.env, **(env or {})}
        saved = {k: os.environ.get(k) for k in values}
        for key, value in values.items():
            _set_env(key, value)
        umask = os.umask(0o077)
        os.umask(umask)
        patched = None
        if not self.persistent:
            from eval_pipeline import dagster_home

            patched = dagster_home.local_instance
            dagster_home.local_instance = self.instance
        try:
            yield
        finally:
            if patched is not None:
                from eval_pipeline import dagster_home

                dagster_home.local_instance = patched
            os.umask(umask)
            for key, value in saved.items():
                _set_env(key, value)

    def config_file(self, given: Path | None, graph: dict[str, Any] | None = None) -> Path:
        """A --config file: the test's own (if any) with this chain's graph section."""
        data = yaml.safe_load(given.read_text()) if given is not None else {}
        data = dict(data or {})
        data["graph"] = {**self.graph, **(data.get("graph") or {}), **(graph or {})}
        self._configs += 1
        path = self.root / f"chain-config-{self._configs}.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    def run_argv(self, *args: str, graph: dict[str, Any] | None = None) -> list[str]:
        """`run ARGS`, a `--config` among ARGS merged with this chain's graph section."""
        argv = list(args)
        given = None
        if "--config" in argv:
            i = argv.index("--config")
            given = Path(argv[i + 1])
            del argv[i : i + 2]
        return ["run", *argv, "--config", str(self.config_file(given, graph))]

    def run(self, *args: str, graph: dict[str, Any] | None = None, env: Env | None = None) -> Ran:
        """`eval-pipeline run ARGS` in this process (a `--config` among ARGS is merged with the
        graph's)."""
        return self.cli(*self.run_argv(*args, graph=graph), env=env)

    def cli(self, *argv: str, env: Env | None = None) -> Ran:
        """Any `eval-pipeline` command, in this process."""
        with self.environment(env), captured_fds() as got, console_warnings():
            try:
                code = main(list(argv))
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else 1
        return Ran(code, got["stdout"], got["stderr"])

    def dagster(self, *argv: str) -> Ran:
        """The `dagster` CLI (its own click entry point), in this process: e.g. `asset
        materialize -m eval_pipeline.definitions --select ...`. An error it does not handle
        is a traceback on stderr and exit 1, as from its console script."""
        from dagster._cli import ENV_PREFIX, cli

        with self.environment(), captured_fds() as got, console_warnings():
            try:
                cli.main(list(argv), prog_name="dagster", auto_envvar_prefix=ENV_PREFIX)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except Exception:  # noqa: BLE001 - the console script would print it and exit 1
                traceback.print_exc()
                code = 1
        return Ran(code, got["stdout"], got["stderr"])

    # --- the console script, as a shell runs it ------------------------------------------

    def subprocess_env(self, env: Env | None = None) -> dict[str, str]:
        """os.environ with this chain's variables; the repository importable (the tests'
        plug-ins live in the test package)."""
        out = dict(os.environ)
        # A CLI run in this process may have remembered a terminal (progress.remember_terminal):
        # a child whose stderr is a pipe shows plain lines unless the test asks otherwise.
        out.pop("EVAL_PIPELINE_PROGRESS", None)
        for key, value in {**self.env, **(env or {})}.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        path = [str(REPO_DIR), *filter(None, [out.get("PYTHONPATH")])]
        out["PYTHONPATH"] = os.pathsep.join(path)
        return out

    def spawn_run(
        self, *args: str, graph: dict[str, Any] | None = None, env: Env | None = None
    ) -> subprocess.Popen[str]:
        """`eval-pipeline run ARGS` as a process of its own, started, not waited for."""
        return subprocess.Popen(
            [EXE, *self.run_argv(*args, graph=graph)],
            env=self.subprocess_env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def shell_run(self, *args: str, timeout: float = 600, **kwargs: Any) -> Ran:
        """`eval-pipeline run ARGS` as a shell runs it (the console script, a new process)."""
        proc = self.spawn_run(*args, **kwargs)
        return finished(proc, timeout)

    def shell_cli(self, *argv: str, timeout: float = 120, env: Env | None = None) -> Ran:
        """Any `eval-pipeline` command as a shell runs it."""
        res = subprocess.run(
            [EXE, *argv],
            env=self.subprocess_env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Ran(res.returncode, res.stdout, res.stderr)

    # --- reading what the chain left ------------------------------------------------------

    def graph_options(self) -> list[str]:
        """The `eval-pipeline graph ...` options naming this chain's graph."""
        graph = self.graph
        return ["--graph-data-dir", graph["data_dir"], "--graph-database", graph["database"]]

    def graph_section(self) -> dict[str, Any]:
        """This chain's graph, as a Dagster run config's `resources` entry."""
        return {"graph": {"config": dict(self.graph)}}

    def written_files(self) -> list[Path]:
        """Every file this chain could have written: its state dir (Dagster's storage and
        compute logs, the LLM cache, the artifacts, the bundles), the graph server's own files
        (logs, WAL) and this chain's database on it; not the other tests' databases that
        share the session's server."""
        databases = self.graph_dir / "databases"
        mine = databases / self.graph["database"]
        files = [p for p in self.state.rglob("*") if p.is_file()]
        for p in self.graph_dir.rglob("*"):
            if p.is_file() and (not p.is_relative_to(databases) or p.is_relative_to(mine)):
                files.append(p)
        return files

    def bundles(self) -> set[Path]:
        """Run bundles in the default runs dir (not the comparisons and noise floors kept
        beside them)."""
        runs = self.state / "runs"
        if not runs.is_dir():
            return set()
        return {p for p in runs.iterdir() if (p / "manifest.json").is_file()}

    def instance(self):
        """This chain's Dagster instance: a persistent one opened afresh (dispose it), or the
        chain's one in-memory instance (never disposed: it holds every run the chain made)."""
        import dagster as dg

        if self.persistent:
            return dg.DagsterInstance.from_config(str(self.dagster_home))
        if self._memory is None:
            self._memory = dg.DagsterInstance.ephemeral()
        return self._memory


def finished(proc: subprocess.Popen[str], timeout: float = 600) -> Ran:
    """A process started by `spawn_run`, waited for."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(
            f"eval-pipeline run still running after {timeout} s: {err[-2000:]}"
        ) from None
    return Ran(proc.returncode, out, err)


def _set_env(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


def read_until(proc: subprocess.Popen[str], pattern: str, timeout: float) -> list[str]:
    """stderr lines of a process started by `spawn_run` up to the first matching `pattern`
    (a regex); AssertionError with what it printed if none does within `timeout` seconds
    (the process is then killed: a run that hangs fails the test, it does not hang it)."""
    import queue
    import re
    import threading

    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:  # a thread: a blocking readline cannot then outlast the deadline
        for line in iter(proc.stderr.readline, ""):
            lines.put(line.rstrip("\n"))
            if re.search(pattern, line):
                break
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if re.search(pattern, line):
            return seen
    proc.kill()
    raise AssertionError(f"no line matching {pattern!r} within {timeout} s: {seen[-15:]}")
