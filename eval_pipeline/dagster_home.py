"""The local Dagster instance: DAGSTER_HOME under the state dir, configured by ./dagster.yaml.

The repository's dagster.yaml is the single source of the local instance settings; the
state dir holds a link to it so storage, logs and run history stay out of the source tree.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from eval_pipeline.settings import REPO_DIR, state_dir

GRAPH_POOL = "graph_instance"


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
        except OSError:  # file systems without links: a copy will do
            shutil.copyfile(source, target)
    return home


def local_instance():
    """The persistent local instance, with the graph pool limited to one step at a time per
    graph instance (a run over K batches raises it to K: ops/batch_runs.py)."""
    import dagster as dg

    ensure_dagster_home()
    instance = dg.DagsterInstance.get()
    # An explicit limit: in a probe, the default_limit alone did not serialise runs.
    ensure_graph_slots(instance, 1)
    return instance


def ensure_graph_slots(instance, slots: int) -> None:
    """At least `slots` steps of the graph pool at once: one per graph instance in use.
    Which instance a step may touch is the lease's business (graph/lease.py)."""
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        if storage.get_concurrency_info(GRAPH_POOL).slot_count < slots:
            storage.set_concurrency_slots(GRAPH_POOL, slots)
