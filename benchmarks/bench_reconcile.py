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
   sessions in fresh databases of one server: one write transaction per session
   (`write_batch=1`, before issue 29; `--skip-each` leaves it out), the batched writes with
   the reconciler in the driver's threads (`processes=1`), and the default: batched writes
   and the reconciler in worker processes, one per core. Each rate is projected to the
   S-shaped file's sessions against the target (issue 29: S in <= 120 s), with the CPU the
   driver, the worker processes and the JVM spent and the load average (the machine may be
   shared: a load above the cores means every figure is slowed down).

    .venv/bin/python -m benchmarks.bench_reconcile [--sessions 1000] [--graph-sessions 1000]
        [--skip-each] [--processes N]
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
from eval_pipeline.reconcile.runner import LOAD_BATCH, WRITE_BATCH, ReconcileReport
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


def cpu_s(pid: int | None, *, children: bool = False) -> float:
    """CPU seconds `pid` has used (with `children`: only those of its reaped children)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # utime, stime, cutime, cstime are fields 14-17 of stat (12-15 after the name).
    ticks = int(fields[13]) + int(fields[14]) if children else int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def fork_servers() -> list[int]:
    """This process's multiprocessing fork server(s): worker processes are its children, so
    the CPU they spent is its children's once they have exited."""
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="ascii")
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and b"forkserver" in cmdline:
            found.append(int(entry.name))
    return found


def bench_graph(
    sessions: list[SessionInput],
    concurrency: int,
    llm: bool,
    *,
    each: bool = True,
    processes: int | None = None,
) -> None:
    from eval_pipeline.graph import server as graph_server
    from eval_pipeline.graph.store import GraphStore
    from eval_pipeline.reconcile.processes import resolve_processes

    n = len(sessions)
    workers = resolve_processes(ExtractiveReconciler(), processes)
    data_dir = state_dir() / "bench" / "reconcile_arcadedb"
    runs = [("batched writes, in the driver's threads", "threads", WRITE_BATCH, 1)]
    if each:
        runs.insert(0, ("one transaction per session, threads", "each", 1, 1))
    runs.append((f"batched writes, {workers} worker processes", "processes", WRITE_BATCH, workers))
    stores = {
        key: GraphStore(data_dir=str(data_dir), database=f"reconcile_bench_{key}", heap="1g")
        for _, key, _, _ in runs
    }
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for target in stores.values():
                inject(target, sessions, Path(tmp))
        info = graph_server.running_info(data_dir)
        jvm = info.pid if info is not None else None
        rates: dict[str, float] = {}
        for label, key, batch, procs in runs:
            print(
                f"== extractive reconciler into the embedded ArcadeDB: {n} sessions, "
                f"concurrency {concurrency}, {label} (write_batch {batch}, processes {procs})"
            )
            servers = fork_servers()
            before = (
                time.process_time(),
                sum(cpu_s(p, children=True) for p in servers),
                cpu_s(jvm),
            )
            started = time.perf_counter()
            report = reconcile_pending(
                stores[key],
                ExtractiveReconciler(),
                concurrency=concurrency,
                write_batch=batch,
                processes=procs,
            )
            wall = time.perf_counter() - started
            check(report, n)
            servers = fork_servers()  # the first pool of this process starts its server
            driver = time.process_time() - before[0]
            pool_cpu = sum(cpu_s(p, children=True) for p in servers) - before[1]
            jvm_cpu = cpu_s(jvm) - before[2]
            t = report.timings
            rates[key] = n / wall
            projected = S_SESSIONS / rates[key]
            started_workers = (
                f"; workers started in {t['worker_start_s']:.2f} s "
                f"(reconciler unpickled in {t['worker_unpickle_s']:.2f} s)"
                if "worker_start_s" in t
                else ""
            )
            print(
                f"wall {wall:.1f} s: {n / wall:.0f} sessions/s with graph writes "
                f"(write {t.get('write_mean_s', 0) * 1000:.1f} ms/session mean, "
                f"p95 {t.get('write_p95_s', 0) * 1000:.1f} ms; nodes {report.graph_nodes})"
            )
            waits = (
                f"; the dispatcher waited {t['pool_wait_sessions_s']:.1f} s for sessions, "
                f"{t['pool_wait_results_s']:.1f} s for results"
                if "pool_wait_sessions_s" in t
                else ""
            )
            print(
                f"loads: {t.get('load_total_s', 0):.1f} s in all, "
                f"{t.get('load_mean_s', 0) * 1000:.0f} ms per {LOAD_BATCH} sessions{waits}"
            )
            print(
                f"CPU: driver {driver:.1f} s ({driver / wall:.2f} cores), worker processes "
                f"{pool_cpu:.1f} s ({pool_cpu / wall:.2f}), JVM {jvm_cpu:.1f} s "
                f"({jvm_cpu / wall:.2f}){started_workers}; load average "
                f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
            )
            # Load-free bound: the CPU a session costs over the cores, or the driver's own
            # (one process, one core at most under the GIL), whichever is larger.
            cores = os.cpu_count() or 1
            per_session = max((driver + pool_cpu + jvm_cpu) / cores, driver) / n
            print(
                f"CPU per session: {(driver + pool_cpu + jvm_cpu) / n * 1000:.1f} ms "
                f"(driver {driver / n * 1000:.1f}, workers {pool_cpu / n * 1000:.1f}, JVM "
                f"{jvm_cpu / n * 1000:.1f}): on an idle machine S could take "
                f"{S_SESSIONS * per_session:.0f} s at best"
            )
            print(
                f"S ({S_SESSIONS} sessions) projected {projected:.0f} s; target S <= "
                f"{TARGET_S_SECONDS:.0f} s: {'OK' if projected <= TARGET_S_SECONDS else 'MISSED'} "
                f"(projected from {n})"
            )
        summary = [f"processes / threads: {rates['processes'] / rates['threads']:.2f}x"]
        if "each" in rates:
            summary.append(f"batched threads / one each: {rates['threads'] / rates['each']:.2f}x")
        print("; ".join(summary))
        store = stores["processes"]
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
        for target in stores.values():
            target.close()
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
    parser.add_argument(
        "--skip-each", action="store_true", help="part 3 without one transaction per session"
    )
    parser.add_argument(
        "--processes", type=int, default=None, help="part 3's worker processes (unset: cores)"
    )
    args = parser.parse_args()

    path = corpus_file(args.questions, args.seed)
    first = list(corpus_sessions(path, limit=max(args.sessions, args.graph_sessions)))
    if not args.skip_llm:
        bench_llm(first[: args.sessions], args.concurrency)
    if not args.skip_pure:
        bench_extractive_pure(path)
    if args.graph_sessions:
        bench_graph(
            first[: args.graph_sessions],
            4,
            args.llm_graph,
            each=not args.skip_each,
            processes=args.processes,
        )


if __name__ == "__main__":
    main()
