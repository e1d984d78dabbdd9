"""The judge's agreement travels with the run: the manifest's `judge.agreement` is shown by
`compare` (CLI and comparison report) and by the run report, with a warning when kappa is
below 0.8 or no check exists; a check stored after the runs is found in the store. The
`judge_agreement` asset publishes the same from the store."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_pipeline.assets.judge_agreement import JUDGE_AGREEMENT_ASSETS
from eval_pipeline.assets.resources import ScoringResource
from eval_pipeline.config import ModelRole
from eval_pipeline.corpus.judge_labels import load_labels
from eval_pipeline.runs import cli
from eval_pipeline.runs.compare import compare
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.report import render_comparison_report, render_run_report
from eval_pipeline.score.agreement import (
    AgreementStore,
    VerdictRecord,
    agreement_pin,
    compute_agreement,
)
from eval_pipeline.score.judges import prompt_hash
from eval_pipeline_tests.runs.html_dom import parse
from eval_pipeline_tests.runs.synthetic import BASE_PINS, outcomes, set_pin, write_run

JUDGE = BASE_PINS["judge"]["model"]
PROMPT = BASE_PINS["judge"]["prompt_hash"]


def _check(judge: str = JUDGE, prompt: str = PROMPT, wrong_every: int = 3):
    """A real agreement result: the labels with every n-th verdict flipped."""
    labels = load_labels()
    flip = {"yes": "no", "no": "yes"}
    records = [
        VerdictRecord(
            id=i.id, label=i.label, verdict=flip[i.label] if n % wrong_every == 0 else i.label
        )
        for n, i in enumerate(labels.items)
    ]
    return compute_agreement(
        labels, records, judge_model=judge, prompt_hash=prompt, measured_at="2026-12-01T10:00"
    )


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _runs(tmp_path, agreement):
    pins = set_pin(BASE_PINS, "judge.agreement", agreement)
    base = write_run(tmp_path / "runs", outcomes("q", [True] * 6), label="base", pins=pins)
    cand = write_run(tmp_path / "runs", outcomes("q", [True] * 6), label="cand", pins=pins)
    return base, cand


def test_compare_shows_the_manifests_kappa_and_warns_below_0_8(home, tmp_path, capsys):
    result = _check()
    kappa = result.kappa.estimate
    assert kappa is not None and kappa < 0.8
    base, cand = _runs(tmp_path, agreement_pin(result))
    c = compare(base, cand)
    answer, invariant = c.judge_agreement  # one per judge prompt the runs pinned
    assert invariant.kind == "invariant_judge" and invariant.check["status"] == "none"
    assert answer.kind == "answer_judge" and answer.source == "manifest"
    assert answer.kappa == pytest.approx(kappa)
    assert any("below 0.8" in w for w in c.judge_warnings)

    assert cli.main(["compare", str(base), str(cand)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("judge agreement (answer_judge"))
    assert f"kappa {kappa:.2f} [" in line and "recorded in the manifest" in line
    assert "WARNING" in line and "below 0.8" in line

    doc = parse(render_comparison_report(c))
    assert any(h.text() == "Judge agreement" for h in doc.find_all("h2"))
    assert any("below 0.8" in p.text() for p in doc.find_all("p", cls="warn"))


def test_no_check_warns_and_a_later_check_is_found_in_the_store(home, tmp_path, capsys):
    base, cand = _runs(tmp_path, agreement_pin(None))
    c = compare(base, cand)
    assert all(a.check["status"] == "none" for a in c.judge_agreement)
    assert any("no agreement check exists" in w for w in c.judge_warnings)
    assert cli.main(["compare", str(base), str(cand)]) == 0
    assert "NO CHECK" in capsys.readouterr().out

    good = _check(wrong_every=1000)  # one flipped item: kappa above 0.8
    AgreementStore().put(good)
    c = compare(base, cand)
    answer = next(a for a in c.judge_agreement if a.kind == "answer_judge")
    assert answer.source == "store" and answer.kappa == pytest.approx(good.kappa.estimate)
    assert answer.kappa > 0.8 and not answer.warnings


def test_offline_runs_show_no_judge_agreement(home, tmp_path):
    pins = set_pin(BASE_PINS, "judge", {"model": "offline", "prompt_hash": None})
    base = write_run(tmp_path / "runs", outcomes("q", [True] * 3), label="b", pins=pins)
    cand = write_run(tmp_path / "runs", outcomes("q", [True] * 3), label="c", pins=pins)
    c = compare(base, cand)
    assert c.judge_agreement == [] and c.judge_warnings == []


def test_the_run_report_shows_the_kappa_next_to_the_judged_scores(home, tmp_path):
    result = _check()
    base, _ = _runs(tmp_path, agreement_pin(result))
    doc = parse(render_run_report(load_run(base)))
    heads = [h.text() for h in doc.find_all("h2")]
    assert "Judge agreement" in heads and heads.index("Judge agreement") < heads.index("Pins")
    table = next(t for t in doc.find_all("table") if t.headers()[0] == "judge prompt")
    cell = table.rows()[0][1]
    assert f"kappa {result.kappa.estimate:.2f} [" in cell and "174 unscored" not in cell
    assert "0 unscored of 174" in cell
    assert any("below 0.8" in p.text() for p in doc.find_all("p", cls="warn"))

    unchecked, _ = _runs(tmp_path / "other", agreement_pin(None))
    doc = parse(render_run_report(load_run(unchecked)))
    assert any("no agreement check" in p.text() for p in doc.find_all("td"))

    old = write_run(tmp_path / "old", outcomes("q", [True] * 2), label="old")  # no record
    doc = parse(render_run_report(load_run(old)))
    assert any("not recorded" in p.text() for p in doc.find_all("p", cls="warn"))


def test_judge_agreement_asset_publishes_the_stored_check(home):
    judge = "openai:gpt-4o-mini"
    AgreementStore().put(_check(judge=judge, prompt=prompt_hash()))
    result = dg.materialize(
        JUDGE_AGREEMENT_ASSETS,
        resources={"scoring": ScoringResource(judge=ModelRole(model=judge), verdict="reference")},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    [mat] = result.get_asset_materialization_events()
    meta = {k: getattr(v, "value", v) for k, v in mat.materialization.metadata.items()}
    assert meta["status"] == "checked" and meta["judge"] == judge
    assert meta["kappa"] < 0.8 and meta["prompt_hash"] == prompt_hash()
    assert meta["invariant_status"] == "no check"
    assert "below 0.8" in meta["warnings"] and "invariant_judge: no agreement" in meta["warnings"]

    offline = dg.materialize(
        JUDGE_AGREEMENT_ASSETS,
        resources={"scoring": ScoringResource(verdict="reference")},
        instance=dg.DagsterInstance.ephemeral(),
    )
    [mat] = offline.get_asset_materialization_events()
    assert mat.materialization.metadata["status"].value == "no judge"
    # the default verdict method needs no model: its check is looked up with no judge at all
    matched = dg.materialize(
        JUDGE_AGREEMENT_ASSETS,
        resources={"scoring": ScoringResource()},
        instance=dg.DagsterInstance.ephemeral(),
    )
    [mat] = matched.get_asset_materialization_events()
    assert mat.materialization.metadata["status"].value == "no check"


def test_a_quick_check_on_another_file_does_not_stand_in_for_the_committed_set(home):
    from eval_pipeline.corpus.judge_labels import LabelSet
    from eval_pipeline.score.judge_check import judge_agreement_pins

    judge = "openai:gpt-4o-mini"
    full = _check(judge=judge, prompt=prompt_hash())
    AgreementStore().put(full)
    labels = load_labels()
    few = LabelSet(path="few.jsonl", sha256="f" * 64, items=labels.items[:4])
    quick = compute_agreement(
        few,
        [VerdictRecord(id=i.id, label=i.label, verdict=i.label) for i in few.items],
        judge_model=judge,
        prompt_hash=prompt_hash(),
        measured_at="2026-12-01T11:00",  # later than the full check
    )
    AgreementStore().put(quick)
    pin = judge_agreement_pins(judge)["agreement"]
    assert pin["n_items"] == len(labels) and pin["kappa"] == pytest.approx(full.kappa.estimate)
