"""Trustworthy numbers at the seams, end to end as a user meets them (issue 11).

Every test drives the real CLIs (`eval-pipeline`, `dagster asset materialize`) against the real
embedded graph server and a real Dagster instance: an infrastructure failure is unscored (never
a miss), a run's pins are its own, one chain holds an instance at a time, the memory in the
graph is what the pins say, and repeats are fresh samples. The chains run in this process
through the CLIs' entry points (`chain_runner`), all on one module chain (one state dir, one
Dagster instance, one graph database); the race runs chains in processes of their own.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.assets.tags import CHAIN_TAG
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.score.retrieval_metrics import LEVELS, VARIANTS
from eval_pipeline_tests.bundle_checks import assert_summary_recomputes
from eval_pipeline_tests.chain_runner import Chain, finished
from eval_pipeline_tests.conftest import new_chain
from eval_pipeline_tests.flaky_plugins import flaky_fate
from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

# Whole chains, some from other processes: the full suite runs them, `make test-fast` not.
pytestmark = pytest.mark.slow

EXIT_REFUSED, EXIT_INCOMPLETE = 3, 4


def rows_of(run_dir: Path) -> dict[str, dict]:
    return {r["question_id"]: r for r in read_jsonl(run_dir / "results.jsonl")}


def materialize(chain: Chain, select: str, config: dict, partition=None):
    """`dagster asset materialize` on the chain's instance and graph; the graph-bound assets
    are partitioned by question batch, so a selection holding one names the batch
    (`batch-01-of-01`: one graph instance)."""
    resources = {**config.get("resources", {}), **chain.graph_section()}
    cfg = chain.root / f"config-{time.monotonic_ns()}.json"
    cfg.write_text(json.dumps({"resources": resources}))
    return chain.dagster(
        "asset",
        "materialize",
        "-m",
        "eval_pipeline.definitions",
        "--select",
        select,
        "-c",
        str(cfg),
        *(["--partition", partition] if partition else []),
    )


@pytest.fixture(scope="module")
def module_chain(chain_base, graph_dir):
    """The completed chain other processes look at (console scripts and the `dagster` CLI
    beside it): DAGSTER_HOME on disk. The other tests run chains of their own, in memory."""
    return new_chain(chain_base, graph_dir, persistent=True)


@pytest.fixture(scope="module")
def completed_chain(module_chain):
    """One complete offline chain on the module's instance and graph (extractive memory)."""
    res = module_chain.run("--label", "extractive")
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def test_graph_server_gone_is_unscored_and_a_plugin_bug_is_a_miss(chain):
    # Without canaries: the flaky retriever's bugs would also lose a planted fact, and this
    # test is about whose failure a question's was.
    res = chain.run(
        "--retriever", "eval_pipeline_tests.flaky_plugins:FlakyRetriever", "--no-canaries"
    )
    assert res.returncode == EXIT_INCOMPLETE, res.stderr[-3000:]
    run_dir = res.run_dir  # the bundle path is still the last line
    assert "run incomplete" in res.stderr
    rows = rows_of(run_dir)
    fates = {qid: flaky_fate(qid) for qid in rows}
    assert {"unavailable", "bug", "ok"} <= set(fates.values())
    for qid, row in rows.items():
        if fates[qid] == "unavailable":
            # The pipeline's infrastructure failed: unscored, never 0 recall or a miss.
            assert row["covered"] is None and row["infra_failures"], qid
            assert row["infra_failures"][0]["cause"] == "graph_server"
            assert all(
                v is None
                for level in LEVELS
                for variant in VARIANTS
                for v in row["retrieval_metrics"][level][variant].values()
            )
            assert row["payload_tokens"] is None
        elif fates[qid] == "bug":
            # The system under test failed: a miss, with its error.
            assert not row["infra_failures"]
            assert any("cannot parse" in e for e in row["errors"])
            if not row["abstention"]:
                assert row["covered"] is False
                assert row["retrieval_metrics"]["turn"]["all"]["recall_all@10"] == 0.0
    summary = json.loads((run_dir / "summary.json").read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    unavailable = sum(1 for f in fates.values() if f == "unavailable")
    assert summary["status"] == manifest["status"] == "incomplete"
    assert summary["incomplete"]["questions"] == unavailable
    assert summary["incomplete"]["by_cause"] == {"graph_server": unavailable}
    # Recall recomputed independently from results.jsonl over answerable questions.
    assert_summary_recomputes(run_dir)


def test_unreadable_llm_cache_is_unscored_not_recall_zero(chain, tmp_path):
    cache = chain.state / "llm_cache.sqlite3"  # the default cache of the state dir
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(b"this is not an SQLite database" * 100)
    try:
        with WireServer(responder=lambda r: ScriptedReply(text="an answer")) as server:
            cfg = tmp_path / "run.yaml"
            cfg.write_text(f"reader: openai_compatible:reader@{server.openai_base_url}\n")
            res = chain.run("--config", str(cfg))
            assert server.request_count == 0  # the cache failed first: nothing was asked
    finally:
        cache.unlink()
    assert res.returncode == EXIT_INCOMPLETE, res.stderr[-3000:]
    rows = rows_of(res.run_dir)
    for row in rows.values():
        assert row["covered"] is None
        assert {f["cause"] for f in row["infra_failures"]} == {"llm_cache"}
        assert "retrieval: " not in " ".join(row["errors"])
    summary = json.loads((res.run_dir / "summary.json").read_text())
    assert summary["incomplete"]["by_cause"] == {"llm_cache": len(rows)}
    # Retrieval itself worked: its recall is measured, not 0 and not dropped.
    assert summary["tiers"]["1"]["retrieval"]["turn"]["all"]["recall_all@10"]["mean"] > 0


def graph_labels(chain: Chain) -> dict[str, int]:
    """Node counts by label, from `eval-pipeline graph status`."""
    res = chain.cli("graph", *chain.graph_options(), "status")
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("nodes:"))
    inner = line.split("(", 1)[1].rstrip(")")
    return {name: int(n) for name, n in (part.rsplit(" ", 1) for part in inner.split(", "))}


def newest_bundle(chain: Chain, before: set[Path]) -> Path:
    (new,) = chain.bundles() - before
    return new


def test_reconciler_switch_through_dagster_redoes_the_memory(module_chain, completed_chain):
    """`dagster asset materialize --select 'reconciled_graph*'` with reconciler none must not
    keep the extractive memory, and the bundle pins what is in the graph."""
    first = json.loads((completed_chain.run_dir / "manifest.json").read_text())
    assert first["pins"]["reconciler"]["name"] == "extractive"
    assert graph_labels(module_chain).get("Chunk", 0) > 0
    before = module_chain.bundles()
    mat = materialize(
        module_chain,
        "reconciled_graph*",
        {"resources": {"reconcile": {"config": {"reconciler": "none"}}}},
        partition="batch-01-of-01",
    )
    assert mat.returncode == 0, mat.stderr[-3000:]
    labels = graph_labels(module_chain)
    assert labels.get("Chunk", 0) == 0 and labels.get("Episode", 0) == 0
    manifest = json.loads((newest_bundle(module_chain, before) / "manifest.json").read_text())
    assert manifest["pins"]["reconciler"]["name"] == "none"
    (config,) = manifest["memory"]["configurations"]
    assert config["pins"]["name"] == "none" and manifest["memory"]["pending"] == 0
    # Every stage this bundle's numbers came from is named with its own Dagster run: the
    # reconciliation is this run's, the injection the first chain's.
    stages = manifest["stages"]
    assert stages["reconciled_graph"]["run_id"] == manifest["dagster_run_id"]
    assert stages["injected_graph"]["run_id"] == first["stages"]["injected_graph"]["run_id"]
    assert stages["reconciled_graph"]["run_id"] != first["stages"]["reconciled_graph"]["run_id"]


def test_downstream_over_a_graph_of_other_fixtures_is_refused(module_chain, completed_chain):
    """New goldens and fixtures, then only retrieval and scoring: the graph does not hold the
    current fixtures, so a blocking check refuses and no bundle is written."""
    # The graph holds the fixtures of the last chain (completed_chain, or a later one).
    mat = materialize(
        module_chain,
        "goldens,session_fixtures",
        {"resources": {"corpus": {"config": {"sample": 10, "seed": 3}}}},
    )
    assert mat.returncode == 0, mat.stderr[-3000:]
    before = module_chain.bundles()
    mat = materialize(module_chain, "retrieval_results,scored_run", {}, partition="batch-01-of-01")
    assert mat.returncode != 0
    assert "retrieval_graph_is_current" in mat.stderr + mat.stdout
    assert module_chain.bundles() == before  # nothing scored a graph that is not this run's


def stage_windows(chain: Chain, chain_runs: list[str]) -> list[tuple[float, float]]:
    """For each eval_chain run: (first start, last end) of the stage runs it launched."""
    instance = chain.instance()
    try:
        windows = []
        for chain_run in chain_runs:
            records = instance.get_run_records(dg.RunsFilter(tags={CHAIN_TAG: chain_run}))
            assert records, chain_run
            windows.append((min(r.start_time for r in records), max(r.end_time for r in records)))
        return windows
    finally:
        instance.dispose()


def chain_runs_started(chain: Chain) -> list[str]:
    instance = chain.instance()
    try:
        runs = instance.get_runs(dg.RunsFilter(job_name="eval_chain"))
        return [r.run_id for r in runs if r.status == dg.DagsterRunStatus.STARTED]
    finally:
        instance.dispose()


@pytest.mark.slow
def test_two_chains_on_one_instance_one_is_refused_naming_the_holder(module_chain, completed_chain):
    # The server and the instance exist (completed_chain); the two below race for the lease
    # only, each the console script in a process of its own.
    # Ten questions: the lease is what is raced for, not the sample.
    procs = [module_chain.spawn_run("--sample", "10", "--label", f"race{i}") for i in range(2)]
    outs = [finished(p) for p in procs]
    codes = sorted(o.returncode for o in outs)
    assert codes == [0, EXIT_REFUSED], [(o.returncode, o.stderr[-500:]) for o in outs]
    refused = next(o for o in outs if o.returncode == EXIT_REFUSED)
    last = refused.stderr_lines[-1]
    assert last.startswith("eval-pipeline: error: ") and "is in use by" in last
    # The holder named: the winner's eval_chain run (what the CLI launched) and its process.
    winner = next(o for o in outs if o.returncode == 0)
    held_by = json.loads((winner.run_dir / "manifest.json").read_text())["chain"]
    assert f"run {held_by} (eval_chain run)" in last and "pid" in last
    assert "Traceback" not in refused.stderr
    # With --wait-for-graph the second chain waits instead, and both finish: one in a process
    # of its own, started first, the other in this process once the first is under way.
    waiting = module_chain.spawn_run(
        "--wait-for-graph", "300", "--sample", "10", "--label", "waits"
    )
    deadline = time.monotonic() + 120
    while not chain_runs_started(module_chain):
        assert waiting.poll() is None and time.monotonic() < deadline, waiting.stderr
        time.sleep(0.2)
    here = module_chain.run("--wait-for-graph", "300", "--sample", "10", "--label", "here")
    there = finished(waiting, 900)
    assert [there.returncode, here.returncode] == [0, 0], there.stderr[-2000:] + here.stderr
    # Both chains ran at once, and their stages did not interleave: one waited for the other.
    chains = [json.loads((r.run_dir / "manifest.json").read_text())["chain"] for r in (there, here)]
    (a_start, a_end), (b_start, b_end) = stage_windows(module_chain, chains)
    assert a_end <= b_start or b_end <= a_start, ((a_start, a_end), (b_start, b_end))


def _reader_config(server: WireServer, tmp_path: Path) -> Path:
    cfg = tmp_path / "reader.yaml"
    cfg.write_text(f"reader: openai_compatible:reader@{server.openai_base_url}\nsample: 10\n")
    return cfg


def test_repeats_are_fresh_samples_and_a_salt_reproduces_them(chain, tmp_path):
    replies = iter(range(10**6))
    with WireServer(responder=lambda r: ScriptedReply(text=f"answer {next(replies)}")) as server:
        cfg = _reader_config(server, tmp_path)
        res = chain.run("--config", str(cfg), "--repeat", "2", "--label", "rep")
        assert res.returncode == 0, res.stderr[-3000:]
        first, second = res.run_dirs
        calls_one = server.request_count
        # Every question and every planted canary, in each repeat.
        questions = len(rows_of(first)) + len(list(read_jsonl(first / "canaries.jsonl")))
        assert calls_one == 2 * questions  # each repeat asked the model itself
        m1, m2 = (json.loads((d / "manifest.json").read_text()) for d in (first, second))
        salt = m1["repeat"]["salt"]
        assert m2["repeat"]["salt"] == salt
        assert (m1["repeat"]["sample_identity"], m2["repeat"]["sample_identity"]) == (
            f"{salt}/1",
            f"{salt}/2",
        )
        # Repeating the configuration again is a fresh sample...
        res = chain.run("--config", str(cfg), "--repeat", "2")
        assert res.returncode == 0 and server.request_count == 2 * calls_one
        # ...and giving the salt back reproduces the repeats from the cache.
        res = chain.run("--config", str(cfg), "--repeat", "2", "--repeat-salt", salt)
        assert res.returncode == 0 and server.request_count == 2 * calls_one
        again = res.run_dirs[0]
    first_answers = {q: r["answer"] for q, r in rows_of(first).items()}
    assert {q: r["answer"] for q, r in rows_of(again).items()} == first_answers
    cal = chain.cli("calibrate", str(first), str(second))
    assert cal.returncode == 0, cal.stderr
    assert "noise_floors" in cal.stdout  # stored per configuration, not one shared file
    # A repeat and its own reproduction are not two samples: refused, and said why.
    cal = chain.cli("calibrate", str(first), str(again))
    assert cal.returncode == EXIT_REFUSED and "sample identity" in cal.stderr


def test_repeats_can_include_reconciliation(chain):
    res = chain.run("--repeat", "2", "--repeat-reconcile", "--sample", "10", "--label", "reprec")
    assert res.returncode == 0, res.stderr[-3000:]
    first, second = res.run_dirs
    manifest = json.loads((second / "manifest.json").read_text())
    before = json.loads((first / "manifest.json").read_text())
    assert manifest["repeat"]["includes_reconcile"] is True
    # The second repeat reconciled afresh, in its own run, under its own sample identity.
    rec, rec_before = manifest["stages"]["reconciled_graph"], before["stages"]["reconciled_graph"]
    assert rec["run_id"] != rec_before["run_id"]
    assert manifest["chain"] == before["chain"]  # one chain: the CLI invocation
    assert (
        manifest["pins"]["reconciler"]["sample_identity"] == manifest["repeat"]["sample_identity"]
    )
