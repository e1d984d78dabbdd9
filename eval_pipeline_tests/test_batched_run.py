"""`eval-pipeline run --batches 2`, as a user runs it: two embedded graph servers, each
batch's stages in a process of its own, one scored run over both. Real servers, real Dagster
instance; the one-batch run of the same corpus is the reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.corpus.batches import BatchKey, batch_index, batch_keys, partitioning_pin
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.settings import REPO_DIR
from eval_pipeline_tests.bundle_checks import assert_summary_recomputes

EXE = str(Path(sys.executable).with_name("eval-pipeline"))


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("batched")
    env = {
        **{k: v for k, v in os.environ.items() if k != "CONFIDENT_API_KEY"},
        "EVAL_PIPELINE_HOME": str(root / "state"),
        "DAGSTER_HOME": str(root / "state" / "dagster_home"),
        # The plug-in that is killed lives in the test package.
        "PYTHONPATH": str(REPO_DIR),
    }
    yield root, env
    subprocess.run([EXE, "graph", "stop", "--all"], env=env, capture_output=True, timeout=120)


def run(env, *args, timeout=900):
    return subprocess.run(
        [EXE, "run", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def runs(home):
    root, env = home
    two = run(env, "--batches", "2", "--label", "two")
    assert two.returncode == 0, two.stderr[-3000:]
    one = run(env, "--label", "one")
    assert one.returncode == 0, one.stderr[-3000:]
    return (
        Path(two.stdout.strip().splitlines()[-1]),
        Path(one.stdout.strip().splitlines()[-1]),
        two,
    )


def _store(root: Path, batch: int) -> GraphStore:
    return GraphStore(data_dir=str(root / "state" / "graph" / f"arcadedb-batch{batch:02d}"))


def test_each_batch_runs_on_its_own_instance_holding_only_its_questions(home, runs):
    root, _ = home
    two, one, res = runs
    rows = list(read_jsonl(two / "results.jsonl"))
    questions = {r["question_id"] for r in rows}
    assert len(questions) == len(rows) == 31
    held = {}
    for batch in batch_keys(2):
        store = _store(root, batch.index)
        try:
            ids = {r["q"] for r in store.read("MATCH (q:Question) RETURN q.question_id AS q")}
        finally:
            store.close()
        assert ids and all(batch_index(q, 2) == batch.index for q in ids), batch.key
        held[batch.key] = ids
    assert held["batch-01-of-02"].isdisjoint(held["batch-02-of-02"])
    assert set().union(*held.values()) == questions
    # Both batches ran at once, each stage's line naming its batch.
    for batch in batch_keys(2):
        for stage in ("injected_graph", "reconciled_graph", "retrieval_results"):
            assert f"[{batch.key}] [" in res.stderr and f"{stage}: ok" in res.stderr


def test_one_scored_run_with_per_batch_provenance_and_the_partitioning_pinned(home, runs):
    two, one, _ = runs
    manifest = json.loads((two / "manifest.json").read_text())
    assert manifest["pins"]["partitioning"] == partitioning_pin(2)
    batches = manifest["batches"]
    assert [b["batch"] for b in batches] == ["batch-01-of-02", "batch-02-of-02"]
    assert sum(b["questions"] for b in batches) == 31
    fingerprints = {b["graph"]["fingerprint"] for b in batches}
    assert len(fingerprints) == 2 and all(f.startswith("sha256:") for f in fingerprints)
    assert manifest["pins"]["graph"]["fingerprint"].startswith("batches:")
    # Every batch's stages are this run's own, and listed per batch.
    instance = dg.DagsterInstance.from_config(str(Path(home[1]["DAGSTER_HOME"])))
    chain = manifest["chain"]
    for b in batches:
        for stage, run_id in b["runs"].items():
            run = instance.get_run_by_id(run_id)
            assert run is not None and run.tags["eval_pipeline/chain_run"] == chain, stage
            assert run.tags["dagster/partition"] == b["batch"]
            assert manifest["stages"][f"{stage} [{b['batch']}]"]["run_id"] == run_id
    assert_summary_recomputes(two)
    # The one-batch run pins one batch, and comparing the two is refused naming the pin.
    assert json.loads((one / "manifest.json").read_text())["pins"]["partitioning"] == (
        partitioning_pin(1)
    )
    res = subprocess.run(
        [EXE, "compare", str(one), str(two)], env=home[1], capture_output=True, text=True
    )
    assert res.returncode != 0 and "partitioning" in res.stderr


def test_each_question_searched_its_whole_haystack_on_its_batchs_instance(home, runs):
    root, _ = home
    two, one, _ = runs
    by_id = {r["question_id"]: r for r in read_jsonl(one / "results.jsonl")}
    rows = list(read_jsonl(two / "results.jsonl"))
    assert {r["question_id"] for r in rows} == set(by_id)
    stores = {b.index: _store(root, b.index) for b in batch_keys(2)}
    try:
        for r in rows:
            q = r["question_id"]
            haystack = {
                s["id"]
                for s in stores[batch_index(q, 2)].read(
                    "MATCH (:Question {question_id: $q})-[:HAYSTACK]->(s:Session) "
                    "RETURN s.session_id AS id",
                    {"q": q},
                )
            }
            # Scope "question": only its own haystack is searched, all of it is there, and
            # the one-instance run searched the same sessions.
            assert {t.split("#")[0] for t in r["retrieved_turn_ids"]} <= haystack, q
            assert {t.split("#")[0] for t in by_id[q]["retrieved_turn_ids"]} <= haystack, q
    finally:
        for store in stores.values():
            store.close()


def test_a_foreign_instance_among_the_batches_refuses_the_run_before_any_wipe(home, runs):
    root, env = home
    third = GraphStore(data_dir=str(root / "state" / "graph" / "arcadedb-batch03"), database="eval")
    try:
        third.ensure_running()
        third.autocommit("CREATE (:Someone {name: 'keep me'})")
        before = _store(root, 1)
        try:
            held = before.read("MATCH (q:Question) RETURN count(q) AS n")[0]["n"]
        finally:
            before.close()
        res = run(env, "--batches", "3")
        assert res.returncode == 3, res.stderr[-2000:]
        assert "arcadedb-batch03" in res.stderr or "someone else" in res.stderr.lower()
        left = third.read("MATCH (n:Someone) RETURN n.name AS name")
        assert [r["name"] for r in left] == ["keep me"]
        after = _store(root, 1)
        try:
            assert after.read("MATCH (q:Question) RETURN count(q) AS n")[0]["n"] == held
        finally:
            after.close()
    finally:
        third.close()


def test_a_batch_uri_without_its_placeholder_is_refused_before_anything_runs(home):
    _, env = home
    res = run(env, "--batches", "2", "--backend", "memgraph", "--graph-uri", "bolt://x:7687")
    assert res.returncode == 2
    assert (
        res.stderr.strip()
        .splitlines()[-1]
        .endswith("put {batch} in --graph-uri (e.g. bolt://memgraph-{batch}:7687)")
    )
    assert BatchKey.parse("batch-02-of-02").batches == 2


def test_a_batch_worker_killed_mid_stage_fails_its_batch_and_scores_nothing(home, runs):
    """The OOM killer takes batch 2's worker during retrieval: batch 1 still finishes, the run
    fails naming batch 2's stage, that stage's run is marked failed (not left running), the
    failure is recorded, and no bundle is written from half the questions."""
    root, env = home
    before = {p for p in (root / "state" / "runs").iterdir() if (p / "manifest.json").exists()}
    res = run(
        env,
        "--batches",
        "2",
        "--retriever",
        "eval_pipeline_tests.flaky_plugins:KilledInBatchTwoRetriever",
    )
    assert res.returncode == 1, res.stderr[-2000:]
    last = res.stderr.strip().splitlines()[-1]
    assert "stage retrieval_results [batch-02-of-02] failed: the batch worker died" in last
    assert "[batch-01-of-02] [3/3] retrieval_results: ok" in res.stderr
    after = {p for p in (root / "state" / "runs").iterdir() if (p / "manifest.json").exists()}
    assert after == before
    instance = dg.DagsterInstance.from_config(env["DAGSTER_HOME"])
    try:
        runs_ = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": "batch-02-of-02"}))
        assert runs_ and all(r.is_finished for r in runs_)
        assert runs_[0].status == dg.DagsterRunStatus.FAILURE
    finally:
        instance.dispose()
    failures = [
        json.loads(line)
        for line in (root / "state" / "ops" / "failures.jsonl").read_text().splitlines()
    ]
    assert any("the batch worker died" in (f.get("message") or "") for f in failures)
