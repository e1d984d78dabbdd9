"""Reconciliation benchmark: the `llm` reconciler against a slow local model, and the
`extractive` reconciler's speed, in one run.

1. `llm`, 1,000 sessions of the generated corpus, concurrency 16, a local OpenAI-wire-format
   server (its own process) answering every request after a fixed 100 ms. Prints the wall time,
   the ideal (provider calls × 100 ms / 16) and their ratio (target <= 1.3); then the same batch
   again (redo) with a fresh layer on the same response cache (target: zero provider calls,
   wall <= 10% of the first). Sessions are held in an `InMemorySessionGraph`, so this measures
   the reconciler, the runner and the LLM layer; graph writes are measured apart in 3 (and with
   `--llm-graph`, the same llm batch written into the embedded graph).
2. `extractive`, pure extraction (no graph, one process) over every distinct session of the
   full-scale generated corpus: sessions per second.
3. `extractive` through the runner into the embedded ArcadeDB for `--graph-sessions` sessions
   (0 skips): sessions per second including the graph writes, side by side on the same
   sessions in two fresh databases of one server: one write transaction per session
   (`write_batch=1`, before issue 29) and the default batched writes; the rate projected to
   the S-shaped file's sessions against the target (issue 29: S in <= 120 s).

    .venv/bin/python -m benchmarks.bench_reconcile [--sessions 1000] [--graph-sessions 1000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from eval_pipeline.corpus.convert import iter_questions
from eval_pipeline.corpus.generate import generate
from eval_pipeline.corpus.jsonl import write_jsonl
from eval_pipeline.corpus.models import FixtureTurn, SessionFixture
from eval_pipeline.llm import LLMLayer, LLMSettings, RetryPolicy, RoleConfig
from eval_pipeline.reconcile import load_reconciler, reconcile_pending
from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.reconcile.models import SessionInput, SessionTurn
from eval_pipeline.reconcile.runner import WRITE_BATCH, ReconcileReport
from eval_pipeline.reconcile.session_graph import InMemorySessionGraph
from eval_pipeline.settings import state_dir
from eval_pipeline_tests.wire_server import WireServerProcess

RESPONDER = "eval_pipeline_tests.reconcile.fake_model:respond_after_100ms"
DELAY_S = 0.1
TARGET_RATIO = 1.3
TARGET_CACHED_FRACTION = 0.10
TARGET_S_SECONDS = 120.0  # issue 29: extractive over the S-shaped file on one instance
S_SESSIONS = 19_620  # distinct sessions of the generated S file (seed 0)


def corpus_file(questions: int, seed: int) -> Path:
    """The generated LongMemEval_S-shaped file (shared with the other benchmarks)."""
    path = state_dir() / "bench" / f"longmemeval_s_generated_q{questions}_s{seed}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        stats = generate(path, questions=questions, seed=seed)
        print(f"generated {path.name} in {time.perf_counter() - started:.0f} s: {stats}")
    return path


def corpus_sessions(path: Path, limit: int | None = None) -> Iterator[SessionInput]:
    """Distinct sessions in file order, as the graph would hand them over (no evidence flags)."""
    seen: set[str] = set()
    for question in iter_questions(path):
        for hs in question.sessions:
            if hs.session_id in seen:
                continue
            seen.add(hs.session_id)
            yield SessionInput(
                session_id=hs.session_id,
                date=hs.date,
                started_at=hs.started_at,
                turns=tuple(
                    SessionTurn(
                        turn_id=f"{hs.session_id}#{i}",
                        role=str(t["role"]),
                        text=str(t["content"]),
                        index=i,
                    )
                    for i, t in enumerate(hs.turns)
                ),
            )
            if limit is not None and len(seen) >= limit:
                return


def llm_layer(base_url: str, cache_path: Path, concurrency: int) -> LLMLayer:
    role = RoleConfig(
        provider="openai_compatible",
        model="bench-memory-model",
        base_url=base_url,
        concurrency=concurrency,
        timeout_s=30.0,
        max_retries=2,
    )
    return LLMLayer(
        LLMSettings(
            roles={"reconciler": role},
            cache_path=cache_path,
            retry=RetryPolicy(backoff_base_s=0.05, backoff_max_s=1.0),
        )
    )


def run_llm(target: object, base_url: str, cache: Path, concurrency: int, redo: bool):
    layer = llm_layer(base_url, cache, concurrency)
    try:
        reconciler = load_reconciler("llm", llm=layer)
        started = time.perf_counter()
        report = reconcile_pending(target, reconciler, concurrency=concurrency, redo=redo)
        return time.perf_counter() - started, report
    finally:
        layer.close()


def check(report: ReconcileReport, expected: int) -> None:
    if report.done != expected:
        reasons = [f.reason for f in report.failures[:3]]
        raise SystemExit(f"only {report.done}/{expected} sessions done: {reasons}")


def bench_llm(sessions: list[SessionInput], concurrency: int) -> None:
    n = len(sessions)
    print(
        f"== llm reconciler: {n} sessions, concurrency {concurrency}, model answers after "
        f"{DELAY_S * 1000:.0f} ms (local wire-format server, own process)"
    )
    graph = InMemorySessionGraph(sessions)
    with tempfile.TemporaryDirectory() as tmp, WireServerProcess(responder=RESPONDER) as server:
        cache = Path(tmp) / "llm_cache.sqlite3"
        cpu = time.process_time()
        wall, report = run_llm(graph, server.openai_base_url, cache, concurrency, redo=False)
        cpu = time.process_time() - cpu
        check(report, n)
        stats = server.stats()
        calls = stats["requests"]
        ideal = calls * DELAY_S / concurrency
        ratio = wall / ideal
        print(
            f"first run:  wall {wall:6.2f} s  provider calls {calls}  "
            f"max in flight {stats['max_in_flight']}"
        )
        print(f"ideal (calls x {DELAY_S * 1000:.0f} ms / {concurrency}): {ideal:6.2f} s")
        verdict = "OK" if ratio <= TARGET_RATIO else "MISSED"
        print(f"ratio wall/ideal: {ratio:.3f} (target <= {TARGET_RATIO}) {verdict}")
        # The client is one process: SDK, HTTP and cache work share one core (the GIL).
        print(
            f"client CPU: {cpu:.2f} s = {cpu / calls * 1000:.1f} ms per call "
            f"({cpu / wall:.0%} of one core over the run); load average "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )

        first_memories = dict(graph.memories)
        server.reset_counts()
        cached_wall, cached = run_llm(graph, server.openai_base_url, cache, concurrency, redo=True)
        check(cached, n)
        cached_calls = server.stats()["requests"]
        usage = cached.llm_usage or {}
        fraction = cached_wall / wall
        ok = cached_calls == 0 and fraction <= TARGET_CACHED_FRACTION
        print(
            f"from cache: wall {cached_wall:6.2f} s  provider calls {cached_calls}  "
            f"cache hits {usage.get('cache_hits')}/{usage.get('calls')}"
        )
        print(f"same memories as the first run: {graph.memories == first_memories}")
        print(
            f"cached wall / first wall: {fraction:.3f} (target: 0 calls and <= "
            f"{TARGET_CACHED_FRACTION}) {'OK' if ok else 'MISSED'}"
        )


def bench_extractive_pure(path: Path) -> None:
    print("== extractive reconciler, pure extraction (no graph, one process), full corpus")
    reconciler = ExtractiveReconciler()
    sessions = turns = chars = 0
    spent = 0.0
    for s in corpus_sessions(path):
        started = time.perf_counter()
        reconciler.reconcile(s)
        spent += time.perf_counter() - started
        sessions += 1
        turns += len(s.turns)
        chars += sum(len(t.text) for t in s.turns)
    print(
        f"{sessions} sessions, {turns} turns, {chars / 1e6:.0f} M chars in {spent:.1f} s "
        f"(extraction time only, reading the file excluded)"
    )
    print(f"extractive: {sessions / spent:.0f} sessions/s, {turns / spent:.0f} turns/s")


def inject(store: object, sessions: list[SessionInput], directory: Path) -> None:
    from eval_pipeline.graph.inject import inject_fixtures

    rows = [
        SessionFixture(
            session_id=s.session_id,
            date=s.date or "",
            started_at=s.started_at or "",
            turns=[FixtureTurn(role=t.role, content=t.text, index=t.index) for t in s.turns],
            question_ids=["bench"],
        ).model_dump()
        for s in sessions
    ]
    path = directory / "fixtures.jsonl"
    write_jsonl(path, rows)
    inject_fixtures(store, path)  # type: ignore[arg-type]


def bench_graph(sessions: list[SessionInput], concurrency: int, llm: bool) -> None:
    from eval_pipeline.graph import server as graph_server
    from eval_pipeline.graph.store import GraphStore

    n = len(sessions)
    data_dir = state_dir() / "bench" / "reconcile_arcadedb"
    store = GraphStore(data_dir=str(data_dir), database="reconcile_bench", heap="1g")
    old = GraphStore(data_dir=str(data_dir), database="reconcile_bench_each", heap="1g")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            inject(store, sessions, Path(tmp))
            inject(old, sessions, Path(tmp))
        rates = {}
        for label, target, batch in (
            ("one transaction per session", old, 1),
            ("batched writes", store, WRITE_BATCH),
        ):
            print(
                f"== extractive reconciler into the embedded ArcadeDB: {n} sessions, "
                f"concurrency {concurrency}, {label} (write_batch {batch})"
            )
            started = time.perf_counter()
            report = reconcile_pending(
                target, ExtractiveReconciler(), concurrency=concurrency, write_batch=batch
            )
            wall = time.perf_counter() - started
            check(report, n)
            t = report.timings
            rates[batch] = n / wall
            print(
                f"wall {wall:.1f} s: {n / wall:.0f} sessions/s with graph writes "
                f"(write {t.get('write_mean_s', 0) * 1000:.1f} ms/session mean, "
                f"p95 {t.get('write_p95_s', 0) * 1000:.1f} ms; nodes {report.graph_nodes})"
            )
        projected = S_SESSIONS / rates[WRITE_BATCH]
        print(
            f"batched / one each: {rates[WRITE_BATCH] / rates[1]:.2f}x; S ({S_SESSIONS} "
            f"sessions) projected {projected:.0f} s batched, {S_SESSIONS / rates[1]:.0f} s one "
            f"each; target S <= {TARGET_S_SECONDS:.0f} s: "
            f"{'OK' if projected <= TARGET_S_SECONDS else 'MISSED'} (projected from {n})"
        )
        if llm:
            print(
                f"== llm reconciler into the embedded ArcadeDB: {n} sessions (redo), "
                f"concurrency 16, model answers after {DELAY_S * 1000:.0f} ms"
            )
            with (
                tempfile.TemporaryDirectory() as tmp,
                WireServerProcess(responder=RESPONDER) as wire,
            ):
                cache = Path(tmp) / "llm_cache.sqlite3"
                wall, report = run_llm(store, wire.openai_base_url, cache, 16, redo=True)
                check(report, n)
                calls = wire.stats()["requests"]
                ideal = calls * DELAY_S / 16
                print(
                    f"wall {wall:.2f} s, ideal {ideal:.2f} s, ratio {wall / ideal:.3f} "
                    f"(write {report.timings.get('write_mean_s', 0) * 1000:.1f} ms/session)"
                )
    finally:
        store.close()
        old.close()
        graph_server.stop(data_dir)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--graph-sessions", type=int, default=1000, help="0 skips part 3")
    parser.add_argument(
        "--llm-graph", action="store_true", help="also the llm batch into the graph"
    )
    parser.add_argument("--skip-pure", action="store_true", help="skip part 2 (full corpus)")
    parser.add_argument("--skip-llm", action="store_true", help="skip part 1")
    args = parser.parse_args()

    path = corpus_file(args.questions, args.seed)
    first = list(corpus_sessions(path, limit=max(args.sessions, args.graph_sessions)))
    if not args.skip_llm:
        bench_llm(first[: args.sessions], args.concurrency)
    if not args.skip_pure:
        bench_extractive_pure(path)
    if args.graph_sessions:
        bench_graph(first[: args.graph_sessions], 4, args.llm_graph)


if __name__ == "__main__":
    main()
