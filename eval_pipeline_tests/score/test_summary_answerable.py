"""summary.json means are over answerable questions only, and say which questions they leave out.

Issue 11 §6: abstention questions are apart from every recall and NDCG variant; the `all`
variant changes which evidence turns count, not which questions. The check is the one a user
would make: recompute every mean from the saved `results.jsonl` over the non-abstention rows
with a non-null value, and compare it with the saved `summary.json`.
"""

from __future__ import annotations

import json
from statistics import fmean

import pytest

from eval_pipeline.runs.bundle import write_bundle
from eval_pipeline.score.retrieval_metrics import (
    EXCLUDED_ABSTENTION,
    EXCLUDED_NO_USER_EVIDENCE,
    KS,
    LEVELS,
    METRIC_NAMES,
    VARIANTS,
)
from eval_pipeline.score.scorer import score_question
from eval_pipeline.score.summary import summarize
from eval_pipeline_tests.runs.synthetic import manifest
from eval_pipeline_tests.score.test_scoring import golden, retrieval


@pytest.fixture(scope="module")
def tokenizer():
    from eval_pipeline.score.tokens import PayloadTokenizer

    return PayloadTokenizer()


def _rows(tokenizer) -> list[dict]:
    cases = [
        # answerable, user evidence retrieved first
        (golden("a"), retrieval("a", ["s1#0", "s2#0"])),
        # answerable, user evidence missed
        (golden("b"), retrieval("b", ["s2#0"])),
        # answerable, assistant-only evidence: out of `upstream` only, scored in `all`
        (
            golden("c", evidence=("s2#1",), roles=("assistant",)),
            retrieval("c", ["s2#1"]),
        ),
        # abstention WITH labelled evidence, retrieved first: scoring it in any variant
        # would lift that variant's means (as `all` did before)
        (
            golden("d_abs", evidence=("s1#0",), roles=("user",), abstention=True),
            retrieval("d_abs", ["s1#0"], answer="I don't know"),
        ),
        # abstention with no evidence
        (
            golden("e_abs", evidence=(), roles=(), abstention=True),
            retrieval("e_abs", ["s2#0"], answer="I don't know"),
        ),
    ]
    return [score_question(g, r, tokenizer) for g, r in cases]


@pytest.fixture
def bundle(tmp_path, tokenizer):
    rows = _rows(tokenizer)
    run = write_bundle(tmp_path, manifest=manifest(), rows=rows, summary=summarize(rows), label="t")
    results = [
        json.loads(line)
        for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    return results, summary["tiers"]["1"]


def test_every_retrieval_mean_recomputes_from_results_over_answerable_rows(bundle):
    results, tier = bundle
    answerable = [r for r in results if not r["abstention"]]
    assert {r["question_id"] for r in answerable} == {"a", "b", "c"}
    for level in LEVELS:
        for variant in VARIANTS:
            for name in METRIC_NAMES:
                for k in KS:
                    key = f"{name}@{k}"
                    values = [
                        r["retrieval_metrics"][level][variant][key]
                        for r in answerable
                        if r["retrieval_metrics"][level][variant][key] is not None
                    ]
                    saved = tier["retrieval"][level][variant][key]
                    assert saved["n"] == len(values), (level, variant, key)
                    assert saved["mean"] == pytest.approx(fmean(values)), (level, variant, key)
    # Spot-check against hand values: `all` turn recall_any@1 over a (1), b (0), c (1).
    assert tier["retrieval"]["turn"]["all"]["recall_any@1"]["mean"] == pytest.approx(2 / 3)
    assert tier["retrieval"]["turn"]["upstream"]["recall_any@1"]["n"] == 2  # a, b


def test_abstention_rows_hold_no_retrieval_metric_in_any_variant(bundle):
    results, _ = bundle
    for r in results:
        if r["abstention"]:
            assert r["retrieval_metrics"]["excluded"] == dict.fromkeys(
                VARIANTS, EXCLUDED_ABSTENTION
            )
            for level in LEVELS:
                for variant in VARIANTS:
                    assert set(r["retrieval_metrics"][level][variant].values()) == {None}


def test_excluded_lists_abstention_in_both_variants_and_no_user_evidence_in_upstream(bundle):
    _, tier = bundle
    assert tier["excluded"] == {
        "upstream": {
            "c": EXCLUDED_NO_USER_EVIDENCE,
            "d_abs": EXCLUDED_ABSTENTION,
            "e_abs": EXCLUDED_ABSTENTION,
        },
        "all": {"d_abs": EXCLUDED_ABSTENTION, "e_abs": EXCLUDED_ABSTENTION},
    }


def test_metric_means_are_over_answerable_rows_and_abstention_is_reported_apart(bundle):
    results, tier = bundle
    # Answerable rows answered "it was blue" (contains "blue"); abstention rows "I don't know".
    assert tier["metrics"]["proxy_containment"]["mean"] == 1.0
    assert tier["metrics"]["proxy_containment"]["n_scored"] == 3
    assert tier["abstention"]["questions"] == 2
    assert tier["abstention"]["metrics"]["proxy_containment"] == {
        "mean": 0.0,
        "n_scored": 2,
        "n_unscored": 0,
        "pass_rate": None,
    }
    # evidence_recall for the answerable rows only: a and c pass, b fails.
    recall = [r["metrics"]["evidence_recall"]["score"] for r in results if not r["abstention"]]
    assert tier["metrics"]["evidence_recall"]["mean"] == pytest.approx(fmean(recall))
    assert tier["weakest_link"] == {"evidence_recall": 1}


def test_summary_ignores_retrieval_values_an_older_row_kept_for_an_abstention_question(
    tokenizer,
):
    """A row scored by older code (abstention scored in `all`) cannot leak into the means."""
    rows = _rows(tokenizer)
    old = rows[3]
    old["retrieval_metrics"]["excluded"]["all"] = None
    for level in LEVELS:
        old["retrieval_metrics"][level]["all"] = {
            f"{name}@{k}": 1.0 for name in METRIC_NAMES for k in KS
        }
    tier = summarize(rows)["tiers"]["1"]
    assert tier["retrieval"]["turn"]["all"]["recall_any@1"]["n"] == 3
    assert tier["excluded"]["all"]["d_abs"] == EXCLUDED_ABSTENTION
