"""Graph-stage benchmark: inject a full LongMemEval_S-shaped corpus into the embedded ArcadeDB.

In one run, on one server (its own data directory under the state directory):
1. warm-up: a small slice through the pipeline, so the JVM is warm for both measurements;
2. pipeline: `inject_fixtures` on the full fixtures (read + validate, wipe, indexes, batched
   writes, full-text index, count verification, fingerprint);
3. wipe: `GraphStore.wipe()` of the full graph;
4. limit: the same nodes and relationships written with plain batched `UNWIND ... CREATE`
   over a bare neo4j driver, rows prepared in memory beforehand (no pipeline code), run once
   before and once after the pipeline (best time counts); after the second run the same
   full-text index through plain SQL over HTTP, timed apart.
Prints both times, the ratio pipeline/limit (target <= 1.5), turns per second, wipe time and
the server's RSS.

    .venv/bin/python -m benchmarks.bench_inject [--questions 500] [--heap 1g] [--keep]
"""

from __future__ import annotations

import argparse
import base64
import json
import time
import urllib.request
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import neo4j

from eval_pipeline.corpus.convert import FIXTURES_FILE, build_corpus
from eval_pipeline.corpus.generate import generate
from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.corpus.upstream import UpstreamSpec, resolve_upstream
from eval_pipeline.graph import server
from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.settings import state_dir

TARGET_RATIO = 1.5
LIMIT_BATCH_TURNS = 2000

# The limit's statements: written out here, not imported, so no pipeline code is involved.
LIMIT_QUESTION_INDEX = "CREATE INDEX IF NOT EXISTS FOR (q:Question) ON (q.question_id)"
LIMIT_QUESTIONS = "UNWIND $rows AS qid CREATE (:Question {question_id: qid})"


def limit_sessions_statement(k: int) -> str:
    """Sessions with exactly k turns: session, turns, HAS_TURN and NEXT as one fixed pattern
    (the fastest shape found on ArcadeDB), then the haystack edges."""
    lines = [
        "UNWIND $rows AS row",
        "CREATE (s:Session {session_id: row.session_id, date: row.date, "
        "started_at: row.started_at, reconcile_status: 'pending'})",
    ]
    for i in range(k):
        t = f"row.turns[{i}]"
        lines.append(
            f"CREATE (s)-[:HAS_TURN]->(t{i}:Turn {{turn_id: {t}.turn_id, "
            f"session_id: row.session_id, role: {t}.role, text: {t}.text, index: {t}.index, "
            f"timestamp: {t}.timestamp}})"
        )
    lines += [f"CREATE (t{i})-[:NEXT]->(t{i + 1})" for i in range(k - 1)]
    lines += [
        "WITH s, row UNWIND row.question_ids AS qid",
        "MATCH (q:Question {question_id: qid}) CREATE (q)-[:HAYSTACK]->(s)",
    ]
    return "\n".join(lines)


LIMIT_FULLTEXT_SQL = [
    "CREATE PROPERTY Turn.text IF NOT EXISTS STRING",
    "CREATE INDEX IF NOT EXISTS ON Turn (text) FULL_TEXT",
]


def fixtures_for(questions: int, seed: int) -> Path:
    """The generated corpus's fixtures.jsonl, built once and cached under the state dir."""
    bench = state_dir() / "bench"
    bench.mkdir(parents=True, exist_ok=True)
    data = bench / f"longmemeval_s_generated_q{questions}_s{seed}.json"  # shared with bench_corpus
    if not data.exists():
        t = time.perf_counter()
        print(f"generating {data} ...", flush=True)
        generate(data, questions=questions, seed=seed)
        print(f"  done in {time.perf_counter() - t:.1f} s", flush=True)
    out = bench / f"graph_corpus_q{questions}_s{seed}"
    fixtures = out / FIXTURES_FILE
    if not fixtures.exists():
        t = time.perf_counter()
        print(f"building fixtures in {out} ...", flush=True)
        upstream = resolve_upstream(UpstreamSpec(source="path", path=str(data)))
        build_corpus(upstream, out, SampleSpec())
        print(f"  done in {time.perf_counter() - t:.1f} s", flush=True)
    return fixtures


def head_slice(fixtures: Path, n: int) -> Path:
    """The first `n` fixtures with their haystacks trimmed to those sessions (warm-up)."""
    out = fixtures.with_name("warmup_fixtures.jsonl")
    with open(fixtures, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i >= n:
                break
            dst.write(line)
    return out


def limit_rows(fixtures: Path) -> tuple[list[str], list[dict], int]:
    """(question ids, session rows, turns) in the shape the limit statements take."""
    questions: set[str] = set()
    rows: list[dict] = []
    turns = 0
    with open(fixtures, encoding="utf-8") as fh:
        for line in fh:
            fx = json.loads(line)
            start = datetime.fromisoformat(fx["started_at"])
            sid = fx["session_id"]
            questions.update(fx["question_ids"])
            rows.append(
                {
                    "session_id": sid,
                    "date": fx["date"],
                    "started_at": fx["started_at"],
                    "question_ids": list(dict.fromkeys(fx["question_ids"])),
                    "turns": [
                        {
                            "turn_id": f"{sid}#{t['index']}",
                            "role": t["role"],
                            "text": t["content"],
                            "index": t["index"],
                            "timestamp": (start + timedelta(seconds=t["index"])).isoformat(),
                        }
                        for t in fx["turns"]
                    ],
                }
            )
            turns += len(fx["turns"])
    return sorted(questions), rows, turns


def run_limit(
    info: server.ServerInfo, password: str, fixtures: Path, *, fulltext: bool
) -> dict[str, float]:
    questions, rows, turns = limit_rows(fixtures)
    driver = neo4j.GraphDatabase.driver(info.bolt_uri, auth=("root", password))
    try:
        with driver.session(database=info.database) as s:
            t0 = time.perf_counter()
            s.run(LIMIT_QUESTION_INDEX).consume()
            s.run(LIMIT_QUESTIONS, rows=questions).consume()
            groups: dict[int, list[dict]] = defaultdict(list)
            for row in rows:
                groups[len(row["turns"])].append(row)
            for k, group in sorted(groups.items()):
                stmt = limit_sessions_statement(k)
                per_batch = max(LIMIT_BATCH_TURNS // max(k, 1), 1)
                for i in range(0, len(group), per_batch):
                    s.run(stmt, rows=group[i : i + per_batch]).consume()
            t_write = time.perf_counter() - t0
            nodes = s.run("MATCH (n) RETURN count(n) AS n").single()["n"]
            rels = s.run("MATCH ()-[r]->() RETURN count(r) AS n").single()["n"]
    finally:
        driver.close()
    token = base64.b64encode(f"root:{password}".encode()).decode()
    t0 = time.perf_counter()
    for sql in LIMIT_FULLTEXT_SQL if fulltext else []:
        req = urllib.request.Request(
            f"{info.http_url}/api/v1/command/{info.database}",
            data=json.dumps({"language": "sql", "command": sql}).encode(),
            headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"},
        )
        urllib.request.urlopen(req, timeout=3600).read()
    t_fulltext = time.perf_counter() - t0
    return {
        "write": t_write,
        "fulltext": t_fulltext,
        "nodes": nodes,
        "relationships": rels,
        "turns": turns,
    }


def rss_mb(pid: int) -> tuple[float, float]:
    """(current, peak) resident set size of a process, in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--heap", default="1g", help="server -Xmx (the pipeline default: 1g)")
    parser.add_argument("--keep", action="store_true", help="leave the bench server running")
    args = parser.parse_args()

    fixtures = fixtures_for(args.questions, args.seed)
    data_dir = state_dir() / "bench" / "graph_arcadedb"
    store = GraphStore(data_dir=str(data_dir), heap=args.heap, disposable=True)
    try:
        store.ensure_running()
        info = server.running_info(data_dir)
        assert info is not None
        password = server.credentials(data_dir).password

        t = time.perf_counter()
        inject_fixtures(store, head_slice(fixtures, 1000))
        print(f"warm-up (1000 sessions): {time.perf_counter() - t:.1f} s", flush=True)

        # The limit runs before and after the pipeline and its best time counts, so neither
        # JVM warm-up nor a busy moment on the machine favours the pipeline.
        store.wipe()
        first = run_limit(info, password, fixtures, fulltext=False)
        print(f"limit (1st): {first['write']:.1f} s", flush=True)
        store.wipe()

        report = inject_fixtures(store, fixtures)
        pipe = report.timings_s
        print(f"pipeline: {pipe['total']:.1f} s  {json.dumps(pipe)}", flush=True)

        t = time.perf_counter()
        store.wipe()
        wipe_s = time.perf_counter() - t

        limit = run_limit(info, password, fixtures, fulltext=True)
        print(f"limit (2nd): {limit['write']:.1f} s", flush=True)
        limit["write"] = min(limit["write"], first["write"])
        rss, peak = rss_mb(info.pid)
        store.wipe()
    finally:
        store.close()
        if not args.keep:
            server.stop(data_dir)

    c = report.counts
    pipe_write = pipe["indexes_and_questions"] + pipe["sessions"]
    limit_total = limit["write"] + limit["fulltext"]
    ratio = pipe["total"] / limit["write"]
    print()
    print(
        f"corpus:   {c.sessions} sessions, {c.turns} turns, {c.questions} questions; "
        f"{report.nodes} nodes, {report.relationships} relationships "
        f"(limit wrote {limit['nodes']} nodes, {limit['relationships']} relationships)"
    )
    print(f"server:   {report.server_version}, -Xmx{args.heap}")
    print(
        f"pipeline: {pipe['total']:.1f} s total = read+validate {pipe['read_fixtures']:.1f} "
        f"+ wipe {pipe['wipe']:.1f} + writes and indexes {pipe_write:.1f} "
        f"+ full-text index {pipe['fulltext_index']:.1f} + verify {pipe['verify']:.1f} s"
    )
    print(
        f"limit:    {limit['write']:.1f} s plain UNWIND...CREATE "
        f"(+ {limit['fulltext']:.1f} s for the same full-text index = {limit_total:.1f} s)"
    )
    print(
        f"ratio:    pipeline/limit = {ratio:.2f} (target <= {TARGET_RATIO}) "
        f"{'OK' if ratio <= TARGET_RATIO else 'MISSED'}; writes only "
        f"{pipe_write / limit['write']:.2f}; with the full-text index on both sides "
        f"{pipe['total'] / limit_total:.2f}"
    )
    print(
        f"rate:     pipeline {c.turns / pipe['total']:.0f} turns/s, "
        f"limit {limit['turns'] / limit['write']:.0f} turns/s"
    )
    print(f"wipe:     {wipe_s:.1f} s (full graph)")
    print(f"rss:      server {rss:.0f} MB now, {peak:.0f} MB peak")


if __name__ == "__main__":
    main()
