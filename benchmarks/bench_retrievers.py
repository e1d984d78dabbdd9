"""Retriever benchmark: `fulltext`, `dense` and `hybrid` side by side, recall and latency.

One graph, one process, the same questions: the corpus is injected into the embedded server,
its turns are embedded and indexed once (`graph/vectors.py`, the retrieval stage's own
preparation step; the machine's passage cache makes a second run cheap), then each question
is retrieved by the three retrievers in turn (interleaved, so drift on a loaded machine hits
all three alike) at scope `question` (within the question's haystack, as LongMemEval's
retrieval study scores), top k = 10, searching the raw turns (the `none` memory: what the
study indexes). Recall is the scorer's own (`score.retrieval_metrics.question_metrics`):
turn-level recall_any@k and recall_all@k, upstream variant (user-side evidence; abstention
questions and those without user evidence excluded, as in every run), averaged over the
scored questions; latency per question (p50, p95) is the retriever's, query embedding
included.

    .venv/bin/python -m benchmarks.bench_retrievers [--generated Q [--sessions N]] [--top-k 10]

Default input: the bundled sample (corpus/sample). `--generated Q` also runs on a generated
LongMemEval_S-shaped file of Q questions (`corpus/generate.py`, full 47-session haystacks
unless `--sessions` says fewer): embedding costs ~50-250 ms a turn on this machine, so the
full 500-question file (~200k turns) is out of reach here; the figure printed names its size.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

from eval_pipeline.corpus.convert import FIXTURES_FILE, GOLDENS_FILE, build_corpus
from eval_pipeline.corpus.generate import generate
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.corpus.upstream import UpstreamSpec, resolve_upstream
from eval_pipeline.graph import server
from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.retrieve.dense import DenseRetriever, HybridRetriever
from eval_pipeline.retrieve.fulltext import FulltextRetriever
from eval_pipeline.retrieve.protocol import RetrievalEnv, RetrievalRequest, RetrievalTrace
from eval_pipeline.score.retrieval_metrics import question_metrics
from eval_pipeline.settings import BUNDLED_CORPUS_DIR, state_dir

RETRIEVERS = ("fulltext", "dense", "hybrid")
KS = (1, 3, 5, 10)


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def generated_corpus(questions: int, sessions: int, seed: int) -> Path:
    bench = state_dir() / "bench"
    data = bench / f"longmemeval_s_generated_q{questions}_n{sessions}_s{seed}.json"
    if not data.exists():
        data.parent.mkdir(parents=True, exist_ok=True)
        generate(data, questions=questions, sessions_per_question=sessions, seed=seed)
    out = bench / f"retrievers_corpus_q{questions}_n{sessions}_s{seed}"
    if not (out / FIXTURES_FILE).exists():
        upstream = resolve_upstream(UpstreamSpec(source="path", path=str(data)), verify=True)
        build_corpus(upstream, out, SampleSpec())
    return out


def measure(corpus: Path, name: str, top_k: int, heap: str) -> dict[str, Any]:
    """Inject `corpus`, prepare its vectors, retrieve every question with the three."""
    store = GraphStore(
        data_dir=str(state_dir() / "bench" / "retrievers_arcadedb"),
        database=f"bench_retrievers_{name}",
        heap=heap,
    )
    try:
        t = time.perf_counter()
        report = inject_fixtures(store, corpus / FIXTURES_FILE)
        inject_s = time.perf_counter() - t
        # The raw transcript is what is searched (no reconciler registered: every kind; only
        # turns exist): the same sources for all three.
        prepared = DenseRetriever.prepare_graph(store, {"sources": ["turn"]}, lambda _: None)
        turns = prepared["sources"]["Turn"]
        print(
            f"[{name}] {report.counts.sessions} sessions, {report.counts.turns} turns injected "
            f"in {inject_s:.1f} s; embeddings: {turns['embedded']} embedded, "
            f"{turns['from_cache']} from cache, {turns['kept']} kept in {turns['seconds']:.1f} s"
            f" ({load_average()})",
            flush=True,
        )
        env = RetrievalEnv(store=store, backend=store.dialect.name)
        retrievers = {
            "fulltext": FulltextRetriever(env, sources=["turn"]),
            "dense": DenseRetriever(env, sources=["turn"]),
            "hybrid": HybridRetriever(env, sources=["turn"]),
        }
        for r in retrievers.values():
            getattr(r, "check_graph", lambda: None)()
        goldens = list(read_jsonl(corpus / GOLDENS_FILE))
        recall: dict[str, dict[str, list[float]]] = {
            r: {f"{m}@{k}": [] for m in ("recall_any", "recall_all") for k in KS}
            for r in RETRIEVERS
        }
        latency: dict[str, list[float]] = {r: [] for r in RETRIEVERS}
        failed = dict.fromkeys(RETRIEVERS, 0)
        for golden in goldens:
            meta = golden["additional_metadata"]
            request = RetrievalRequest(
                question_id=golden["name"],
                question=golden["input"],
                question_date=meta["question_date"],
                scope="question",
                top_k=top_k,
            )
            roles = dict(zip(meta["evidence_turn_ids"], meta["evidence_turn_roles"], strict=True))
            for label, retriever in retrievers.items():
                t = time.perf_counter()
                try:
                    output = retriever.retrieve(request, RetrievalTrace())
                except Exception as exc:  # counted, shown: a benchmark reports, not raises
                    failed[label] += 1
                    print(f"[{name}] {label} failed on {golden['name']}: {exc}")
                    continue
                latency[label].append((time.perf_counter() - t) * 1000)
                ranked = [tid for item in output.items for tid in item.turn_ids]
                scored = question_metrics(
                    ranked, roles, meta["evidence_session_ids"], bool(meta["abstention"])
                )["turn"]["upstream"]
                for key in recall[label]:
                    if scored.get(key) is not None:
                        recall[label][key].append(float(scored[key]))
        results = {
            label: {
                "questions": len(goldens),
                "scored": len(recall[label]["recall_any@1"]),
                "failed": failed[label],
                **{
                    k: round(statistics.fmean(v), 3) if v else None
                    for k, v in recall[label].items()
                },
                "p50_ms": round(percentile(latency[label], 50), 1) if latency[label] else None,
                "p95_ms": round(percentile(latency[label], 95), 1) if latency[label] else None,
            }
            for label in RETRIEVERS
        }
        return {
            "corpus": str(corpus),
            "sessions": report.counts.sessions,
            "turns": report.counts.turns,
            "embedding": turns,
            "load": load_average(),
            "retrievers": results,
        }
    finally:
        store.close()


def print_table(name: str, figures: dict[str, Any]) -> None:
    print(
        f"\n{name}: {figures['turns']} turns, scope question, turn level, upstream variant "
        f"({figures['load']})"
    )
    cols = [f"recall_any@{k}" for k in KS] + ["recall_all@5", "p50_ms", "p95_ms"]
    print(f"{'retriever':10} {'scored':>6} " + " ".join(f"{c:>13}" for c in cols))
    for label in RETRIEVERS:
        r = figures["retrievers"][label]
        cells = [
            "-" if r[c] is None else f"{r[c]:.3f}" if "@" in c else f"{r[c]:.1f}" for c in cols
        ]
        print(f"{label:10} {r['scored']:>6} " + " ".join(f"{c:>13}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--generated", type=int, default=0, help="also a generated file of Q")
    parser.add_argument("--sessions", type=int, default=47, help="sessions per question")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--keep-server", action="store_true")
    args = parser.parse_args()

    print(f"before: {load_average()}", flush=True)
    inputs = {"sample": BUNDLED_CORPUS_DIR / "sample"}
    if args.generated:
        name = f"generated-q{args.generated}-n{args.sessions}"
        inputs[name] = generated_corpus(args.generated, args.sessions, args.seed)
    figures: dict[str, Any] = {}
    try:
        for name, corpus in inputs.items():
            figures[name] = measure(corpus, name, args.top_k, args.heap)
            print_table(name, figures[name])
    finally:
        if not args.keep_server:
            server.stop(str(state_dir() / "bench" / "retrievers_arcadedb"))
    for name, f in figures.items():
        ran = all(r["failed"] == 0 and r["scored"] > 0 for r in f["retrievers"].values())
        print(
            f"target: fulltext, dense and hybrid measured side by side on {name}: "
            f"{'OK' if ran else 'MISSED'}"
        )
    out = state_dir() / "bench" / "bench_retrievers.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"figures written to {out}")


if __name__ == "__main__":
    main()
