"""`eval-pipeline run --arms floor,ceiling` through the real chain on the bundled sample,
offline: every question answered again by the run's reader with no memory and with its
evidence sessions, judged by the run's judge, shown between the two in the summary, the
report and the CLI's output; and the system's own numbers and pins the same as without arms.
On the whole sample with every other option at its default, floor <= system <= ceiling
(issue 38: the offline reader answers with a sentence, no longer a whole turn). A bad
`--arms` value is refused in one line before anything runs."""

from __future__ import annotations

import html
import json
from statistics import fmean, median

import dagster as dg
import pytest

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.retrieve.reader import ABSTENTION
from eval_pipeline.runs.calibrate import floor_key
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.pins import differing_pins
from eval_pipeline.score.coverage_meaning import OFFLINE_COVERAGE
from eval_pipeline.score.protocol import WITHIN_CEILING
from eval_pipeline_tests.test_cli_truth import NO_KEYS, assert_refused_before_anything_ran

# What the system's row says about the system (its timings aside, which differ run to run).
SYSTEM_FIELDS = (
    "question_id",
    "answer",
    "covered",
    "weakest_link",
    "metrics",
    "retrieved_turn_ids",
    "retrieval_context",
    "payload_tokens",
    "infra_failures",
)


@pytest.mark.parametrize(
    ("value", "says"),
    [("floor,top", "option --arms: unknown arm 'top'"), ("floor,floor", "given twice")],
)
def test_a_bad_arms_value_is_refused_before_anything_runs(chain, value, says):
    res = chain.run("--arms", value, env=NO_KEYS)
    assert_refused_before_anything_ran(chain, res, says)


def _rate(rows: list[dict], arm: str) -> float | None:
    taken = [r["arms"][arm]["covered"] for r in rows if not r["abstention"]]
    taken = [c for c in taken if c is not None]
    return fmean(taken) if taken else None


@pytest.mark.slow
def test_arms_run_offline_beside_the_system_and_change_none_of_its_numbers(chain):
    with_arms = chain.run("--sample", "10", "--arms", "floor,ceiling", "--label", "arms")
    assert with_arms.returncode == 0, with_arms.stderr[-3000:]
    plain = chain.run("--sample", "10", "--label", "plain")
    assert plain.returncode == 0, plain.stderr[-3000:]

    run_dir = with_arms.run_dir
    rows = list(read_jsonl(run_dir / "results.jsonl"))
    assert rows and all(set(r["arms"]) == {"floor", "ceiling"} for r in rows)
    # The offline reader with nothing in front of it abstains, on every question.
    assert {r["arms"]["floor"]["answer"] for r in rows} == {ABSTENTION}
    assert all(r["arms"]["ceiling"]["context_tokens"] > 0 for r in rows)
    summary = json.loads((run_dir / "summary.json").read_text())
    tier = summary["tiers"]["1"]["arms"]
    # The summary's rates recompute from the rows, unscored arm questions left out.
    for arm in ("floor", "ceiling"):
        assert tier["arms"][arm]["coverage"]["rate"] == pytest.approx(_rate(rows, arm))
    assert tier["arms"]["floor"]["coverage"]["rate"] == 0.0
    overall = tier["position"]["overall"]
    assert overall.startswith("system ") and "floor 0.0%" in overall
    assert f"tier 1 reference arms: {overall}" in with_arms.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["arms"]["ran"] == ["floor", "ceiling"]
    assert manifest["arms"]["reader"] == manifest["pins"]["reader"]
    assert manifest["arms"]["questions"] == len(rows)
    assert "<h2>Reference arms</h2>" in (run_dir / "report.html").read_text()

    # The system's numbers and pins are the same with or without the arms.
    a, b = load_run(plain.run_dir), load_run(run_dir)
    assert differing_pins(a, b) == [] and floor_key(a) == floor_key(b)
    assert "arms" not in a.manifest and "arms" not in a.summary["tiers"]["1"]
    base = list(read_jsonl(plain.run_dir / "results.jsonl"))
    assert [{k: r.get(k) for k in SYSTEM_FIELDS} for r in base] == [
        {k: r.get(k) for k in SYSTEM_FIELDS} for r in rows
    ]
    # Every number the same; only where a miss is put may move, from retrieval or formation to
    # the reader, for a question the reader missed with the evidence in front of it too.
    plain_tier = json.loads((plain.run_dir / "summary.json").read_text())["tiers"]["1"]
    system = {k: v for k, v in summary["tiers"]["1"].items() if k not in ("arms", "funnel")}
    assert system == {k: v for k, v in plain_tier.items() if k != "funnel"}
    for r, p in zip(rows, base, strict=True):
        if r["failure_stage"] != p["failure_stage"]:
            assert p["failure_stage"] in ("retrieval", "formation"), p
            assert r["failure_stage"] == "reader" and r["arms"]["ceiling"]["covered"] is False
    assert (
        manifest["llm_usage"]
        == json.loads((plain.run_dir / "manifest.json").read_text())["llm_usage"]
    )


def test_on_the_bundled_sample_the_system_sits_between_its_floor_and_ceiling(chain):
    res = chain.run("--arms", "floor,ceiling")
    assert res.returncode == 0, res.stderr[-3000:]
    rows = list(read_jsonl(res.run_dir / "results.jsonl"))
    tier = json.loads((res.run_dir / "summary.json").read_text())["tiers"]["1"]
    arms = tier["arms"]["arms"]
    system = tier["coverage"]["rate"]
    assert arms["floor"]["coverage"]["rate"] <= system <= arms["ceiling"]["coverage"]["rate"]
    for qtype, est in tier["coverage_by_type"].items():
        assert est["rate"] <= arms["ceiling"]["coverage_by_type"][qtype]["rate"], qtype
    manifest = json.loads((res.run_dir / "manifest.json").read_text())
    assert manifest["protocol"][WITHIN_CEILING]["status"] == "passed"
    assert manifest["pins"]["reader_prompt"]["prompt"] is None  # no prompt: the rules' version

    # Short answers: one sentence each, never a retrieved passage or its timestamp label.
    answers = [r["answer"] for r in rows]
    assert median(len(a.split()) for a in answers) <= 20
    assert not [a for r, a in zip(rows, answers, strict=True) if a in r["retrieval_context"]]
    assert not [a for a in answers if a.startswith("[")]
    # A count across sessions or date arithmetic the reader could not do with the evidence in
    # front of it either is the reader's miss, not retrieval's.
    for r in rows:
        if r["question_type"] in ("multi-session", "temporal-reasoning") and not r["abstention"]:
            assert r["arms"]["ceiling"]["covered"] or r["failure_stage"] == "reader", r
    # What offline coverage measures, said once: on the summary, the report and in the UI.
    assert OFFLINE_COVERAGE in res.stdout
    assert html.escape(OFFLINE_COVERAGE) in (res.run_dir / "report.html").read_text()
    event = chain.instance().get_latest_materialization_event(dg.AssetKey("scored_run"))
    assert event.asset_materialization.metadata["coverage_means"].value == OFFLINE_COVERAGE
