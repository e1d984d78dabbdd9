"""The graph instance's lease as the assets take it: one chain per instance at a time.

Every asset that touches the graph runs inside `graph_step`: it refuses a foreign instance
(claim first), then holds the lease (`eval_pipeline.graph.lease`) under the run's chain — the
CLI invocation when the run carries LEASE_HOLDER_TAG, else the run itself. A run's last graph
step releases the lease; a crashed run's lease goes stale on its own. Checks only read: they
refuse to run while another chain holds the instance (`graph_check`), and never take it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import dagster as dg

from eval_pipeline.graph.lease import Lease, LeaseHeld, RunFinished, hold, holder_of
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.ops.tags import LEASE_HOLDER_TAG

# The assets that read or write the graph, in chain order.
GRAPH_STEPS = ("injected_graph", "reconciled_graph", "retrieval_results")


def run_finished(instance: dg.DagsterInstance) -> RunFinished:
    def finished(run_id: str) -> bool | None:
        run = instance.get_run_by_id(run_id)
        return None if run is None else run.is_finished

    return finished


def later_graph_steps(run: Any, asset: str) -> list[str]:
    """Graph steps after `asset` that this run will still execute."""
    selected = (
        set(GRAPH_STEPS)
        if run.asset_selection is None
        else {k.to_user_string() for k in run.asset_selection}
    )
    after = GRAPH_STEPS[GRAPH_STEPS.index(asset) + 1 :] if asset in GRAPH_STEPS else ()
    return [a for a in after if a in selected]


def chain_lease(run: Any) -> Lease:
    holder = run.tags.get(LEASE_HOLDER_TAG)
    return Lease(holder=holder or run.run_id, run_id=run.run_id, what=f"{run.job_name} run")


@contextlib.contextmanager
def graph_step(context: Any, graph: GraphStore, asset: str) -> Iterator[None]:
    """Hold the instance for this asset's step (and release it after the run's last one)."""
    run = context.run
    graph.ensure_running()
    graph.claim()  # a foreign instance is refused before anything of ours is written to it
    own_chain = run.tags.get(LEASE_HOLDER_TAG) is None
    with hold(
        graph,
        chain_lease(run),
        wait_s=graph.lease_wait_s,
        run_finished=run_finished(context.instance),
        release_after=own_chain and not later_graph_steps(run, asset),
        where=graph.where,
    ):
        yield


def graph_check(context: Any, graph: GraphStore) -> None:
    """Before a check reads the graph: refuse when another chain holds the instance (what it
    reads would be that chain's graph). Checks only read, so they never take the lease."""
    graph.ensure_running()
    me = chain_lease(context.run)
    holder = holder_of(graph, run_finished(context.instance))
    if holder is not None and holder.holder != me.holder:
        raise LeaseHeld(
            f"{graph.where} is now in use by {holder.describe(time.time())}: this check "
            "would read another chain's graph"
        )
