"""Run a reconciler over the graph's sessions: pending (and failed) ones, those reconciled
under other pins, or all with `redo`.

Three kinds of task share one event loop:
- a loader reads sessions with their turns in batches and queues them;
- `concurrency` workers each take a session, run the reconciler, check its output;
- one writer writes each result (or the failure) to the graph, in session order of arrival;
  the results already waiting when it is free (at most `write_batch`) of untouched (pending)
  sessions go in one transaction (`writer.write_sessions_memory`: measured on ArcadeDB,
  38 → 18 ms a session in batches of 100), and should that transaction fail, each is
  written alone, so a bad session still fails by itself.
Writes are serialised anyway (see `writer`), so a single writer costs nothing and lets the
workers keep the model busy while the graph is being written. Queues are bounded, so memory
stays flat on a 20k-session graph.

A CPU-bound sync reconciler (`cpu_bound = True`, e.g. `extractive`) runs in `processes` worker
processes instead (`processes`: unset, one per core; 1, threads in this process as any
other): one dispatcher hands the pool batches of sessions (`processes.SessionPool`, at most
two batches per worker in flight) and passes the results on to the writer in the order the
sessions were loaded, so the graph written does not depend on the number of processes. A
worker dying stops the run (`processes.ReconcileWorkerDied`).

One session failing — the reconciler raising, invalid output, a write the server refuses —
marks that session `failed` with the reason and the batch goes on. The graph itself failing
(unreachable, or refusing even the failure mark) stops the run: a re-run resumes where it
stopped, because finished sessions are `done` in the graph.

A namespaced reconciler (`memory_system.MemorySystem`, e.g. `consolidating`) gets a second
pass over a graph store once the sessions are written: `namespace_graph.consolidate_namespaces`
(per namespace, sessions in time order). An `InMemorySessionGraph` has no haystacks, so there
only the per-session pass runs.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import statistics
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel, ConfigDict

from eval_pipeline.graph.errors import GraphUnavailableError
from eval_pipeline.llm import redact
from eval_pipeline.reconcile import schema
from eval_pipeline.reconcile.marker_audit import SessionAudit
from eval_pipeline.reconcile.models import SessionInput, SessionMemory
from eval_pipeline.reconcile.namespace_graph import clear_all_namespaces, consolidate_namespaces
from eval_pipeline.reconcile.processes import (
    PROCESS_BATCH,
    RemoteSessionError,
    SessionPool,
    checked_memory,
    resolve_processes,
)
from eval_pipeline.reconcile.protocol import ReconcilerUnavailable, pins_of
from eval_pipeline.reconcile.reader import status_counts
from eval_pipeline.reconcile.session_graph import StoreSessionGraph, as_session_graph
from eval_pipeline.reconcile.writer import SessionNotFound

LOAD_BATCH = 200  # sessions per read: ~2k turns, ~2.5 MB on LongMemEval_S
# A run over at least this many sessions (and a tenth of the graph) is a bulk run: full-text
# indexes are dropped first and built once at the end, instead of updated on every write.
BULK_MIN_SESSIONS = 50
# Batches per worker process a run is cut into at least (more, smaller ones up to
# PROCESS_BATCH sessions): a short run still feeds every worker.
BATCHES_PER_WORKER = 4
MAX_REASON_CHARS = 500
WRITE_BATCH = 100  # sessions per write transaction at most (1: one transaction each)


class SessionFailure(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_id: str
    reason: str


class ReconcileProgress(BaseModel):
    model_config = ConfigDict(frozen=True)

    finished: int
    to_do: int
    done: int
    failed: int
    elapsed_s: float


class ReconcileReport(BaseModel):
    """What a run did, for Dagster metadata and the run manifest."""

    reconciler: dict[str, Any]
    pins_key: str  # schema.pins_key of `reconciler`: what every session it did records
    total_sessions: int
    to_do: int  # sessions this run set out to reconcile
    redone_foreign: int = 0  # ... of which had memory from another configuration
    done: int  # ... of which ended done
    failures: list[SessionFailure]
    skipped_done: int  # already done before the run (not redone)
    redo: bool
    concurrency: int
    processes: int = 1  # worker processes that reconciled (1: in the driver)
    status_after: dict[str, int]  # pending / done / failed over the whole graph
    completeness: float  # sessions done / all sessions (1.0 for an empty graph)
    nodes_written: dict[str, int]  # by label, this run (entities: per-session, before MERGE)
    graph_nodes: dict[str, int]  # by label, in the graph after the run
    timings: dict[str, float]
    llm_usage: dict[str, Any] | None = None
    index_problems: list[str] = []
    namespaces: dict[str, Any] | None = None  # a namespaced reconciler's consolidation

    @property
    def failed(self) -> int:
        return len(self.failures)


ProgressCallback = Callable[[ReconcileProgress], None]


def failure_reason(exc: BaseException) -> str:
    """One line, no secrets, bounded length."""
    kind = exc.type_name if isinstance(exc, RemoteSessionError) else type(exc).__name__
    text = " ".join(f"{kind}: {exc}".split())
    return redact(text)[:MAX_REASON_CHARS]


async def call_reconciler(reconciler: Any, session: SessionInput) -> SessionMemory:
    """Await an async `reconcile`; run a sync one in a worker thread."""
    if inspect.iscoroutinefunction(reconciler.reconcile):
        result = await reconciler.reconcile(session)
    else:
        result = await asyncio.to_thread(reconciler.reconcile, session)
        if inspect.isawaitable(result):
            result = await result
    return checked_memory(result, session)


def _run_sync(coro: Coroutine[Any, Any, ReconcileReport]) -> ReconcileReport:
    """asyncio.run, or — when called from inside a running loop — asyncio.run on a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def reconcile_pending(
    store: Any,
    reconciler: Any,
    *,
    concurrency: int,
    redo: bool = False,
    progress: ProgressCallback | None = None,
    extra_pins: dict[str, Any] | None = None,
    audit: SessionAudit | None = None,
    namespace_progress: Callable[[int, int], None] | None = None,
    write_batch: int = WRITE_BATCH,
    processes: int | None = None,
) -> ReconcileReport:
    """Blocking form of `reconcile_pending_async` (runs its own event loop)."""
    return _run_sync(
        reconcile_pending_async(
            store,
            reconciler,
            concurrency=concurrency,
            redo=redo,
            progress=progress,
            extra_pins=extra_pins,
            audit=audit,
            namespace_progress=namespace_progress,
            write_batch=write_batch,
            processes=processes,
        )
    )


async def reconcile_pending_async(
    store: Any,
    reconciler: Any,
    *,
    concurrency: int,
    redo: bool = False,
    progress: ProgressCallback | None = None,
    extra_pins: dict[str, Any] | None = None,
    audit: SessionAudit | None = None,
    namespace_progress: Callable[[int, int], None] | None = None,
    write_batch: int = WRITE_BATCH,
    processes: int | None = None,
) -> ReconcileReport:
    """`store` is a GraphStore, or any SessionGraph (e.g. InMemorySessionGraph).

    `audit` sees every session as it is handed to the reconciler (and, for a namespaced
    one, to its extraction): the evidence-marker audit (`reconcile.marker_audit`).

    Sessions done under the same pins are skipped (resume); sessions done or failed under
    other pins (another reconciler, version, config, or `extra_pins` such as a repeat's sample
    identity) are redone, their old memory removed first. `extra_pins` join the pins.

    `processes` (see the module doc) only concerns a CPU-bound reconciler; it is not a pin:
    the memory is the same with any number.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if write_batch < 1:
        raise ValueError("write_batch must be at least 1")
    processes = resolve_processes(reconciler, processes)
    started = time.perf_counter()
    pins = pins_of(reconciler)
    if extra_pins:
        pins = {**pins, **extra_pins}
    name, version = str(pins["name"]), str(pins["version"])
    key = schema.pins_key(pins)
    graph = as_session_graph(store)

    states = await asyncio.to_thread(graph.states)
    statuses = {sid: state.status for sid, state in states.items()}
    # Memory another configuration made is redone, never kept under this one's name.
    foreign = {
        sid
        for sid, state in states.items()
        if state.status != schema.PENDING and state.pins_key != key
    }
    # Sorted: the order of work (and of failures in the report) does not depend on the server.
    to_do = sorted(
        sid
        for sid, state in states.items()
        if redo or state.status != schema.DONE or sid in foreign
    )
    skipped = len(statuses) - len(to_do)
    # Worker processes (none start before the first batch). Made before the graph is
    # touched: a reconciler that does not pickle is refused here.
    batch_size = max(1, min(PROCESS_BATCH, -(-len(to_do) // (processes * BATCHES_PER_WORKER))))
    pool = SessionPool(reconciler, processes) if processes > 1 and to_do else None
    bulk = len(to_do) >= max(BULK_MIN_SESSIONS, len(statuses) // 10)
    index_problems = await asyncio.to_thread(graph.prepare, bulk=bulk)
    declared = getattr(reconciler, "schema", None)  # memory_system.IngestSchema, if any
    namespaced = bool(getattr(reconciler, "namespaced", getattr(declared, "namespaced", False)))
    store = graph.store if isinstance(graph, StoreSessionGraph) else None
    if not namespaced and store is not None and foreign:
        # A session-level reconciler takes over: no namespace memory may outlive it.
        await asyncio.to_thread(clear_all_namespaces, store)
    touched: set[str] = set()

    consumers = 1 if pool is not None else concurrency  # each takes one end-of-work mark
    sessions_q: asyncio.Queue[SessionInput | None] = asyncio.Queue(
        maxsize=batch_size * 2 if pool is not None else concurrency * 2
    )
    # Room for a whole write batch: results pile up while the writer is busy, and the
    # next transaction takes what is there.
    results_q: asyncio.Queue[tuple[SessionInput, SessionMemory | BaseException] | None] = (
        asyncio.Queue(maxsize=max(concurrency * 2, write_batch))
    )
    write_many = getattr(graph, "write_many", None) if write_batch > 1 else None
    failures: list[SessionFailure] = []
    written: dict[str, int] = {label: 0 for label in schema.NODE_LABELS}
    reconcile_times: list[float] = []
    write_times: list[float] = []
    load_times: list[float] = []
    pool_timings: dict[str, float] = {}
    done = 0

    async def load(batch: list[str]) -> list[SessionInput]:
        t = time.perf_counter()
        sessions = await asyncio.to_thread(graph.load, batch)
        load_times.append(time.perf_counter() - t)
        return sessions

    async def loader() -> None:
        """Reads the next batch while this one is handed out: no gap between them."""
        starts = range(0, len(to_do), LOAD_BATCH)
        ahead: asyncio.Task[list[SessionInput]] | None = None
        try:
            for start in starts:
                if ahead is None:
                    ahead = asyncio.create_task(load(to_do[start : start + LOAD_BATCH]))
                sessions = await ahead
                following = start + LOAD_BATCH
                ahead = (
                    asyncio.create_task(load(to_do[following : following + LOAD_BATCH]))
                    if following < len(to_do)
                    else None
                )
                for session in sessions:
                    await sessions_q.put(session)
        finally:
            if ahead is not None:
                ahead.cancel()
        for _ in range(consumers):
            await sessions_q.put(None)

    async def worker() -> None:
        while (session := await sessions_q.get()) is not None:
            t = time.perf_counter()
            outcome: SessionMemory | BaseException
            if audit is not None:
                audit.see(session)
            try:
                outcome = await call_reconciler(reconciler, session)
            except ReconcilerUnavailable:
                raise  # a configuration problem, not this session's: stop the run
            except Exception as exc:
                outcome = exc
            reconcile_times.append(time.perf_counter() - t)
            await results_q.put((session, outcome))

    async def dispatcher(pool: SessionPool) -> None:
        """Batches to the worker processes, results to the writer in the order loaded."""
        in_flight: collections.deque[tuple[list[SessionInput], asyncio.Task[Any]]] = (
            collections.deque()
        )

        waited = {"pool_wait_sessions_s": 0.0, "pool_wait_results_s": 0.0}

        async def deliver_oldest() -> None:
            batch, task = in_flight.popleft()
            t = time.perf_counter()
            outcomes = await task
            waited["pool_wait_results_s"] += time.perf_counter() - t
            for session, (outcome, seconds) in zip(batch, outcomes, strict=True):
                if isinstance(outcome, ReconcilerUnavailable):
                    raise outcome  # a configuration problem, not this session's
                reconcile_times.append(seconds)
                await results_q.put((session, outcome))

        try:
            pool_timings.update(await pool.start())
            ended = False
            while not ended:
                batch: list[SessionInput] = []
                while len(batch) < batch_size:
                    t = time.perf_counter()
                    session = await sessions_q.get()
                    waited["pool_wait_sessions_s"] += time.perf_counter() - t
                    if session is None:
                        ended = True
                        break
                    if audit is not None:
                        audit.see(session)
                    batch.append(session)
                if batch:
                    in_flight.append((batch, asyncio.create_task(pool.run(batch))))
                while in_flight and (len(in_flight) >= processes * 2 or ended):
                    await deliver_oldest()
            pool_timings.update({k: round(v, 3) for k, v in waited.items()})
        finally:
            for _, task in in_flight:
                if not task.cancel() and not task.cancelled():
                    task.exception()  # retrieved: the first failure is what surfaces

    finished = 0

    def wrote(session: SessionInput, memory: SessionMemory, seconds: float) -> None:
        nonlocal done
        done += 1
        touched.add(session.session_id)
        for label, n in memory.node_counts().items():
            written[label] += n
        write_times.append(seconds)
        report_progress()

    def report_progress() -> None:
        nonlocal finished
        finished += 1
        if progress is not None:
            progress(
                ReconcileProgress(
                    finished=finished,
                    to_do=len(to_do),
                    done=done,
                    failed=len(failures),
                    elapsed_s=round(time.perf_counter() - started, 3),
                )
            )

    async def write_group(items: list[tuple[SessionInput, SessionMemory | BaseException]]) -> None:
        """Untouched sessions' memories in one transaction, the rest (and all of them if
        that transaction fails) one by one."""
        batchable = [  # the items themselves: `alone` tells them apart by identity
            item
            for item in items
            if isinstance(item[1], SessionMemory)
            and statuses.get(item[0].session_id) == schema.PENDING
        ]
        if write_many is None or len(batchable) < 2:
            batchable = []
        picked = {id(item) for item in batchable}
        alone = [item for item in items if id(item) not in picked]
        if batchable:
            t = time.perf_counter()
            try:
                memories = [o for _, o in batchable]
                missing = await asyncio.to_thread(
                    write_many, memories, version=version, pins_key=key
                )
            except GraphUnavailableError:
                raise  # the graph itself, not a session: each alone would only wait again
            except Exception:  # nothing was written: each alone, a bad one fails by itself
                alone = items
            else:
                share = (time.perf_counter() - t) / len(batchable)
                for session, memory in batchable:
                    if session.session_id in missing:
                        gone = SessionNotFound(
                            f"session {session.session_id!r} is not in the graph"
                        )
                        await write_one(
                            session, RuntimeError(f"graph write failed: {failure_reason(gone)}")
                        )
                    else:
                        wrote(session, memory, share)  # type: ignore[arg-type]
        for session, outcome in alone:
            await write_one(session, outcome)

    async def write_one(session: SessionInput, outcome: SessionMemory | BaseException) -> None:
        replace = statuses.get(session.session_id) != schema.PENDING
        t = time.perf_counter()
        if isinstance(outcome, SessionMemory):
            try:
                await asyncio.to_thread(
                    graph.write, outcome, version=version, replace=replace, pins_key=key
                )
            except Exception as exc:  # refused by the server: this session fails
                outcome = RuntimeError(f"graph write failed: {failure_reason(exc)}")
            else:
                wrote(session, outcome, time.perf_counter() - t)
                return
        if isinstance(outcome, BaseException):
            reason = failure_reason(outcome)
            # If even this write fails, the graph is unusable: let it stop the run.
            await asyncio.to_thread(
                graph.mark_failed,
                session.session_id,
                reason,
                reconciler=name,
                version=version,
                pins_key=key,
                clear=session.session_id in foreign,
            )
            failures.append(SessionFailure(session_id=session.session_id, reason=reason))
        write_times.append(time.perf_counter() - t)
        report_progress()

    async def writer() -> None:
        while (item := await results_q.get()) is not None:
            group = [item]
            last = False
            while len(group) < write_batch and not results_q.empty():
                more = results_q.get_nowait()
                if more is None:
                    last = True
                    break
                group.append(more)
            await write_group(group)
            if last:
                break

    async def workers_then_stop_writer() -> None:
        async with asyncio.TaskGroup() as group:
            if pool is not None:
                group.create_task(dispatcher(pool))
            else:
                for _ in range(concurrency):
                    group.create_task(worker())
        await results_q.put(None)

    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(loader())
            group.create_task(workers_then_stop_writer())
            group.create_task(writer())
    except BaseExceptionGroup as group_error:
        if bulk:  # put back the full-text indexes dropped for the bulk run, if the graph lets us
            with contextlib.suppress(Exception):
                labels = await asyncio.to_thread(graph.node_counts)
                await asyncio.to_thread(graph.finish, {k for k, n in labels.items() if n})
        # Surface the first real cause rather than an exception group.
        raise _first_cause(group_error) from group_error
    finally:
        if pool is not None:
            await asyncio.to_thread(pool.close)
        close = getattr(reconciler, "aclose", None)
        if close is not None:
            await close()
    namespace_report: dict[str, Any] | None = None
    if namespaced and store is not None:
        consolidation = await asyncio.to_thread(
            consolidate_namespaces,
            store,
            reconciler,
            pins_key=key,
            touched=touched,
            audit=audit,
            progress=namespace_progress,
        )
        namespace_report = consolidation.model_dump()
    run_s = time.perf_counter() - started

    await asyncio.to_thread(graph.record, key, pins)
    statuses_after = await asyncio.to_thread(graph.statuses)
    counts_after = status_counts(statuses_after)
    total = len(statuses_after)
    graph_nodes = await asyncio.to_thread(graph.node_counts)
    indexed = {label for label, n in graph_nodes.items() if n}
    if callable(getattr(declared, "searchable_labels", None)):
        indexed &= declared.searchable_labels()  # retrieval searches what the schema declares
    index_problems += await asyncio.to_thread(graph.finish, indexed)
    usage_of = getattr(reconciler, "usage", None)
    failures.sort(key=lambda f: f.session_id)
    return ReconcileReport(
        reconciler=pins,
        pins_key=key,
        total_sessions=total,
        to_do=len(to_do),
        redone_foreign=len(foreign),
        done=done,
        failures=failures,
        skipped_done=skipped,
        redo=redo,
        concurrency=concurrency,
        processes=processes,
        status_after=counts_after,
        completeness=round(counts_after.get(schema.DONE, 0) / total, 6) if total else 1.0,
        nodes_written=written,
        graph_nodes=graph_nodes,
        timings={
            **_timings(
                run_s, time.perf_counter() - started, reconcile_times, write_times, load_times
            ),
            **pool_timings,
        },
        llm_usage=usage_of() if callable(usage_of) else None,
        index_problems=index_problems,
        namespaces=namespace_report,
    )


def _first_cause(group: BaseExceptionGroup) -> BaseException:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_cause(exc)
        return exc
    return group


def _timings(
    run_s: float,
    total_s: float,
    reconcile: list[float],
    write: list[float],
    load: list[float] | None = None,
) -> dict[str, float]:
    def stats(prefix: str, samples: list[float]) -> dict[str, float]:
        if not samples:
            return {}
        ordered = sorted(samples)
        return {
            f"{prefix}_total_s": round(sum(ordered), 3),
            f"{prefix}_mean_s": round(statistics.fmean(ordered), 4),
            f"{prefix}_p95_s": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 4),
        }

    out = {"run_s": round(run_s, 3), "total_s": round(total_s, 3)}
    out["sessions_per_s"] = round(len(write) / run_s, 2) if run_s > 0 else 0.0
    out.update(stats("reconcile", reconcile))
    out.update(stats("write", write))
    out.update(stats("load", load or []))  # per read of up to LOAD_BATCH sessions
    return out
