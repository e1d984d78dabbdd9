"""`eval-pipeline run --batches 2`, as a user runs it: two embedded graph servers, each
batch's stages in a process of its own, one scored run over both. Real servers, real Dagster
instance; the one-batch run of the same corpus is the reference.

The chains run in this process (`chain_runner`), all on one module chain: the batch workers are
real processes all the same (spawned by the chain, their output captured with the chain's), and
the batch servers `<session graph dir>-batchNN` are started once for the module and stopped at
its end."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.corpus.batches import BatchKey, batch_index, batch_keys, partitioning_pin
from eval_pipeline.corpus.canaries import is_canary, load_canaries
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.graph import server
from eval_pipeline.graph.store import GraphStore
from eval_pipeline_tests.bundle_checks import assert_summary_recomputes
from eval_pipeline_tests.chain_runner import Chain
from eval_pipeline_tests.conftest import new_chain

CANARY_IDS = {q.question_id for q in load_canaries().questions}


def batch_dir(chain: Chain, batch: int) -> Path:
    """The embedded server of question batch `batch` (GraphConfig.batch_config)."""
    return Path(f"{chain.graph['data_dir']}-batch{batch:02d}")


def _store(chain: Chain, batch: int) -> GraphStore:
    return GraphStore(
        data_dir=str(batch_dir(chain, batch)), database=chain.graph["database"], heap="512m"
    )


@pytest.fixture(scope="module")
def module_chain(chain_base, graph_dir):
    """This module's chains are seen by other processes (console scripts, the `dagster` CLI,
    batch workers): DAGSTER_HOME on disk."""
    return new_chain(chain_base, graph_dir, persistent=True)


@pytest.fixture(scope="module", autouse=True)
def batch_servers(module_chain):
    yield
    for batch in (1, 2, 3):
        server.stop(batch_dir(module_chain, batch))


@pytest.fixture(scope="module")
def runs(module_chain):
    two = module_chain.run("--batches", "2", "--label", "two")
    assert two.returncode == 0, two.stderr[-3000:]
    one = module_chain.run("--label", "one")
    assert one.returncode == 0, one.stderr[-3000:]
    return two.run_dir, one.run_dir, two


@pytest.mark.slow
def test_each_batch_runs_on_its_own_instance_holding_only_its_questions(module_chain, runs):
    two, one, res = runs
    rows = list(read_jsonl(two / "results.jsonl"))
    questions = {r["question_id"] for r in rows}
    assert len(questions) == len(rows) == 31
    held = {}
    for batch in batch_keys(2):
        store = _store(module_chain, batch.index)
        try:
            ids = {r["q"] for r in store.read("MATCH (q:Question) RETURN q.question_id AS q")}
        finally:
            store.close()
        # Every batch holds every planted canary beside its own questions.
        assert {q for q in ids if is_canary(q)} == CANARY_IDS, batch.key
        ids = {q for q in ids if not is_canary(q)}
        assert ids and all(batch_index(q, 2) == batch.index for q in ids), batch.key
        held[batch.key] = ids
    assert held["batch-01-of-02"].isdisjoint(held["batch-02-of-02"])
    assert set().union(*held.values()) == questions
    # Both batches ran, each stage's line (printed by its batch's worker) naming its batch.
    for batch in batch_keys(2):
        for stage in ("injected_graph", "reconciled_graph", "retrieval_results"):
            assert f"{stage} [{batch.key}]: ok" in res.stderr, res.stderr


@pytest.mark.slow
def test_both_batches_return_every_planted_canary(runs):
    two, _, res = runs
    rows = list(read_jsonl(two / "canaries.jsonl"))
    # Each canary planted in each batch's graph, retrieved and scored there.
    assert sorted(r["key"] for r in rows) == sorted(
        f"{c}@{b.key}" for c in CANARY_IDS for b in batch_keys(2)
    )
    assert all(r["status"] == "returned" for r in rows), rows
    summary = json.loads((two / "summary.json").read_text())["canaries"]
    assert summary["planted"] == 8 and summary["returned"] == 8 and summary["failed"] == []
    assert "canaries: 8 of 8 planted facts returned" in res.stdout


@pytest.mark.slow
def test_one_scored_run_with_per_batch_provenance_and_the_partitioning_pinned(module_chain, runs):
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
    instance = module_chain.instance()
    try:
        chain = manifest["chain"]
        for b in batches:
            for stage, run_id in b["runs"].items():
                run = instance.get_run_by_id(run_id)
                assert run is not None and run.tags["eval_pipeline/chain_run"] == chain, stage
                assert run.tags["dagster/partition"] == b["batch"]
                # Each batch's runs name its graph instance (one run per instance admitted).
                assert run.tags["eval_pipeline/graph_instance"] == f"default/{b['batch']}"
                assert manifest["stages"][f"{stage} [{b['batch']}]"]["run_id"] == run_id
    finally:
        instance.dispose()
    assert_summary_recomputes(two)
    # The one-batch run pins one batch, and comparing the two is refused naming the pin.
    assert json.loads((one / "manifest.json").read_text())["pins"]["partitioning"] == (
        partitioning_pin(1)
    )
    res = module_chain.cli("compare", str(one), str(two))
    assert res.returncode != 0 and "partitioning" in res.stderr


@pytest.mark.slow
def test_each_question_searched_its_whole_haystack_on_its_batchs_instance(module_chain, runs):
    two, one, _ = runs
    by_id = {r["question_id"]: r for r in read_jsonl(one / "results.jsonl")}
    rows = list(read_jsonl(two / "results.jsonl"))
    assert {r["question_id"] for r in rows} == set(by_id)
    stores = {b.index: _store(module_chain, b.index) for b in batch_keys(2)}
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


@pytest.mark.slow
def test_a_foreign_instance_among_the_batches_refuses_the_run_before_any_wipe(module_chain, runs):
    third = GraphStore(
        data_dir=str(batch_dir(module_chain, 3)),
        database=module_chain.graph["database"],
        heap="512m",
    )
    try:
        third.ensure_running()
        third.autocommit("CREATE (:Someone {name: 'keep me'})")
        before = _store(module_chain, 1)
        try:
            held = before.read("MATCH (q:Question) RETURN count(q) AS n")[0]["n"]
        finally:
            before.close()
        res = module_chain.run("--batches", "3")
        assert res.returncode == 3, res.stderr[-2000:]
        assert "arcadedb0-batch03" in res.stderr or "someone else" in res.stderr.lower()
        left = third.read("MATCH (n:Someone) RETURN n.name AS name")
        assert [r["name"] for r in left] == ["keep me"]
        after = _store(module_chain, 1)
        try:
            assert after.read("MATCH (q:Question) RETURN count(q) AS n")[0]["n"] == held
        finally:
            after.close()
    finally:
        third.close()


def test_a_batch_uri_without_its_placeholder_is_refused_before_anything_runs(module_chain):
    res = module_chain.run(
        "--batches", "2", "--backend", "memgraph", "--graph-uri", "bolt://x:7687"
    )
    assert res.returncode == 2
    assert res.stderr_lines[-1].endswith(
        "put {batch} in --graph-uri (e.g. bolt://memgraph-{batch}:7687)"
    )
    assert BatchKey.parse("batch-02-of-02").batches == 2


@pytest.mark.slow
def test_a_batch_worker_killed_mid_stage_fails_its_batch_and_scores_nothing(module_chain):
    """The OOM killer takes batch 2's worker during retrieval: batch 1 still finishes, the run
    fails naming batch 2's stage, that stage's run is marked failed (not left running), the
    failure is recorded, and no bundle is written from half the questions."""
    before = module_chain.bundles()
    res = module_chain.run(
        "--batches",
        "2",
        "--retriever",
        "eval_pipeline_tests.flaky_plugins:KilledInBatchTwoRetriever",
    )
    assert res.returncode == 1, res.stderr[-2000:]
    last = res.stderr_lines[-1]
    assert "[batch-02-of-02] failed: the batch worker died" in last
    assert "[3/3] retrieval_results [batch-01-of-02]: ok" in res.stderr
    assert module_chain.bundles() == before
    instance = module_chain.instance()
    try:
        runs_ = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": "batch-02-of-02"}))
        assert runs_ and all(r.is_finished for r in runs_)
        assert runs_[0].status == dg.DagsterRunStatus.FAILURE
    finally:
        instance.dispose()
    failures = [
        json.loads(line)
        for line in (module_chain.state / "ops" / "failures.jsonl").read_text().splitlines()
    ]
    died = [f for f in failures if "the batch worker died" in (f.get("message") or "")]
    assert died
    # The stage named is the one the worker died in (retrieval), not the batch's first.
    assert "stage retrieval_results [batch-02-of-02] failed: the batch worker died" in last
    assert died[-1]["failed_assets"] == ["retrieval_results"]
