"""Feed a provider from the injected graph: each namespace's sessions in time order, resumable.

The graph is the source: namespaces and their time-ordered sessions come from the haystack
query (`namespace_graph.read_namespaces`), turns from the session loader (no evidence field).
Every (namespace, session) sent is recorded in a ledger beside the provider's storage
(`ledger.jsonl`: `start` before the call, `done`/`failed` after, fsynced), so:

- a re-run with the same pins sends nothing that is done;
- a namespace whose done sessions are exactly the first of its time-ordered list resumes
  after them; anything else (a session whose content changed, a gap left by a failure, a
  `start` with no end: the process died mid-call) resets that namespace and ingests it
  again from its first session, because a memory formed out of order is another memory.

Namespaces run side by side, `concurrency` at a time (the provider's own, or the role's);
sessions within a namespace one after another. A session the provider fails on
(`ProviderError`) is that session's failure and the namespace goes on; the provider being
unreachable (`ProviderUnavailable`) stops the run: it is infrastructure, not a miss.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from eval_pipeline.llm import redact
from eval_pipeline.providers.base import (
    MemoryProvider,
    ProviderSession,
    ProviderTurn,
    ProviderUnavailable,
    StoredMemory,
)
from eval_pipeline.reconcile.namespace_graph import read_namespaces
from eval_pipeline.reconcile.reader import load_sessions

LEDGER = "ledger.jsonl"
MAX_REASON_CHARS = 300


class IngestFailure(BaseModel):
    model_config = ConfigDict(frozen=True)

    namespace: str
    session_id: str
    reason: str


class IngestProgress(BaseModel):
    model_config = ConfigDict(frozen=True)

    finished: int  # (namespace, session) pairs sent this run
    to_do: int
    failed: int
    elapsed_s: float

    @property
    def eta_s(self) -> float | None:
        if not self.finished:
            return None
        return self.elapsed_s / self.finished * (self.to_do - self.finished)


class IngestReport(BaseModel):
    """What one ingestion did, for the stage's facts and the manifest."""

    provider: dict[str, Any]
    pins_key: str
    namespaces: int
    pairs_total: int  # (namespace, session) pairs the graph holds
    to_do: int  # ... this run sent
    ingested: int  # ... of which the provider took
    skipped_done: int  # ... already ingested under the same pins
    namespaces_reset: int
    failures: list[IngestFailure]
    completeness: float  # pairs ingested (now or before) / pairs_total
    stored_memories: int  # what the provider reported storing this run
    add_latency_s: dict[str, float | None]
    per_namespace_s: dict[str, float | None]
    seconds: float

    @property
    def failed(self) -> int:
        return len(self.failures)


ProgressCallback = Callable[[IngestProgress], None]


class Ledger:
    """Append-only record of what was sent, shared by the namespaces' threads."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / LEDGER
        self._lock = threading.Lock()

    def state(self) -> dict[str, list[dict[str, Any]]]:
        """namespace → its events since its last reset, in order."""
        out: dict[str, list[dict[str, Any]]] = {}
        if not self.path.exists():
            return out
        for line in self.path.read_text("utf-8").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:  # a torn last line: the call it began is redone
                continue
            if event.get("event") == "reset":
                out[event["ns"]] = []
            else:
                out.setdefault(event["ns"], []).append(event)
        return out

    def write(self, **event: Any) -> None:
        line = json.dumps(event, sort_keys=True) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


def done_prefix(events: list[dict[str, Any]], wanted: list[tuple[str, str]]) -> int | None:
    """How many of `wanted` (session id, digest) are done, in order, with nothing else sent;
    None when the namespace must start again."""
    done: list[tuple[str, str]] = []
    open_start = False
    for e in events:
        if e["event"] == "start":
            open_start = True
        elif e["event"] == "done":
            done.append((e["sid"], e["digest"]))
            open_start = False
        else:  # failed: the memory has a gap
            return None
    if open_start or done != wanted[: len(done)]:
        return None
    return len(done)


def provider_session(session: Any) -> ProviderSession:
    return ProviderSession(
        session_id=session.session_id,
        started_at=session.started_at,
        turns=tuple(
            ProviderTurn(turn_id=t.turn_id, role=t.role, content=t.text) for t in session.turns
        ),
    )


def _reason(exc: BaseException) -> str:
    return redact(" ".join(f"{type(exc).__name__}: {exc}".split()))[:MAX_REASON_CHARS]


def read_graph(store: Any) -> tuple[dict[str, list[str]], dict[str, ProviderSession]]:
    """The graph's namespaces (session ids in time order) and its sessions, as sent."""
    namespaces, _ = read_namespaces(store)
    all_ids = sorted({sid for sids in namespaces.values() for sid in sids})
    sessions = {s.session_id: provider_session(s) for s in load_sessions(store, all_ids)}
    return {ns: [s for s in sids if s in sessions] for ns, sids in namespaces.items()}, sessions


def ingest(
    provider: MemoryProvider,
    namespaces: dict[str, list[str]],
    sessions: dict[str, ProviderSession],
    ledger_dir: Path,
    *,
    pins_key: str,
    concurrency: int | None = None,
    progress: ProgressCallback | None = None,
) -> IngestReport:
    """Ingest `namespaces` (from `read_graph`) into `provider` (see the module docstring)."""
    started = time.perf_counter()
    digests = {sid: s.digest() for sid, s in sessions.items()}
    ledger = Ledger(ledger_dir)
    state = ledger.state()
    plan: dict[str, tuple[int, list[str]]] = {}  # namespace → (done already, session ids)
    reset: list[str] = []
    for ns, sids in namespaces.items():
        wanted = [(s, digests[s]) for s in sids]
        have = done_prefix(state.get(ns, []), wanted)
        if have is None:
            reset.append(ns)
            have = 0
        plan[ns] = (have, sids)
    total = sum(len(sids) for _, sids in plan.values())
    skipped = sum(have for have, _ in plan.values())
    to_do = total - skipped
    lock = threading.Lock()
    latencies: list[float] = []
    per_ns: dict[str, float] = {}
    failures: list[IngestFailure] = []
    stored = [0]
    finished = [0]

    def note(seconds: float, failure: IngestFailure | None, memories: list[StoredMemory] | None):
        with lock:
            finished[0] += 1
            latencies.append(seconds)
            stored[0] += len(memories or [])
            if failure is not None:
                failures.append(failure)
            snapshot = IngestProgress(
                finished=finished[0],
                to_do=to_do,
                failed=len(failures),
                elapsed_s=time.perf_counter() - started,
            )
        if progress is not None:
            progress(snapshot)

    def one_namespace(ns: str) -> None:
        have, sids = plan[ns]
        if have == len(sids) and ns not in reset:
            return
        t0 = time.perf_counter()
        if ns in reset:
            provider.reset(ns)
            ledger.write(event="reset", ns=ns)
        for sid in sids[have:]:
            ledger.write(event="start", ns=ns, sid=sid, digest=digests[sid])
            call = time.perf_counter()
            try:
                memories = provider.ingest(ns, sessions[sid])
            except ProviderUnavailable:
                raise
            except Exception as exc:  # the provider's own failure: this session's
                ledger.write(event="failed", ns=ns, sid=sid, digest=digests[sid])
                note(
                    time.perf_counter() - call,
                    IngestFailure(namespace=ns, session_id=sid, reason=_reason(exc)),
                    None,
                )
                continue
            ledger.write(event="done", ns=ns, sid=sid, digest=digests[sid])
            note(time.perf_counter() - call, None, memories)
        per_ns[ns] = time.perf_counter() - t0

    workers = max(1, concurrency or provider.concurrency or 1)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ingest") as pool:
        # list(): the first exception (ProviderUnavailable) propagates after the others end.
        list(pool.map(one_namespace, sorted(plan)))
    ingested = to_do - len(failures)
    return IngestReport(
        provider=provider.pins(),
        pins_key=pins_key,
        namespaces=len(plan),
        pairs_total=total,
        to_do=to_do,
        ingested=ingested,
        skipped_done=skipped,
        namespaces_reset=len([ns for ns in reset if plan[ns][1]]),
        failures=failures,
        completeness=(skipped + ingested) / total if total else 1.0,
        stored_memories=stored[0],
        add_latency_s=_stats(latencies),
        per_namespace_s=_stats(list(per_ns.values())),
        seconds=round(time.perf_counter() - started, 3),
    )


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "mean": None, "p50": None, "max": None}
    ordered = sorted(values)
    return {
        "n": len(values),
        "mean": round(statistics.fmean(values), 3),
        "p50": round(statistics.median(values), 3),
        "max": round(ordered[-1], 3),
    }
