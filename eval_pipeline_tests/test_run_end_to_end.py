"""`eval-pipeline run` end to end, as a user runs it: offline on the bundled sample, then
with a judge whose provider is down. Real embedded graph server, real Dagster instance; the
chains run in this process through the CLI's entry point (`chain_runner`), one module's
chains on one state dir, and one offline run through the console script, as a shell runs it."""

from __future__ import annotations

import json

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.runs.bundle import BUNDLE_FILES, CANARIES_FILE
from eval_pipeline.score.verdicts import method_hash
from eval_pipeline_tests.bundle_checks import assert_summary_recomputes
from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

KEY = "sk-test-e2e-LEAKCANARY-31415926"


@pytest.fixture(scope="module")
def offline_run(module_chain):
    res = module_chain.run("--label", "offline")
    assert res.returncode == 0, res.stderr[-3000:]
    return res.run_dir, res


def test_offline_run_writes_a_complete_bundle(offline_run):
    run_dir, res = offline_run
    # The four bundle files, the planted canaries' rows, and the HTML report run_comparison
    # links to.
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(
        [*BUNDLE_FILES, CANARIES_FILE, "report.html"]
    )
    html = (run_dir / "report.html").read_text()
    assert "<svg" in html and "https://" not in html
    assert "tier 1: 31 questions" in res.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    pins = manifest["pins"]
    assert pins["corpus"]["upstream"]["source"] == "sample"
    assert pins["graph"]["backend"] == "arcadedb" and pins["graph"]["fingerprint"]
    assert pins["reconciler"]["name"] == "extractive"
    assert pins["retriever"]["retriever"] == "fulltext" and pins["scope"] == "question"
    # No judge model: the default verdict method (`match`) judges the answers all the same;
    # what needs a model (the criteria judge, deepeval's metrics) is not pinned.
    judge = pins["judge"]
    assert judge["model"] == "offline" and judge["role"] is None
    assert judge["prompt_hash"] == method_hash("match") and judge["method"]["verdict"] == "match"
    assert judge["criteria_prompt_hash"] is None and "invariant_prompt_hash" not in judge
    assert judge["agreement"]["status"] in ("none", "checked")
    # Which method decided and why, in the manifest, summary.json and the printed summary.
    chosen = "match (the rules, no model; the default with no judge model)"
    assert judge["verdict"] == {"method": "match", "chosen": "default", "text": chosen}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["judge"] == {"model": "offline", "verdict": judge["verdict"]}
    assert f"judge offline, verdict {chosen}: " in res.stdout
    assert pins["tokenizer"]["tokenizer"] == "o200k_base"
    assert set(manifest["stages"]) >= {"injected_graph", "retrieval_results", "scored_run"}
    rows = list(read_jsonl(run_dir / "results.jsonl"))
    hyps = list(read_jsonl(run_dir / "hypotheses.jsonl"))
    assert len(rows) == len(hyps) == 31
    # The upstream scorer's two fields, and the record's version (the scorer ignores it).
    assert set(hyps[0]) == {"schema_version", "question_id", "hypothesis"}
    judged = [r["metrics"]["answer_judge"] for r in rows]
    assert all(m["score"] in (0.0, 1.0) and m["gating"] for m in judged)  # match: rules
    assert all(r["metrics"]["answer_coverage"]["score"] is None for r in rows)  # needs a model


def test_every_question_not_covered_has_one_failure_stage(offline_run):
    """Issue 26: the diagnosis on the sample, as the bundle and its report hold it."""
    run_dir, res = offline_run
    rows = list(read_jsonl(run_dir / "results.jsonl"))
    for r in rows:
        assert (r["failure_stage"] is None) == (r["covered"] is not False), r["question_id"]
    # Every answerable row says what memory held of its evidence; extractive memory chunks
    # every turn, so a miss on this memory is retrieval's or the reader's, never formation's.
    answerable = [r for r in rows if not r["abstention"]]
    assert all(r["evidence_memory"]["held"] for r in answerable)
    assert {r["failure_stage"] for r in rows} - {None} <= {"retrieval", "reader"}
    funnel = json.loads((run_dir / "summary.json").read_text())["tiers"]["1"]["funnel"]
    total = funnel["answerable"]
    assert total["questions"] == len(answerable)
    assert total["retrieval"] + total["reader"] == sum(
        1 for r in answerable if r["covered"] is False
    )
    assert sum(c["questions"] for c in funnel["by_type"].values()) == len(answerable)
    html = (run_dir / "report.html").read_text()
    assert "Where questions failed" in html and "retrieval (held, not returned)" in html


def test_summary_recall_recomputes_from_results(offline_run):
    assert_summary_recomputes(offline_run[0])


@pytest.mark.slow
def test_judge_outage_gives_unscored_not_zero_and_no_key_in_bundle(module_chain, offline_run):
    with WireServer(responder=lambda r: ScriptedReply(status=500, text="down")) as server:
        cfg = module_chain.root / "judge.yaml"
        cfg.write_text(f"judge: openai_compatible:judge-model@{server.openai_base_url}\n")
        res = module_chain.run(
            "--config",
            str(cfg),
            "--label",
            "outage",
            # Every question's judge call (and its retries' backoff) at once: seconds, not a
            # minute of waves.
            "--judge-concurrency",
            "32",
            "--judge-verdict",  # the model decides every verdict, so an outage leaves none
            "reference",
            env={"OPENAI_API_KEY": KEY},  # in the environment, never in the bundle
        )
        assert server.request_count > 0  # the judge really was called
    # A judge that scored nothing: the bundle is written, saying incomplete, and the run
    # exits with its own code (4), never 0.
    assert res.returncode == 4, res.stderr[-3000:]
    run_dir = res.run_dir
    full = json.loads((run_dir / "summary.json").read_text())
    assert full["status"] == "incomplete" and full["incomplete"]["by_cause"] == {"judge": 31}
    assert "run incomplete: 31 question(s)" in res.stderr
    summary = full["tiers"]["1"]
    assert summary["coverage"] is None  # nothing scored: a None rate, not 0%
    assert summary["counts"]["covered"] == 0 and summary["counts"]["unscored"] > 0
    rows = list(read_jsonl(run_dir / "results.jsonl"))
    assert all(r["metrics"]["answer_judge"]["score"] is None for r in rows)
    assert any(r["metrics"]["answer_judge"]["error"] for r in rows)
    assert "coverage unscored" in res.stdout
    for path in run_dir.rglob("*"):
        assert KEY not in path.read_text(), path
    # The offline run's bundle was not touched by the second run.
    assert offline_run[0].exists() and offline_run[0] != run_dir


def test_bad_option_is_one_clear_line(module_chain):
    res = module_chain.run("--judge", "nope:x")
    assert res.returncode == 2
    assert res.stderr_lines[-1].startswith("eval-pipeline: error: option --judge")


@pytest.mark.slow
def test_repeats_calibrate_and_compare(module_chain, offline_run):
    """`run --repeat 2` gives two bundles over one graph; calibrate and compare accept them."""
    res = module_chain.run("--repeat", "2", "--label", "rep")
    assert res.returncode == 0, res.stderr[-3000:]
    first, second = res.run_dirs
    assert first.is_dir() and second.is_dir() and first != second
    floor = module_chain.root / "floor.json"
    cal = module_chain.cli("calibrate", str(first), str(second), "--out", str(floor))
    assert cal.returncode == 0, cal.stderr
    cmp = module_chain.cli("compare", str(offline_run[0]), str(second), "--noise-floor", str(floor))
    assert cmp.returncode == 0, cmp.stderr
    assert "verdict: INCONCLUSIVE" in cmp.stdout  # an identical offline configuration


def test_refuses_to_start_while_deepeval_could_upload(module_chain):
    res = module_chain.run(env={"CONFIDENT_API_KEY": "confident-test-key"})
    assert res.returncode == 2
    last = res.stderr_lines[-1]
    assert last.startswith("eval-pipeline: error: CONFIDENT_API_KEY is set")
    assert "confident-test-key" not in res.stderr


@pytest.mark.slow
def test_the_console_script_runs_a_chain_offline(module_chain):
    """The installed `eval-pipeline` as a shell runs it: exit 0, a line per stage on stderr,
    and the bundle the last line of stdout."""
    res = module_chain.shell_run("--sample", "10", "--label", "shell")
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.run_dir.parent == module_chain.state / "runs"
    assert (res.run_dir / "manifest.json").is_file() and (res.run_dir / "report.html").is_file()
    assert len(res.stage_lines) == 9 and all(": ok (" in x for x in res.stage_lines)
    assert "tier 1: 10 questions" in res.stdout and "Traceback" not in res.stderr
