"""The local Dagster instance made by two processes at once (issue 28, probe finding 2).

Two `eval-pipeline run`s started 0.2 s apart on a fresh state dir left two rows in the run
storage's `alembic_version` (one process stamped the head, the other the last revision
Dagster stamps for tables it finds already made), and every later run failed with a
55-line "more than one head" traceback. Here real processes race to make the instance
through `local_instance()`, as the CLI does; a table doubled by that race is repaired in
one line, and one doubled any other way is refused in one line.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline import dagster_home
from eval_pipeline.settings import REPO_DIR

pytestmark = pytest.mark.slow

# Each racer imports first, says so, then waits for the go file to make the instance.
RACER = """
import os, sys, time
from eval_pipeline.dagster_home import local_instance
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.001)
local_instance().get_runs(limit=1)
"""
PAIRS = 4  # state dirs raced at once; before the fix 1 pair in 2 doubled a table or crashed
# The last revision Dagster 1.13.27 stamps on SQLite tables it finds without a version
# (LAST_KNOWN_STAMPED_SQLITE_ALEMBIC_REVISION, dagster/_core/storage/sqlite.py): the row
# the losing racer wrote, an ancestor of the head.
ANCESTOR = "5771160a95ad"
# The SQLite files a first instance creates under DAGSTER_HOME (`storage: sqlite`).
SHARED_DBS = ("history/runs.db", "history/runs/index.db", "schedules/schedules.db")


def versions(home: Path) -> dict[str, list[str]]:
    out = {}
    for name in SHARED_DBS:
        with sqlite3.connect(home / name) as conn:
            out[name] = [r[0] for r in conn.execute("SELECT version_num FROM alembic_version")]
    return out


def test_two_first_instances_at_once_leave_one_schema_version(tmp_path: Path) -> None:
    go = tmp_path / "go"
    racers = []
    for pair in range(PAIRS):
        env = {
            **os.environ,
            "EVAL_PIPELINE_HOME": str(tmp_path / f"state{pair}"),
            "PYTHONPATH": str(REPO_DIR),
        }
        env.pop("DAGSTER_HOME", None)
        racers += [
            (
                pair,
                subprocess.Popen(
                    [sys.executable, "-c", RACER, str(go)],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
            for _ in range(2)
        ]
    for _, proc in racers:
        assert proc.stdout.readline().strip() == "ready", proc.communicate()[1][-800:]
    go.touch()  # every racer is imported and polling: they make their instances at once
    for pair, proc in racers:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"pair {pair}: {err[-800:]}"
    for pair in range(PAIRS):
        found = versions(tmp_path / f"state{pair}" / "dagster_home")
        assert all(len(v) == 1 for v in found.values()), (pair, found)


def make_instance(state: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(state))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    dagster_home.local_instance().dispose()
    return Path(os.environ["DAGSTER_HOME"])


def add_version(home: Path, revision: str) -> None:
    with sqlite3.connect(home / "history/runs.db") as conn:
        conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (revision,))


def test_a_table_doubled_by_the_race_is_repaired_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = make_instance(tmp_path / "state", monkeypatch)
    head = versions(home)["history/runs.db"]
    add_version(home, ANCESTOR)  # as the losing racer left it
    capsys.readouterr()

    instance = dagster_home.local_instance()  # before the fix: "more than one head"
    try:
        assert instance.get_runs(limit=1) == []
    finally:
        instance.dispose()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "repaired Dagster storage" in lines[0], lines
    assert "history/runs.db" in lines[0] and ANCESTOR in lines[0]
    assert versions(home)["history/runs.db"] == head


def test_a_table_doubled_otherwise_is_refused_in_one_line(persistent_chain) -> None:
    with persistent_chain.environment():
        home = Path(os.environ["DAGSTER_HOME"])
        dagster_home.local_instance().dispose()
    add_version(home, "0123456789ab")  # no revision of the installed Dagster's

    ran = persistent_chain.cli(*persistent_chain.run_argv("--label", "doubled"))
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr_lines == [ran.stderr_lines[0]], ran.stderr  # one line
    assert ran.stderr_lines[0].startswith("eval-pipeline: error: Dagster storage ")
    assert "0123456789ab" in ran.stderr and f"move {home} aside" in ran.stderr
    assert not persistent_chain.bundles()
