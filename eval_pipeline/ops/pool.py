"""The graph pool's slots: freed when the run holding one died, waited for out loud.

A step of pool `graph_instance` holds one of its slots until Dagster frees it at the step's
end. A process killed mid-step (kill -9, the OOM killer, a reboot, a closed terminal) never
frees it, and nothing local does it later: Dagster reclaims a dead run's slots through the
daemon's run monitoring, which runs launched in process (the CLI) never get. The next run then
waited for the slot for ever, and did so deaf and at full speed: the in-process executor of
Dagster 1.13.27 polls a pending claim without sleeping
(`InstanceConcurrencyContext.interval_to_next_pending_claim_check` returns `min([0, ...])`)
and looks at no interrupt while it waits (Dagster's SIGINT handler only records one, and the
chain defers SIGTERM). So:

- every run this project launches carries the process that executes it (`PROCESS_TAG`,
  `host:pid`); runs made before that tag existed are found by the pid in their
  "Executing steps in process" engine event;
- `release_dead` frees the slots and pending claims of runs whose process is gone and marks
  such runs failed, one line each: at the start of every chain, and while a stage waits;
  a run on another host, or one whose process cannot be told dead, is left alone;
- `announced_wait` watches each stage run: while it waits for a slot it says which run holds
  the slot (every WAIT_SAY_S), frees the slot if that run died meanwhile, and on Ctrl-C or
  SIGTERM stops the run (an interrupt raised in the main thread, where the executor polls),
  so the stage reads `interrupted` and the CLI exits 130.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import dagster as dg

from eval_pipeline import interrupts, processes
from eval_pipeline.assets.graph_lease import GRAPH_POOL

PROCESS_TAG = "eval_pipeline/process"  # host:pid of the process executing the run
POLL_S = 0.5
WAIT_SAY_S = 30.0  # how often a wait for a slot is said again (the first time: at once)
REUSE_SLACK_S = 2.0  # /proc start times are exact to the second: a pid started later is reused

Say = Callable[[str], None]


def process_tags() -> dict[str, str]:
    """The tag naming this process, for a run it is about to execute."""
    return {PROCESS_TAG: f"{socket.gethostname()}:{os.getpid()}"}


@dataclass(frozen=True)
class Holder:
    """A run that holds (or waits for) a slot, and whether its process still runs."""

    run_id: str
    what: str  # "eval_stage injected_graph"
    host: str | None
    pid: int | None
    alive: bool | None  # None: cannot tell (another host, no pid)
    why: str = ""  # why it reads dead

    def describe(self) -> str:
        where = f"pid {self.pid}" if self.pid else "pid unknown"
        where += f" on {self.host}" if self.host else ""
        state = {True: "running", False: "gone", None: "not known here"}[self.alive]
        return f"run {self.run_id[:8]} ({self.what}, {where}, {state})"


def _process_of(instance: dg.DagsterInstance, run: dg.DagsterRun) -> tuple[str | None, int | None]:
    tag = run.tags.get(PROCESS_TAG)
    if tag and ":" in tag:
        host, _, pid = tag.rpartition(":")
        return host, int(pid) if pid.isdigit() else None
    if not _local_storage(instance):  # an engine event's pid names no host
        return None, None
    records = instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT, limit=20
    ).records
    for record in records:
        data = record.event_log_entry.dagster_event.event_specific_data
        pid = getattr(data, "metadata", {}).get("pid") if data is not None else None
        if pid is not None and str(pid.value).isdigit():
            return socket.gethostname(), int(pid.value)
    return None, None


def _local_storage(instance: dg.DagsterInstance) -> bool:
    """Run records kept on this machine (SQLite or in memory): an in-process run recorded
    there ran here."""
    return instance.is_ephemeral or "Sqlite" in type(instance.event_log_storage).__name__


def holder(instance: dg.DagsterInstance, run_id: str) -> Holder:
    run = instance.get_run_by_id(run_id)
    if run is None:
        return Holder(run_id, "a run no longer recorded", None, None, False, "no run record")
    what = " ".join(filter(None, [run.job_name, run.tags.get("eval_pipeline/stage")]))
    host, pid = _process_of(instance, run)
    if run.is_finished:
        return Holder(run_id, what, host, pid, False, f"the run {run.status.value.lower()}")
    if host != socket.gethostname() or pid is None:
        return Holder(run_id, what, host, pid, None)
    if not processes.running(pid):
        return Holder(run_id, what, host, pid, False, f"its process {pid} is gone")
    record = instance.get_run_record_by_id(run_id)
    started = processes.started_at(pid)
    if record is not None and started is not None:
        # Against when the run started, not when it was made: a queued run's process (the
        # daemon's launcher) starts after the run was created, and is still its own.
        began = record.start_time or record.create_timestamp.timestamp()
        if started > began + REUSE_SLACK_S:
            why = f"its process {pid} is gone (the pid now belongs to a newer process)"
            return Holder(run_id, what, host, pid, False, why)
    return Holder(run_id, what, host, pid, True)


def release_dead(instance: dg.DagsterInstance, say: Say, pool: str = GRAPH_POOL) -> list[str]:
    """Free the slots and claims in `pool` of runs whose process is gone, and mark started
    runs whose process is gone failed; one line each. The run ids released."""
    storage = instance.event_log_storage
    in_pool: set[str] = set()
    if storage.supports_global_concurrency_limits:
        info = storage.get_concurrency_info(pool)
        in_pool = info.active_run_ids | info.pending_run_ids
    started = {
        r.run_id
        for r in instance.get_runs(
            filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]), limit=100
        )
    }
    released = []
    for run_id in sorted(in_pool | started):
        h = holder(instance, run_id)
        if h.alive is not False:
            continue
        done = []
        if run_id in in_pool:
            storage.free_concurrency_slots_for_run(run_id)
            done.append(f"its slot in Dagster pool {pool} freed")
        run = instance.get_run_by_id(run_id)
        if run is not None and not run.is_finished:
            instance.report_run_failed(run, f"eval-pipeline: {h.why}; marked failed")
            done.append("marked failed")
        say(f"eval-pipeline: run {run_id[:8]} ({h.what}) died ({h.why}): {', '.join(done)}")
        released.append(run_id)
    return released


class _Stopped(Exception):
    """The watcher's own: it has stopped the run."""


class _Stop(dg.DagsterExecutionInterruptedError):
    """Raised in the main thread to end a run that waits for a slot (an interrupt came)."""


@contextlib.contextmanager
def announced_wait(
    instance: dg.DagsterInstance, run_id: str, say: Say, pool: str = GRAPH_POOL
) -> Iterator[None]:
    """While run `run_id` executes in this (main) thread: say when it waits for a slot of
    `pool` and who holds it, free the slot of a holder that died, and stop the run on an
    interrupt that comes while it waits."""
    storage = instance.event_log_storage
    main = threading.main_thread()
    if not storage.supports_global_concurrency_limits or threading.current_thread() is not main:
        yield
        return
    armed = threading.Event()

    def raise_stop(signum, frame) -> None:
        if armed.is_set():
            armed.clear()
            raise _Stop(f"interrupted while waiting for a slot of Dagster pool {pool}")

    previous = signal.signal(signal.SIGUSR1, raise_stop)
    done = threading.Event()

    def watch() -> None:
        said_at = None
        while not done.wait(POLL_S):
            try:
                said_at = step(said_at)
            except _Stopped:
                return
            except Exception:  # noqa: BLE001 - a storage hiccup: look again at the next poll
                continue

    def step(said_at: float | None) -> float | None:
        info = storage.get_concurrency_info(pool)
        if run_id not in info.pending_run_ids or run_id in info.active_run_ids:
            return None  # not waiting (yet, or any more)
        if _interrupted():
            armed.set()
            signal.pthread_kill(main.ident, signal.SIGUSR1)
            raise _Stopped
        if release_dead(instance, say, pool):
            return said_at  # the slot may be ours at the next poll
        now = time.monotonic()
        if said_at is not None and now - said_at < WAIT_SAY_S:
            return said_at
        holders = sorted(info.active_run_ids - {run_id})
        held = "; ".join(holder(instance, r).describe() for r in holders) or "nobody"
        say(
            f"eval-pipeline: waiting for a slot of Dagster pool {pool} "
            f"({info.slot_count} slot(s)), held by {held}; Ctrl-C stops this run"
        )
        return now

    thread = threading.Thread(target=watch, name="pool-wait", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        armed.clear()
        signal.signal(signal.SIGUSR1, previous)


def _interrupted() -> bool:
    """An interrupt this process received: the chain's watch (SIGINT, SIGTERM) or, outside a
    chain (a batch worker), the SIGINT Dagster's own handler recorded."""
    from dagster._utils.interrupts import check_captured_interrupt

    return interrupts.received() or check_captured_interrupt()
