"""The pass criteria's arithmetic: weights, thresholds, pass_score, buckets, COMBO dimensions."""

from __future__ import annotations

import pytest

from eval_pipeline.tier2.pass_criteria import (
    AXIS_THRESHOLDS,
    AXIS_WEIGHTS,
    DEFAULT_PASS_SCORE,
    bucket_verdict,
    scenario_axes,
    scenario_verdict,
    tier2_pass_report,
    weighted_score,
)


def test_weights_are_the_issue_s_and_sum_to_100():
    assert AXIS_WEIGHTS == {
        "PREF": (20, 40, 40),
        "INFRA": (30, 40, 30),
        "TIME": (40, 30, 30),
        "BUG": (25, 35, 40),
        "COMBO": (30, 35, 35),
    }


@pytest.mark.parametrize(
    ("use_case", "expected"),
    [("PREF", 74.0), ("INFRA", 75.0), ("TIME", 78.0), ("BUG", 75.5), ("COMBO", 76.0)],
)
def test_weighted_score_per_use_case(use_case, expected):
    # ingestion 90, retrieval 60, agent use 80: e.g. PREF = .2*90 + .4*60 + .4*80 = 74
    axes = {"ingestion": 90.0, "retrieval": 60.0, "agent_use": 80.0}
    assert weighted_score(use_case, axes) == pytest.approx(expected)


def test_an_axis_not_taken_leaves_the_verdict_unscored_never_failed():
    v = scenario_verdict("TIME", {"ingestion": 100.0, "retrieval": 100.0, "agent_use": None})
    assert v["weighted"] is None and v["passed"] is None
    assert "agent_use" in v["failed_because"][0]


def test_each_axis_must_meet_its_threshold_even_when_the_weighted_score_passes():
    low = AXIS_THRESHOLDS["retrieval"] - 1
    v = scenario_verdict("TIME", {"ingestion": 100.0, "retrieval": low, "agent_use": 100.0})
    assert (
        v["weighted"] == pytest.approx(40 + 0.3 * low + 30) and v["weighted"] > DEFAULT_PASS_SCORE
    )
    assert v["passed"] is False and v["failed_because"] == [f"retrieval {low:.1f} < 50"]


def test_pass_score_default_and_override():
    axes = {"ingestion": 72.0, "retrieval": 72.0, "agent_use": 72.0}  # weighted 72
    assert scenario_verdict("PREF", axes)["passed"] is True  # default 70
    strict = scenario_verdict("PREF", axes, pass_score=75)
    assert strict["passed"] is False and strict["pass_score"] == 75
    assert strict["failed_because"] == ["weighted 72.0 < pass_score 75"]


def test_combo_dimension_must_score_60_with_that_use_case_s_weights():
    # Ingestion high, agent use at its floor: PREF weighs agent use 40 %, TIME only 30 %.
    axes = {"ingestion": 100.0, "retrieval": 50.0, "agent_use": 60.0}
    v = scenario_verdict("COMBO", axes, pass_score=0, dimensions=["PREF", "TIME"])
    assert v["dimension_scores"] == {
        "PREF": pytest.approx(20 + 20 + 24),
        "TIME": pytest.approx(40 + 15 + 18),
    }
    assert v["passed"] is True  # 64 and 73 both >= 60
    axes["retrieval"] = 50.0
    axes["ingestion"] = 60.0
    v = scenario_verdict("COMBO", axes, pass_score=0, dimensions=["PREF", "INFRA"])
    # PREF: 12 + 20 + 24 = 56 < 60; INFRA: 18 + 20 + 18 = 56 < 60
    assert v["passed"] is False
    assert v["failed_because"] == ["dimension PREF 56.0 < 60", "dimension INFRA 56.0 < 60"]
    # Dimensions only count for COMBO scenarios.
    assert scenario_verdict("PREF", axes, dimensions=["TIME"])["dimension_scores"] == {}


def test_bucket_passes_at_80_percent_of_its_scored_scenarios():
    ok, bad, unscored = {"passed": True}, {"passed": False}, {"passed": None}
    assert bucket_verdict([ok] * 4 + [bad] + [unscored])["pass_rate"] == pytest.approx(0.8)
    assert bucket_verdict([ok] * 4 + [bad])["bucket_passed"] is True
    assert bucket_verdict([ok] * 3 + [bad])["bucket_passed"] is False  # 75 %
    nothing = bucket_verdict([unscored, unscored])
    assert nothing["pass_rate"] is None and nothing["bucket_passed"] is None
    assert nothing["scenarios"] == 2 and nothing["scored"] == 0


def test_scenario_axes_from_rows():
    rows = [
        {"metrics": {"citation_recall": {"score": 1.0}, "criteria_score": {"score": 80.0}}},
        {"metrics": {"citation_recall": {"score": 0.5}, "criteria_score": {"score": None}}},
        {"abstention": True, "metrics": {"citation_recall": {"score": 0.0}}},
    ]
    assert scenario_axes(rows, 55.0) == {
        "ingestion": 55.0,
        "retrieval": pytest.approx(75.0),  # abstention questions have nothing to cite
        "agent_use": pytest.approx(80.0),
    }
    assert scenario_axes(rows[:1], None)["ingestion"] is None


def _golden(qid, scenario, use_case, difficulty="easy", dims=()):
    return {
        "name": qid,
        "additional_metadata": {
            "tier": 2,
            "scenario_id": scenario,
            "use_case": use_case,
            "difficulty": difficulty,
            "source_mix": ["doc"],
            "dimensions": list(dims),
            "pass_score": None,
        },
    }


def test_report_groups_by_bucket_difficulty_and_source_mix():
    goldens = {
        g["name"]: g
        for g in (
            _golden("t2-a-q1", "a", "PREF"),
            _golden("t2-b-q1", "b", "PREF", "hard"),
            _golden("t2-c-q1", "c", "TIME"),
        )
    }

    def row(qid, recall, crit):
        return {
            "question_id": qid,
            "tier": 2,
            "metrics": {"citation_recall": {"score": recall}, "criteria_score": {"score": crit}},
        }

    rows = [row("t2-a-q1", 1.0, 90.0), row("t2-b-q1", 0.0, 90.0), row("t2-c-q1", 1.0, None)]
    rows.append({"question_id": "q-tier1", "tier": 1, "metrics": {}})  # never counted
    ingestion = {"scenarios": {"a": {"score": 100.0}, "b": {"score": 100.0}, "c": {"score": 50.0}}}
    report = tier2_pass_report(rows, goldens, ingestion)
    assert report["scenarios"]["a"]["passed"] is True
    assert report["scenarios"]["b"]["passed"] is False  # retrieval 0 < 50
    assert report["scenarios"]["c"]["passed"] is None  # no judge score
    pref = report["by_use_case"]["PREF"]
    assert (pref["scenarios"], pref["scored"], pref["passed"]) == (2, 2, 1)
    assert pref["pass_rate"] == 0.5 and pref["bucket_passed"] is False
    assert report["by_use_case"]["TIME"]["pass_rate"] is None
    assert report["by_use_case"]["TIME"]["ingestion_mean"] == 50.0
    assert sorted(report["by_difficulty"]) == ["easy", "hard"]
    assert report["by_source_mix"]["doc"]["scenarios"] == 3
    # Ingestion not taken at all: every verdict unscored.
    none = tier2_pass_report(rows, goldens, None)
    assert all(v["passed"] is None for v in none["scenarios"].values())
