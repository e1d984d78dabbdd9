"""`eval-pipeline run` in this process, as a user runs it but without a new interpreter and a
new JVM per chain: the real CLI entry point (`eval_pipeline.cli.main`) with stdout and stderr
captured, its state dir and DAGSTER_HOME the test's own, and the graph a fresh database on the
session's one embedded ArcadeDB (`graph_dir` in conftest.py), given as a `--config` section.

A few tests still run the console script as a subprocess (exit codes and one-line errors as a
shell sees them); everything else goes through here.
"""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from eval_pipeline.cli import main


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
    def stage_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("[")]


class Chain:
    """Chains of one test (or one module): one state dir, one Dagster instance, one graph."""

    def __init__(self, root: Path, graph_dir: Path, database: str, env: dict[str, str]) -> None:
        self.root = root
        self.state = root / "state"
        self.dagster_home = self.state / "dagster_home"
        self.graph = {"data_dir": str(graph_dir), "database": database, "heap": "512m"}
        self.env = {
            "EVAL_PIPELINE_HOME": str(self.state),
            "DAGSTER_HOME": str(self.dagster_home),
            **env,
        }
        self._configs = 0

    @contextlib.contextmanager
    def environment(self):
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def config_file(self, given: Path | None, graph: dict[str, Any] | None = None) -> Path:
        """A --config file: the test's own (if any) with this chain's graph section."""
        data = yaml.safe_load(given.read_text()) if given is not None else {}
        data = dict(data or {})
        data["graph"] = {**self.graph, **(data.get("graph") or {}), **(graph or {})}
        self._configs += 1
        path = self.root / f"chain-config-{self._configs}.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    def run(self, *args: str, graph: dict[str, Any] | None = None) -> Ran:
        """`eval-pipeline run ARGS` (a `--config` among ARGS is merged with the graph's)."""
        argv = list(args)
        given = None
        if "--config" in argv:
            i = argv.index("--config")
            given = Path(argv[i + 1])
            del argv[i : i + 2]
        argv = ["run", *argv, "--config", str(self.config_file(given, graph))]
        return self.cli(*argv)

    def cli(self, *argv: str) -> Ran:
        """Any `eval-pipeline` command, in this process."""
        out, err = io.StringIO(), io.StringIO()
        with self.environment(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:  # argparse
                code = int(exc.code or 0)
        return Ran(code, out.getvalue(), err.getvalue())

    def instance(self):
        import dagster as dg

        return dg.DagsterInstance.from_config(str(self.dagster_home))
