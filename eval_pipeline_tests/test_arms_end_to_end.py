"""`eval-pipeline run --arms floor,ceiling` through the real chain on the bundled sample,
offline: every question answered again by the run's reader with no memory and with its
evidence sessions, judged by the run's judge, shown between the two in the summary, the
report and the CLI's output; and the system's own numbers and pins the same as without arms.
A bad `--arms` value is refused in one line before anything runs."""

from __future__ import annotations

import json
from statistics import fmean

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.retrieve.reader import ABSTENTION
from eval_pipeline.runs.calibrate import floor_key
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.pins import differing_pins
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
    system = {k: v for k, v in summary["tiers"]["1"].items() if k != "arms"}
    assert system == json.loads((plain.run_dir / "summary.json").read_text())["tiers"]["1"]
    assert (
        manifest["llm_usage"]
        == json.loads((plain.run_dir / "manifest.json").read_text())["llm_usage"]
    )
