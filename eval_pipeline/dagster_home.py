"""The local Dagster instance: DAGSTER_HOME under the state dir, configured by ./dagster.yaml.

The repository's dagster.yaml is the single source of the local instance settings; the
state dir holds a link to it so storage, logs and run history stay out of the source tree.

The first instance on a fresh state dir creates its SQLite storage and stamps its schema
version in `alembic_version`. Two processes doing that at once (two first runs 0.2 s apart)
both stamp it: one the head, the other the last revision Dagster stamps for a table it finds
already there. Every later open then failed with alembic's "more than one head". So the
instance is made under a file lock, one process at a time, and a table left doubled by that
race (its rows the head and ancestors of it: the schema is the head's) is repaired.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

from eval_pipeline import processes
from eval_pipeline.settings import REPO_DIR, state_dir

GRAPH_POOL = "graph_instance"
INSTANCE_LOCK = ".instance.lock"  # in DAGSTER_HOME: who makes or opens the instance now
# The SQLite files the first instance creates (dagster.yaml's `storage: sqlite`); the event
# log's per-run files are each made by the one run they belong to, so never raced.
SHARED_DBS = ("history/runs.db", "history/runs/index.db", "schedules/schedules.db")


class StorageError(RuntimeError):
    """The local Dagster storage is in a state this project cannot safely repair."""


def ensure_dagster_home() -> Path:
    """Point DAGSTER_HOME at a prepared directory (unless the caller set it) and return it."""
    if os.environ.get("DAGSTER_HOME"):
        home = Path(os.environ["DAGSTER_HOME"])
    else:
        home = state_dir() / "dagster_home"
        os.environ["DAGSTER_HOME"] = str(home)
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    source = REPO_DIR / "dagster.yaml"
    if not target.exists() and source.is_file():
        try:
            target.symlink_to(source)
        except FileExistsError:  # another process linked it first
            pass
        except OSError:  # file systems without links: a copy will do
            shutil.copyfile(source, target)
    return home


def local_instance():
    """The persistent local instance, with the graph pool limited to one step at a time per
    graph instance (a run over K batches raises it to K: ops/batch_runs.py)."""
    import dagster as dg

    home = ensure_dagster_home()
    with processes.locked(home / INSTANCE_LOCK):
        repair_doubled_versions(home, _say)
        instance = dg.DagsterInstance.get()
        # Every shared storage created now, under the lock (not at first use, outside it).
        instance.get_runs(limit=1)
        instance.all_instigator_state()
        # An explicit limit: in a probe, the default_limit alone did not serialise runs.
        ensure_graph_slots(instance, 1)
    return instance


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def repair_doubled_versions(home: Path, say: Callable[[str], None]) -> list[Path]:
    """Leave one row, the head, in each shared SQLite file's `alembic_version` that two first
    instances at once left with more (one line each); refuse one holding anything else. The
    files repaired."""
    repaired = []
    for name in SHARED_DBS:
        db = home / name
        if not db.is_file():
            continue
        with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
            try:
                rows = [r[0] for r in conn.execute("SELECT version_num FROM alembic_version")]
            except sqlite3.OperationalError:  # no version table (yet): Dagster's to handle
                continue
            if len(rows) <= 1:
                continue
            head, known = _alembic_lineage()
            if head not in rows or not set(rows) <= known:
                raise StorageError(
                    f"Dagster storage {db} records {len(rows)} schema versions "
                    f"({', '.join(rows)}), not the doubled head two first runs leave (head "
                    f"{head}): move {home} aside to start a fresh run history"
                )
            with conn:
                conn.execute("DELETE FROM alembic_version")
                conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (head,))
        say(
            f"eval-pipeline: repaired Dagster storage {db}: {len(rows)} rows in alembic_version "
            f"({', '.join(rows)}), left by two first runs at once; kept the head {head}"
        )
        repaired.append(db)
    return repaired


def _alembic_lineage() -> tuple[str, set[str]]:
    """The installed Dagster's storage schema head and every revision up to it."""
    from alembic.script import ScriptDirectory
    from dagster._core.storage.runs.sqlite import sqlite_run_storage
    from dagster._core.storage.sql import get_alembic_config

    # The same scripts Dagster's SQLite storages check their stamp against.
    script = ScriptDirectory.from_config(get_alembic_config(sqlite_run_storage.__file__))
    head = script.get_current_head()
    return head, {rev.revision for rev in script.iterate_revisions(head, "base")}


def ensure_graph_slots(instance, slots: int) -> None:
    """At least `slots` steps of the graph pool at once: one per graph instance in use.
    Which instance a step may touch is the lease's business (graph/lease.py)."""
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        if storage.get_concurrency_info(GRAPH_POOL).slot_count < slots:
            storage.set_concurrency_slots(GRAPH_POOL, slots)
