"""`compare` shows the evidence-recall delta beside coverage (issue 38): per tier, each
question's gate recall (all its evidence in the top k) paired across the runs with its own
exact McNemar test, and the mean recall_any@k; questions with no evidence and questions not
measured are left out and counted, never 0; it never decides the verdict.

The rows are scored by the real scorer (`score_question`: retrieval metrics, the gate), with
an answer judge that says no to every answer — a reader that never answers, as offline: the
coverage of both runs is 0 and only recall tells the memories apart."""

from __future__ import annotations

import json

import pytest

from eval_pipeline.failures import InfraFailure
from eval_pipeline.retrieve.results import QuestionRetrieval, RetrievedItem
from eval_pipeline.runs import cli
from eval_pipeline.runs.compare import compare
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.recall_delta import gate_k, recall_line
from eval_pipeline.score.gate import MetricResult
from eval_pipeline.score.scorer import score_question
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline_tests.runs.html_dom import parse
from eval_pipeline_tests.runs.synthetic import write_run

TOKENIZER = PayloadTokenizer()
READER_MISSES = {"answer_judge": MetricResult.judged(0.0, 1.0, "not the answer", gating=True)}


def _golden(qid: str, evidence: list[str], *, abstention: bool = False) -> dict:
    return {
        "name": qid,
        "input": "What did I buy?",
        "expected_output": "a bike",
        "additional_metadata": {
            "tier": 1,
            "question_type": "multi-session",
            "question_date": "2023/05/30 (Tue) 23:40",
            "abstention": abstention,
            "evidence_turn_ids": evidence,
            "evidence_turn_roles": ["user"] * len(evidence),
            "evidence_session_ids": sorted({t.split("#")[0] for t in evidence}),
            "haystack_session_ids": ["s1", "s2", "s9"],
        },
    }


def _row(
    qid: str,
    evidence: list[str],
    retrieved: list[str],
    *,
    abstention: bool = False,
    down: bool = False,
) -> dict:
    """A results row as scored_run writes it: `retrieved` turn ids in rank order; `down`:
    the graph server failed, so retrieval was not measured."""
    items = [RetrievedItem(text=t, turn_ids=[t], session_ids=[t.split("#")[0]]) for t in retrieved]
    retrieval = QuestionRetrieval(
        question_id=qid,
        scope="question",
        retriever="fulltext",
        items=[] if down else items,
        retrieval_context=[] if down else [i.text for i in items],
        answer=None if down else "I don't know.",
        reader="offline:extractive",
        infra_failures=(
            [InfraFailure(stage="retrieval", cause="graph_server", error="down")] if down else []
        ),
    )
    golden = _golden(qid, evidence, abstention=abstention)
    return score_question(golden, retrieval, TOKENIZER, judged=READER_MISSES)


EVIDENCE = ["s1#0", "s2#1"]  # two evidence turns: all of them, or only some, retrieved
ALL = [*EVIDENCE, "s9#0"]
SOME = ["s9#0", "s1#0"]
NONE = ["s9#0", "s9#1"]


def _runs(tmp_path):
    # 10 answerable questions: base retrieves all the evidence of 2, candidate of 9.
    base = [_row(f"q{i}", EVIDENCE, ALL if i < 2 else SOME if i < 6 else NONE) for i in range(10)]
    cand = [_row(f"q{i}", EVIDENCE, ALL if i < 9 else SOME) for i in range(10)]
    # Left out: an abstention question and one with no labelled evidence (nothing to
    # recall), and one the candidate's graph server failed on (unscored, not a miss).
    for rows, down in ((base, False), (cand, True)):
        rows.append(_row("q_abs", [], NONE, abstention=True))
        rows.append(_row("q_noev", [], NONE))
        rows.append(_row("q_down", EVIDENCE, ALL, down=down))
    return write_run(tmp_path, base, label="base"), write_run(tmp_path, cand, label="cand")


def test_the_recall_delta_is_paired_on_the_gates_recall_and_never_decides(tmp_path):
    base, cand = _runs(tmp_path)
    c = compare(base, cand)
    [d] = c.evidence_recall
    assert d.k == gate_k(load_run(base)) == 10
    # 11 questions with evidence, one not measured in the candidate: 10 paired.
    assert (d.pairs, d.unscored) == (10, 1)
    assert d.no_evidence == {"abstention question": 1, "no evidence": 1}
    assert (d.base_rate, d.candidate_rate) == (0.2, 0.9)
    assert d.delta_pp == pytest.approx(70.0)
    # 7 questions gained all their evidence, none lost it: exact McNemar 2 · 0.5^7.
    assert (d.b, d.c) == (0, 7) and d.p_value == pytest.approx(2 * 0.5**7)
    assert d.significant is True
    # recall_any@10 (some evidence in the top 10): base 6 of 10, candidate all 10.
    assert d.base_recall_any == pytest.approx(0.6)
    assert d.candidate_recall_any == pytest.approx(1.0)
    assert d.recall_any_delta_pp == pytest.approx(40.0)
    # The reader answers nothing either way: coverage does not move, and it alone decides.
    [tier] = c.tiers
    assert tier.delta_pp == 0.0 and c.verdict == "INCONCLUSIVE"
    assert "recall" not in c.verdict_reason


def test_nothing_measured_in_both_is_unscored_not_zero(tmp_path):
    rows = [_row("q0", EVIDENCE, ALL, down=True), _row("q_abs", [], NONE, abstention=True)]
    base = write_run(tmp_path, rows, label="base")
    cand = write_run(tmp_path, rows, label="cand")
    [d] = compare(base, cand).evidence_recall
    assert d.pairs == 0 and d.unscored == 1 and d.no_evidence == {"abstention question": 1}
    assert d.base_rate is d.candidate_rate is d.delta_pp is None
    assert d.significant is None and d.base_recall_any is None
    assert "unscored → unscored (n/a, 0 paired" in recall_line(d)


def test_text_json_and_html_show_it(tmp_path, capsys):
    base, cand = _runs(tmp_path)
    out_dir = tmp_path / "cmp"
    # The candidate is incomplete (its graph server failed once): not what this is about.
    args = ["compare", str(base), str(cand), "--out", str(out_dir), "--fail-on", "regressed"]
    assert cli.main(args) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("tier 1 evidence recall"))
    assert line == (
        "tier 1 evidence recall (all evidence in the top 10, the gate's recall_all@10): "
        "20.0% → 90.0% (+70.0 pp, 10 paired; left out: abstention question 1, no evidence 1, "
        "unscored 1); McNemar b=0 c=7 p=0.0156 → significant; mean recall_any@10 60.0% → "
        "100.0% (+40.0 pp); reported, coverage decides the verdict"
    )

    assert cli.main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    [d] = doc["comparison"]["evidence_recall"]
    assert d["pairs"] == 10 and d["c"] == 7 and d["significant"] is True
    assert d["no_evidence"] == {"abstention question": 1, "no evidence": 1} and d["unscored"] == 1

    page = parse((out_dir / "comparison.html").read_text())
    [title] = [h for h in page.find_all("h2") if h.text().startswith("Evidence recall")]
    assert "never decides" in title.text()
    table = next(n for n in title.next_siblings() if n.tag == "table")
    [cells] = table.rows()
    assert cells[:5] == ["tier 1", "20.0%", "90.0%", "+70.0 pp", "10"]
    assert cells[5] == "abstention question 1, no evidence 1, unscored 1"
    assert cells[8] == "significant"


def test_the_run_comparison_asset_charts_it(tmp_path):
    from eval_pipeline_tests.runs.test_compare import _materialize, _meta

    _, cand = _runs(tmp_path / "runs")
    meta = _meta(_materialize(tmp_path, cand))
    assert meta["tier1_evidence_recall_delta_pp"] == 70.0
    assert "- tier 1 evidence recall (all evidence in the top 10" in meta["deltas"]
    assert meta["verdict"] == "INCONCLUSIVE"  # coverage decides: it did not move
