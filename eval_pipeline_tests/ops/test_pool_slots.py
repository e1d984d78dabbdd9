"""The graph pool's one slot, as a killed run leaves it (issue 28, probe finding 1).

A run killed mid-step (kill -9 of `eval-pipeline run` during reconciliation) keeps its slot
of Dagster pool `graph_instance`; the next run used to wait for it for ever at full CPU,
deaf to SIGINT and SIGTERM. Here the slot is held, through Dagster's own storage API, by a
run recorded as executing in a process of this host: a dead one (the next run frees the
slot, says so in one line, and goes on) or a live one (the next run must not free it: it
says what it waits for, and stops on SIGINT/SIGTERM with exit 130). The runs are the real
console script on a persistent instance and the session's graph server.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import uuid

import dagster as dg
import pytest

from eval_pipeline.assets.graph_lease import GRAPH_POOL
from eval_pipeline.assets.tags import STAGE_TAG
from eval_pipeline.dagster_home import ensure_dagster_home, ensure_graph_slots
from eval_pipeline.ops.pool import PROCESS_TAG
from eval_pipeline_tests.chain_runner import finished, read_until

pytestmark = pytest.mark.slow


def hold_slot(chain, pid: int) -> str:
    """A stage run recorded as started in process `pid` on this host and holding the pool's
    one slot for its step, as a kill -9 during reconciliation leaves it; its run id."""
    run_id = str(uuid.uuid4())
    with chain.environment():
        ensure_dagster_home()
        instance = chain.instance()
        try:
            ensure_graph_slots(instance, 1)
            instance.add_run(
                dg.DagsterRun(
                    job_name="eval_stage",
                    run_id=run_id,
                    status=dg.DagsterRunStatus.STARTED,
                    tags={PROCESS_TAG: f"{socket.gethostname()}:{pid}", STAGE_TAG: "reconciled"},
                )
            )
            claim = instance.event_log_storage.claim_concurrency_slot(
                GRAPH_POOL, run_id, "reconciled_graph"
            )
            assert claim.is_claimed
        finally:
            instance.dispose()
    return run_id


def pool_state(chain, run_id: str) -> tuple[set[str], dg.DagsterRunStatus]:
    """(the runs holding the pool's slots, the status of run `run_id`)."""
    with chain.environment():
        instance = chain.instance()
        try:
            info = instance.event_log_storage.get_concurrency_info(GRAPH_POOL)
            return info.active_run_ids, instance.get_run_by_id(run_id).status
        finally:
            instance.dispose()


def test_a_dead_runs_slot_is_freed_with_one_line(persistent_chain) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = hold_slot(persistent_chain, gone.pid)

    proc = persistent_chain.spawn_run("--label", "after-a-kill")
    lines = read_until(proc, r"^\[4/9\] injected_graph: ok", timeout=90)
    proc.send_signal(signal.SIGINT)  # the point is made: the graph stages run again
    finished(proc, timeout=60)

    said = [line for line in lines if dead[:8] in line]
    assert len(said) == 1, lines
    assert "died" in said[0] and f"process {gone.pid} is gone" in said[0]
    assert f"slot in Dagster pool {GRAPH_POOL} freed" in said[0]
    holders, status = pool_state(persistent_chain, dead)
    assert dead not in holders
    assert status == dg.DagsterRunStatus.FAILURE


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_live_runs_slot_is_waited_for_out_loud_and_the_wait_stops(
    persistent_chain, sig: signal.Signals
) -> None:
    alive = subprocess.Popen(["sleep", "300"])
    try:
        live = hold_slot(persistent_chain, alive.pid)
        proc = persistent_chain.spawn_run("--label", "behind-a-live-run")
        lines = read_until(proc, r"waiting for a slot of Dagster pool", timeout=90)
        wait = lines[-1]
        assert f"run {live[:8]} (eval_stage reconciled, pid {alive.pid}" in wait, wait
        assert "running" in wait
        proc.send_signal(sig)
        ran = finished(proc, timeout=30)  # before the fix: still spinning, deaf to it
        assert ran.returncode == 130, ran.stderr
        assert "interrupted at injected_graph" in ran.stderr_lines[-1], ran.stderr
        assert "Traceback" not in ran.stderr
        assert not persistent_chain.bundles()
        # The live run's slot was never taken from it.
        holders, status = pool_state(persistent_chain, live)
        assert holders == {live}
        assert status == dg.DagsterRunStatus.STARTED
    finally:
        alive.kill()
        alive.wait()
