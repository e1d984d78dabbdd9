"""Trustworthy numbers at the seams, end to end as a user meets them (issue 11).

Every test drives the real CLIs (`eval-pipeline`, `dagster asset materialize`) in subprocesses
against the real embedded graph server and a real Dagster instance: an infrastructure
failure is unscored (never a miss), a run's pins are its own, one chain holds an instance at a
time, the memory in the graph is what the pins say, and repeats are fresh samples.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.score.retrieval_metrics import LEVELS, VARIANTS
from eval_pipeline.settings import REPO_DIR
from eval_pipeline_tests.bundle_checks import assert_summary_recomputes
from eval_pipeline_tests.flaky_plugins import flaky_fate
from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

BIN = Path(sys.executable).parent
EXE = str(BIN / "eval-pipeline")
EXIT_REFUSED, EXIT_INCOMPLETE = 3, 4


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("trust")
    env = {
        **{k: v for k, v in os.environ.items() if k != "CONFIDENT_API_KEY"},
        "EVAL_PIPELINE_HOME": str(root / "state"),
        "DAGSTER_HOME": str(root / "state" / "dagster_home"),
        # The plug-ins of these tests live in the test package.
        "PYTHONPATH": str(REPO_DIR),
    }
    yield root, env
    subprocess.run([EXE, "graph", "stop"], env=env, capture_output=True, timeout=60)


def run(env, *args, timeout=600):
    return subprocess.run(
        [EXE, "run", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def bundle_of(res) -> Path:
    return Path(res.stdout.strip().splitlines()[-1])


def rows_of(run_dir: Path) -> dict[str, dict]:
    return {r["question_id"]: r for r in read_jsonl(run_dir / "results.jsonl")}


def materialize(env, select: str, config: dict, tmp: Path, timeout=600, partition=None):
    """`dagster asset materialize`; the graph-bound assets are partitioned by question batch,
    so a selection holding one names the batch (`batch-01-of-01`: one graph instance)."""
    cfg = tmp / f"config-{time.monotonic_ns()}.json"
    cfg.write_text(json.dumps(config))
    return subprocess.run(
        [
            str(BIN / "dagster"),
            "asset",
            "materialize",
            "-m",
            "eval_pipeline.definitions",
            "--select",
            select,
            "-c",
            str(cfg),
            *(["--partition", partition] if partition else []),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_graph_server_gone_is_unscored_and_a_plugin_bug_is_a_miss(home):
    _, env = home
    res = run(env, "--retriever", "eval_pipeline_tests.flaky_plugins:FlakyRetriever")
    assert res.returncode == EXIT_INCOMPLETE, res.stderr[-3000:]
    run_dir = bundle_of(res)  # the bundle path is still the last line
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


def test_unreadable_llm_cache_is_unscored_not_recall_zero(home, tmp_path):
    root, env = home
    cache = root / "state" / "llm_cache.sqlite3"  # the default cache of the state dir
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(b"this is not an SQLite database" * 100)
    try:
        with WireServer(responder=lambda r: ScriptedReply(text="an answer")) as server:
            cfg = tmp_path / "run.yaml"
            cfg.write_text(f"reader: openai_compatible:reader@{server.openai_base_url}\n")
            res = run(env, "--config", str(cfg))
            assert server.request_count == 0  # the cache failed first: nothing was asked
    finally:
        cache.unlink()
    assert res.returncode == EXIT_INCOMPLETE, res.stderr[-3000:]
    rows = rows_of(bundle_of(res))
    for row in rows.values():
        assert row["covered"] is None
        assert {f["cause"] for f in row["infra_failures"]} == {"llm_cache"}
        assert "retrieval: " not in " ".join(row["errors"])
    summary = json.loads((bundle_of(res) / "summary.json").read_text())
    assert summary["incomplete"]["by_cause"] == {"llm_cache": len(rows)}
    # Retrieval itself worked: its recall is measured, not 0 and not dropped.
    assert summary["tiers"]["1"]["retrieval"]["turn"]["all"]["recall_all@10"]["mean"] > 0


def graph_labels(env) -> dict[str, int]:
    """Node counts by label, from `eval-pipeline graph status`."""
    out = subprocess.run(
        [EXE, "graph", "status"], env=env, capture_output=True, text=True, timeout=120
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("nodes:"))
    inner = line.split("(", 1)[1].rstrip(")")
    return {name: int(n) for name, n in (part.rsplit(" ", 1) for part in inner.split(", "))}


def newest_bundle(root: Path, before: set[Path]) -> Path:
    (new,) = bundles(root) - before
    return new


def bundles(root: Path) -> set[Path]:
    """Run bundles (not the comparisons and noise floors kept beside them)."""
    runs = root / "state" / "runs"
    if not runs.is_dir():
        return set()
    return {p for p in runs.iterdir() if (p / "manifest.json").is_file()}


def test_reconciler_switch_through_dagster_redoes_the_memory(home, tmp_path):
    """`dagster asset materialize --select 'reconciled_graph*'` with reconciler none must not
    keep the extractive memory, and the bundle pins what is in the graph."""
    root, env = home
    res = run(env, "--label", "extractive")
    assert res.returncode == 0, res.stderr[-3000:]
    first = json.loads((bundle_of(res) / "manifest.json").read_text())
    assert first["pins"]["reconciler"]["name"] == "extractive"
    assert graph_labels(env).get("Chunk", 0) > 0
    before = bundles(root)
    mat = materialize(
        env,
        "reconciled_graph*",
        {"resources": {"reconcile": {"config": {"reconciler": "none"}}}},
        tmp_path,
        partition="batch-01-of-01",
    )
    assert mat.returncode == 0, mat.stderr[-3000:]
    labels = graph_labels(env)
    assert labels.get("Chunk", 0) == 0 and labels.get("Episode", 0) == 0
    manifest = json.loads((newest_bundle(root, before) / "manifest.json").read_text())
    assert manifest["pins"]["reconciler"]["name"] == "none"
    (config,) = manifest["memory"]["configurations"]
    assert config["pins"]["name"] == "none" and manifest["memory"]["pending"] == 0
    # Every stage this bundle's numbers came from is named with its own Dagster run: the
    # reconciliation is this run's, the injection the first chain's.
    stages = manifest["stages"]
    assert stages["reconciled_graph"]["run_id"] == manifest["dagster_run_id"]
    assert stages["injected_graph"]["run_id"] == first["stages"]["injected_graph"]["run_id"]
    assert stages["reconciled_graph"]["run_id"] != first["stages"]["reconciled_graph"]["run_id"]


def test_downstream_over_a_graph_of_other_fixtures_is_refused(home, tmp_path):
    """New goldens and fixtures, then only retrieval and scoring: the graph does not hold the
    current fixtures, so a blocking check refuses and no bundle is written."""
    root, env = home
    assert run(env).returncode == 0
    mat = materialize(
        env,
        "goldens,session_fixtures",
        {"resources": {"corpus": {"config": {"sample": 10, "seed": 3}}}},
        tmp_path,
    )
    assert mat.returncode == 0, mat.stderr[-3000:]
    before = bundles(root)
    mat = materialize(env, "retrieval_results,scored_run", {}, tmp_path, partition="batch-01-of-01")
    assert mat.returncode != 0
    assert "retrieval_graph_is_current" in mat.stderr + mat.stdout
    assert bundles(root) == before  # nothing scored a graph that is not this run's


def test_two_chains_on_one_instance_one_is_refused_naming_the_holder(home):
    root, env = home
    run(env)  # the server and the instance exist; the two below race for the lease only
    procs = [
        subprocess.Popen(
            [EXE, "run", "--label", f"race{i}"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = [(p.wait(timeout=600), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in outs)
    assert codes == [0, EXIT_REFUSED], [(c, e[-500:]) for c, _, e in outs]
    _, _, refused_err = next(o for o in outs if o[0] == EXIT_REFUSED)
    last = refused_err.strip().splitlines()[-1]
    assert last.startswith("eval-pipeline: error: ") and "is in use by" in last
    assert "eval-pipeline run" in last and "pid" in last
    # With --wait-for-graph the second chain waits instead, and both finish.
    procs = [
        subprocess.Popen(
            [EXE, "run", "--wait-for-graph", "300"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    assert [p.wait(timeout=900) for p in procs] == [0, 0]


def calibrate(env, *runs: Path):
    return subprocess.run(
        [EXE, "calibrate", *map(str, runs)], env=env, capture_output=True, text=True, timeout=120
    )


def _reader_env(server: WireServer, env: dict, tmp_path: Path) -> Path:
    cfg = tmp_path / "reader.yaml"
    cfg.write_text(f"reader: openai_compatible:reader@{server.openai_base_url}\n")
    return cfg


def test_repeats_are_fresh_samples_and_a_salt_reproduces_them(home, tmp_path):
    root, env = home
    replies = iter(range(10**6))
    with WireServer(responder=lambda r: ScriptedReply(text=f"answer {next(replies)}")) as server:
        cfg = _reader_env(server, env, tmp_path)
        res = run(env, "--config", str(cfg), "--repeat", "2", "--label", "rep")
        assert res.returncode == 0, res.stderr[-3000:]
        first, second = (Path(p) for p in res.stdout.strip().splitlines()[-2:])
        calls_one = server.request_count
        questions = len(rows_of(first))
        assert calls_one == 2 * questions  # each repeat asked the model itself
        m1, m2 = (json.loads((d / "manifest.json").read_text()) for d in (first, second))
        salt = m1["repeat"]["salt"]
        assert m2["repeat"]["salt"] == salt
        assert (m1["repeat"]["sample_identity"], m2["repeat"]["sample_identity"]) == (
            f"{salt}/1",
            f"{salt}/2",
        )
        # Repeating the configuration again is a fresh sample...
        res = run(env, "--config", str(cfg), "--repeat", "2")
        assert res.returncode == 0 and server.request_count == 2 * calls_one
        # ...and giving the salt back reproduces the repeats from the cache.
        res = run(env, "--config", str(cfg), "--repeat", "2", "--repeat-salt", salt)
        assert res.returncode == 0 and server.request_count == 2 * calls_one
        again = Path(res.stdout.strip().splitlines()[-2])
    first_answers = {q: r["answer"] for q, r in rows_of(first).items()}
    assert {q: r["answer"] for q, r in rows_of(again).items()} == first_answers
    cal = calibrate(env, first, second)
    assert cal.returncode == 0, cal.stderr
    assert "noise_floors" in cal.stdout  # stored per configuration, not one shared file
    # A repeat and its own reproduction are not two samples: refused, and said why.
    cal = calibrate(env, first, again)
    assert cal.returncode == EXIT_REFUSED and "sample identity" in cal.stderr


def test_repeats_can_include_reconciliation(home):
    _, env = home
    res = run(env, "--repeat", "2", "--repeat-reconcile", "--label", "reprec")
    assert res.returncode == 0, res.stderr[-3000:]
    first, second = (Path(p) for p in res.stdout.strip().splitlines()[-2:])
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
