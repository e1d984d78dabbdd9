"""The graph instance's lease as the assets take it: one chain per instance at a time.

Every asset that touches the graph runs inside `graph_step`: it refuses a foreign instance
(claim first), then holds the lease (`eval_pipeline.graph.lease`) under the run's chain — the
chain run (CHAIN_TAG), which holds the lease across all its stages, else the run itself. A run
outside any chain releases the lease after its last graph step; a crashed run's lease goes
stale on its own. Checks only read: they refuse to run while another chain holds the instance
(`graph_check`), and never take it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import dagster as dg

from eval_pipeline.assets.tags import CHAIN_TAG
from eval_pipeline.failures import error_text, infrastructure_cause
from eval_pipeline.graph import server
from eval_pipeline.graph.lease import Lease, LeaseHeld, RunFinished, hold, holder_of
from eval_pipeline.graph.store import GraphStore

# The assets that read or write the graph, in chain order (partitioned by question batch).
GRAPH_STEPS = ("injected_graph", "reconciled_graph", "retrieval_results")
GRAPH_POOL = "graph_instance"  # Dagster pool of every step touching a graph instance


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
    return Lease(
        holder=run.tags.get(CHAIN_TAG) or run.run_id, run_id=run.run_id, what=f"{run.job_name} run"
    )


@contextlib.contextmanager
def graph_step(context: Any, graph: GraphStore, asset: str) -> Iterator[None]:
    """Hold the instance for this asset's step (and release it after the run's last one)."""
    run = context.run
    graph.ensure_running()
    graph.claim()  # a foreign instance is refused before anything of ours is written to it
    own_chain = run.tags.get(CHAIN_TAG) is None
    pid = _embedded_pid(graph)
    try:
        with hold(
            graph,
            chain_lease(run),
            wait_s=graph.lease_wait_s,
            run_finished=run_finished(context.instance),
            release_after=own_chain and not later_graph_steps(run, asset),
            where=graph.where,
        ):
            yield
    except Exception as exc:
        if infrastructure_cause(exc, graph_alive=lambda: graph_answers(graph)) != "graph_server":
            raise
        # Say what happened, not what the driver guessed: a server that went away, or an
        # embedded server another process restarted, reads as "refused the credentials".
        # When we know what happened to the embedded server, the driver's own guess (an auth
        # or protocol error from a half-closed connection) is left out: it names a wrong fix.
        now = _embedded_pid(graph)
        if graph.embedded and pid is not None and now not in (None, pid):
            what = f"was restarted by another process (pid {pid} → {now})"
        elif graph.embedded and pid is not None and now is None:
            what = "was stopped (`eval-pipeline graph status`; re-run to start it again)"
        else:
            what = f"stopped answering ({error_text(exc)})"
        raise dg.Failure(f"graph server at {graph.where} {what} during {asset}") from exc


def _embedded_pid(graph: GraphStore) -> int | None:
    if not graph.embedded:
        return None
    info = server.running_info(server.resolve_data_dir(graph.data_dir))
    return info.pid if info is not None else None


def graph_answers(graph: GraphStore) -> bool:
    """Does the graph server answer a trivial read now?"""
    try:
        graph.read("RETURN 1 AS ok", timeout_s=5)
    except Exception:  # noqa: BLE001 - any failure to answer means "not alive"
        return False
    return True


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
