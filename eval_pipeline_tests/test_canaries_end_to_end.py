"""Canaries through `eval-pipeline run`, as a user runs it: planted beside the bundled
sample's haystacks, retrieved by the configured memory and retriever, scored apart. Real
embedded graph server, real Dagster instance, the chains in this process (`chain_runner`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.corpus.canaries import load_canaries
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.score.canaries import BROKEN

CANARY_IDS = sorted(q.question_id for q in load_canaries().questions)
SAMPLE = ("--sample", "3")
FORGETFUL = "eval_pipeline_tests.canary_plugins:ForgetfulReconciler"
OVERLAP = "eval_pipeline_tests.canary_plugins:HaystackOverlapRetriever"


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("memory", ["none", "extractive", "consolidating"])
def test_every_canary_is_returned_and_answered_by_a_working_memory(module_chain, memory):
    res = module_chain.run(*SAMPLE, "--memory", memory, "--label", f"canaries-{memory}")
    assert res.returncode == 0, res.stderr[-3000:]
    rows = list(read_jsonl(res.run_dir / "canaries.jsonl"))
    assert sorted(r["canary_id"] for r in rows) == CANARY_IDS
    assert all(r["status"] == "returned" and r["answered"] for r in rows), rows
    canaries = _summary(res.run_dir)["canaries"]
    assert canaries["planted"] == canaries["returned"] == canaries["answered"] == 4
    assert "canaries: 4 of 4 planted facts returned, 4 answered" in res.stdout
    # Scored apart: no canary among the tiers' rows, the answers the upstream scorer reads or
    # the question set; the set is pinned.
    for name in ("results.jsonl", "hypotheses.jsonl"):
        assert not any(r["question_id"] in CANARY_IDS for r in read_jsonl(res.run_dir / name))
    manifest = json.loads((res.run_dir / "manifest.json").read_text())
    assert manifest["pins"]["corpus"]["canaries"]["sha256"] == load_canaries().sha256
    assert "Canaries" in (res.run_dir / "report.html").read_text()


@pytest.mark.slow
def test_a_memory_that_stores_nothing_fails_canaries_returned_and_the_run_says_so(module_chain):
    res = module_chain.run(*SAMPLE, "--memory", FORGETFUL, "--label", "forgetful")
    assert res.returncode == 1, res.stderr[-3000:]
    # The bundle is written and its summary printed; the run fails on the check, saying why.
    canaries = _summary(res.run_dir)["canaries"]
    assert canaries["returned"] == 0 and sorted(canaries["failed"]) == CANARY_IDS
    assert "canaries: 4 of 4 planted facts not returned" in res.stdout
    last = res.stderr_lines[-1]
    assert "scored_run failed" in last and "canaries_returned" in res.stderr
    assert BROKEN in last
    rows = list(read_jsonl(res.run_dir / "canaries.jsonl"))
    assert {r["status"] for r in rows} == {"failed"} and not any(r["infra_failures"] for r in rows)
    # The diagnosis (issue 26): nothing was stored, so every answerable question that was not
    # covered failed at formation, and its evidence memory says so.
    answerable = [r for r in read_jsonl(res.run_dir / "results.jsonl") if not r["abstention"]]
    assert answerable and all(r["covered"] is False for r in answerable)
    assert {r["failure_stage"] for r in answerable} == {"formation"}
    assert all(set(r["evidence_memory"]["held"].values()) == {"absent"} for r in answerable)
    funnel = _summary(res.run_dir)["tiers"]["1"]["funnel"]["answerable"]
    assert funnel["formation"] == len(answerable) and funnel["covered"] == 0


@pytest.mark.slow
def test_the_tier_rows_are_exactly_those_of_a_run_without_canaries(module_chain):
    """With a retriever that reads only the question's own haystack, planting canaries changes
    no tier row and no summary figure. (BM25 reads corpus-wide statistics, which the planted
    turns are part of: hence the canary set is a comparability pin, checked below.)"""

    def run(*flags: str) -> Path:
        res = module_chain.run("--sample", "6", "--retriever", OVERLAP, *flags)
        assert res.returncode == 0, res.stderr[-3000:]
        return res.run_dir

    def rows(run_dir: Path) -> list[dict]:
        out = []
        for r in read_jsonl(run_dir / "results.jsonl"):
            r.pop("latency_ms")  # wall-clock times, the one thing that may differ
            for q in r["queries"]:
                q.pop("latency_ms", None)
            out.append(r)
        return out

    with_canaries, without = run("--label", "on"), run("--no-canaries", "--label", "off")
    assert (with_canaries / "canaries.jsonl").is_file()
    assert not (without / "canaries.jsonl").exists()
    assert "canaries" not in _summary(without)
    assert rows(with_canaries) == rows(without)
    assert _summary(with_canaries)["tiers"] == _summary(without)["tiers"]
    assert _summary(with_canaries)["canaries"]["failed"] == []
    refused = module_chain.cli("compare", str(without), str(with_canaries))
    assert refused.returncode != 0 and "corpus.canaries" in refused.stderr


@pytest.mark.parametrize(
    ("value", "expected"),
    [("maybe", "option --canaries: Input should be a valid boolean"), ("[1]", "--canaries")],
)
def test_a_bad_canaries_value_is_one_line_before_anything_runs(module_chain, value, expected):
    cfg = module_chain.root / "bad-canaries.yaml"
    cfg.write_text(f"canaries: {value}\n")
    before = module_chain.bundles()
    res = module_chain.run("--config", str(cfg))
    assert res.returncode == 2
    assert len(res.stderr_lines) == 1 and expected in res.stderr_lines[0], res.stderr
    assert module_chain.bundles() == before
