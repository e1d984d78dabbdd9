"""Tier-2 panels on constructed rows, and an offline tier-2 run from goldens to panels."""

from __future__ import annotations

import pytest

from eval_pipeline.retrieve.results import QuestionRetrieval, RetrievedItem
from eval_pipeline.score.judges import offline_judge_results
from eval_pipeline.score.scorer import score_question
from eval_pipeline.score.summary import summarize
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline.tier2.convert import load_tier2
from eval_pipeline.tier2.metrics import add_tier2_metrics
from eval_pipeline.tier2.panels import tier2_panels, tier2_panels_markdown


def _golden(name, use_case="PREF", difficulty="easy", mix=("doc",), dims=(), tier=2):
    return {
        "name": name,
        "additional_metadata": {
            "tier": tier,
            "use_case": use_case,
            "difficulty": difficulty,
            "source_mix": list(mix),
            "dimensions": list(dims),
        },
    }


def _row(name, covered, precision=None, recall=None, tier=2, abstention=False):
    return {
        "question_id": name,
        "tier": tier,
        "abstention": abstention,
        "covered": covered,
        "metrics": {
            "citation_precision": {"score": precision},
            "citation_recall": {"score": recall},
            "must_not_cite_hits": {"score": 1.0 if precision is not None and precision < 1 else 0},
            "criteria_score": {"score": None},
        },
    }


def test_panels_on_constructed_rows():
    goldens = [
        _golden("p1"),
        _golden("p2", difficulty="hard", mix=("doc", "issue")),
        _golden("c1", "COMBO", "adversarial", ("chat_thread",), ("BUG", "TIME")),
        _golden("c2", "COMBO", "medium", ("doc",), ("BUG", "INFRA")),
    ]
    rows = [
        _row("p1", True, 1.0, 1.0),
        _row("p2", False, 0.5, 0.5),
        _row("c1", None),  # unscored coverage, no citations scored
        _row("c2", True, 1.0, 0.0),
    ]
    panels = tier2_panels(rows, goldens)
    assert panels["questions"] == 4 and panels["skipped_other_tiers"] == 0
    pref = panels["by_use_case"]["PREF"]
    assert pref["questions"] == 2 and pref["covered"] == 1 and pref["not_covered"] == 1
    assert pref["coverage_rate"] == 0.5
    assert pref["citation_precision"] == {"mean": 0.75, "n_scored": 2}
    assert pref["must_not_cite_hit_questions"] == 1
    adversarial = panels["by_difficulty"]["adversarial"]
    assert adversarial["coverage_rate"] is None and adversarial["unscored"] == 1  # not 0%
    assert adversarial["citation_recall"] == {"mean": None, "n_scored": 0}
    assert set(panels["by_source_mix"]) == {"doc", "doc+issue", "chat_thread"}
    assert panels["by_dimension"]["BUG"]["questions"] == 2  # COMBO only, per dimension
    assert panels["by_dimension"]["TIME"]["coverage_rate"] is None
    assert panels["by_dimension"]["INFRA"]["coverage_rate"] == 1.0
    assert "PREF" not in panels["by_dimension"]  # PREF scenarios are not COMBO dimensions
    assert "| PREF | 2 | 50.0% |" in tier2_panels_markdown(panels)


def test_tier1_rows_never_enter_the_panels():
    goldens = {"p1": _golden("p1"), "lme1": _golden("lme1", tier=1)}
    tier2_only = tier2_panels([_row("p1", True, 1.0, 1.0)], goldens)
    mixed = tier2_panels(
        [_row("p1", True, 1.0, 1.0), _row("lme1", False, 0.0, 0.0, tier=1)], goldens
    )
    assert mixed["skipped_other_tiers"] == 1
    for panel in ("by_use_case", "by_difficulty", "by_source_mix", "by_dimension"):
        assert mixed[panel] == tier2_only[panel]
    # a row claiming tier 2 whose golden is not tier 2 is refused too
    assert tier2_panels([_row("lme1", True)], goldens)["questions"] == 0


def test_abstention_is_reported_apart():
    goldens = [_golden("p1"), _golden("p2_abs")]
    rows = [_row("p1", True), _row("p2_abs", False, abstention=True)]
    cell = tier2_panels(rows, goldens)["by_use_case"]["PREF"]
    assert cell["coverage_rate"] == 1.0 and cell["abstention"] == 1
    assert cell["abstention_coverage_rate"] == 0.0


@pytest.fixture(scope="module")
def offline_run():
    """Tier 2 through scoring with an offline judge and a scripted retriever: every third
    question gets its evidence, every third the lures and noise, every third nothing."""
    corpus = load_tier2()
    turns = {
        f"{fx['session_id']}#{t['index']}": t["content"]
        for fx in corpus.fixtures
        for t in fx["turns"]
    }
    tok = PayloadTokenizer()
    rows = []
    for i, g in enumerate(corpus.goldens):
        meta = g["additional_metadata"]
        if i % 3 == 0:
            ranked = list(meta["evidence_turn_ids"])
        elif i % 3 == 1:
            lures = [f"{s}#0" for s in meta["must_not_cite"]]
            noise = [
                f"{s}#0"
                for s in meta["haystack_session_ids"]
                if s not in meta["evidence_session_ids"]
            ]
            ranked = lures + noise
        else:
            ranked = []
        items = [
            RetrievedItem(text=turns[t], turn_ids=[t], session_ids=[t.split("#")[0]])
            for t in ranked
        ]
        retrieval = QuestionRetrieval(
            question_id=g["name"],
            tier=2,
            scope="question",
            retriever="scripted",
            items=items,
            retrieval_context=[it.text for it in items],
            answer=items[0].text if items else None,
            reader="offline:extractive",
        )
        judged = offline_judge_results(bool(meta["abstention"]))
        rows.append(add_tier2_metrics(score_question(g, retrieval, tok, judged=judged), g))
    tier1_golden = {
        "name": "lme-q1",
        "input": "What colour was the bike?",
        "expected_output": "blue",
        "additional_metadata": {
            "tier": 1,
            "question_type": "multi-session",
            "question_date": "2023/05/30 (Tue) 23:40",
            "abstention": False,
            "evidence_turn_ids": ["s1#0"],
            "evidence_turn_roles": ["user"],
            "evidence_session_ids": ["s1"],
            "haystack_session_ids": ["s1"],
        },
    }
    item = RetrievedItem(text="I bought a blue bike", turn_ids=["s1#0"], session_ids=["s1"])
    tier1_row = score_question(
        tier1_golden,
        QuestionRetrieval(
            question_id="lme-q1",
            scope="question",
            retriever="scripted",
            items=[item],
            retrieval_context=[item.text],
            answer="blue",
            reader="offline:extractive",
        ),
        tok,
        judged=offline_judge_results(False),
    )
    return corpus, rows, tier1_row, tier1_golden


def test_offline_tier2_run_populates_every_panel(offline_run):
    corpus, rows, tier1_row, tier1_golden = offline_run
    goldens = corpus.goldens + [tier1_golden]
    panels = tier2_panels(rows + [tier1_row], goldens)
    assert panels["questions"] == len(corpus.goldens) and panels["skipped_other_tiers"] == 1
    assert set(panels["by_use_case"]) == {"PREF", "INFRA", "TIME", "BUG", "COMBO"}
    assert set(panels["by_difficulty"]) == {"easy", "medium", "hard", "adversarial"}
    assert set(panels["by_dimension"]) <= {"PREF", "INFRA", "TIME", "BUG"}
    assert len(panels["by_dimension"]) >= 3 and panels["by_source_mix"]
    for uc, cell in panels["by_use_case"].items():
        assert cell["coverage_rate"] is not None, uc
        assert cell["citation_recall"]["n_scored"] > 0, uc
        assert cell["criteria_score"]["mean"] is None  # offline: unscored, never 0
    covered = [r for r in rows if r["covered"]]
    assert covered and all(r["metrics"]["citation_recall"]["score"] == 1.0 for r in covered)
    lured = [r for r in rows if (r["metrics"]["must_not_cite_hits"]["score"] or 0) > 0]
    assert lured and all(r["metrics"]["citation_precision"]["score"] == 0.0 for r in lured)


def test_summary_keeps_tiers_apart(offline_run):
    corpus, rows, tier1_row, _ = offline_run
    summary = summarize(rows + [tier1_row])["tiers"]
    assert set(summary) == {"1", "2"}
    assert summary["1"]["counts"]["questions"] == 1
    assert summary["2"]["counts"]["questions"] == len(corpus.goldens)
    assert set(summary["1"]["coverage_by_type"]) == {"multi-session"}
    assert all(t.startswith("tier2-") for t in summary["2"]["coverage_by_type"])
    assert "citation_recall" in summary["2"]["metrics"]
    assert "citation_recall" not in summary["1"]["metrics"]
    # tier-1 numbers alone are what they would be without tier 2
    assert summary["1"] == summarize([tier1_row])["tiers"]["1"]
