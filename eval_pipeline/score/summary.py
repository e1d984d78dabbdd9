"""Aggregate scored rows into summary.json: per tier, never one blended headline.

Layout (documented in the README):

    {"tiers": {"1": {
        "counts": {questions, abstention, covered, not_covered, unscored},
        "retrieval": {level: {variant: {"recall_any@k" | "recall_all@k" | "ndcg@k":
                      {"mean", "low", "high", "n"}}}},
        "excluded": {variant: {question_id: reason}},
        "coverage": {rate, low, high, n_scored, n_unscored} | null,
        "coverage_by_type": {question_type: {...} | null},
        "coverage_task_averaged": float | null,
        "abstention": {"questions", "coverage": {...} | null},
        "efficiency": {"median_payload_tokens_covered", "median_payload_tokens_all",
                       "note"},
        "weakest_link": {metric: questions},
        "metrics": {metric: {"mean", "n_scored", "n_unscored", "pass_rate"}}}}}

Answerable questions and abstention questions are aggregated apart: `coverage` covers the
answerable ones, `abstention` the others. A rate over nothing scored is null, not 0.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from statistics import fmean
from typing import Any

from eval_pipeline.score.retrieval_metrics import KS, LEVELS, METRIC_NAMES, VARIANTS
from eval_pipeline.score.stats import bootstrap_ci, median

EFFICIENCY_NOTE = (
    "median_payload_tokens_covered is the comparable efficiency figure (covered questions "
    "only); median_payload_tokens_all is shown for context and is not comparable"
)


def _ci(outcomes: list) -> dict | None:
    est = bootstrap_ci(outcomes)
    return None if est is None else est.as_dict()


def _mean_ci(values: list[float | None]) -> dict:
    """Mean of a per-question metric with a bootstrap interval when it is binary."""
    scored = [v for v in values if v is not None]
    if not scored:
        return {"mean": None, "low": None, "high": None, "n": 0}
    if all(v in (0.0, 1.0) for v in scored):
        est = bootstrap_ci([int(v) for v in scored])
        return {"mean": est.rate, "low": est.low, "high": est.high, "n": len(scored)}
    return {"mean": fmean(scored), "low": None, "high": None, "n": len(scored)}


def summarize_tier(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in rows if not r["abstention"]]
    abstaining = [r for r in rows if r["abstention"]]
    retrieval: dict = {}
    for level in LEVELS:
        retrieval[level] = {}
        for variant in VARIANTS:
            retrieval[level][variant] = {
                f"{name}@{k}": _mean_ci(
                    [r["retrieval_metrics"][level][variant][f"{name}@{k}"] for r in rows]
                )
                for name in METRIC_NAMES
                for k in KS
            }
    excluded = {
        variant: {
            r["question_id"]: r["retrieval_metrics"]["excluded"][variant]
            for r in rows
            if r["retrieval_metrics"]["excluded"][variant]
        }
        for variant in VARIANTS
    }
    by_type: dict[str, list] = defaultdict(list)
    for r in answerable:
        by_type[r["question_type"]].append(r["covered"])
    coverage_by_type = {t: _ci(v) for t, v in sorted(by_type.items())}
    type_rates = [c["rate"] for c in coverage_by_type.values() if c is not None]
    metric_names = sorted({name for r in rows for name in r["metrics"]})
    metrics = {}
    for name in metric_names:
        results = [r["metrics"][name] for r in rows if name in r["metrics"]]
        scores = [m["score"] for m in results if m["score"] is not None]
        passes = [m["passed"] for m in results if m["passed"] is not None]
        metrics[name] = {
            "mean": fmean(scores) if scores else None,
            "n_scored": len(scores),
            "n_unscored": len(results) - len(scores),
            "pass_rate": (sum(passes) / len(passes)) if passes else None,
        }
    covered_tokens = [r["payload_tokens"] for r in answerable if r["covered"]]
    return {
        "counts": {
            "questions": len(rows),
            "abstention": len(abstaining),
            "covered": sum(1 for r in answerable if r["covered"] is True),
            "not_covered": sum(1 for r in answerable if r["covered"] is False),
            "unscored": sum(1 for r in answerable if r["covered"] is None),
        },
        "retrieval": retrieval,
        "excluded": excluded,
        "coverage": _ci([r["covered"] for r in answerable]),
        "coverage_by_type": coverage_by_type,
        "coverage_task_averaged": fmean(type_rates) if type_rates else None,
        "abstention": {
            "questions": len(abstaining),
            "coverage": _ci([r["covered"] for r in abstaining]),
        },
        "efficiency": {
            "median_payload_tokens_covered": median(covered_tokens),
            "median_payload_tokens_all": median(r["payload_tokens"] for r in answerable),
            "note": EFFICIENCY_NOTE,
        },
        "weakest_link": dict(Counter(r["weakest_link"] for r in rows if r["weakest_link"])),
        "metrics": metrics,
    }


def summarize(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    by_tier: dict[str, list] = defaultdict(list)
    for r in rows:
        by_tier[str(r["tier"])].append(r)
    return {"tiers": {tier: summarize_tier(rs) for tier, rs in sorted(by_tier.items())}}


def _fmt(value: float | None, pct: bool = True) -> str:
    if value is None:
        return "unscored"
    return f"{100 * value:.1f}%" if pct else f"{value:g}"


def summary_markdown(summary: dict[str, Any]) -> str:
    """Tables for Dagster metadata and the CLI: one section per tier."""
    out = []
    for tier, s in summary["tiers"].items():
        c = s["counts"]
        cov = s["coverage"]
        out.append(f"### Tier {tier}")
        out.append(
            f"{c['questions']} questions ({c['abstention']} abstention, scored apart); "
            f"covered {c['covered']}, not covered {c['not_covered']}, unscored {c['unscored']}"
        )
        out.append("")
        out.append("| coverage | 95% CI | task-averaged | median payload tokens (covered) |")
        out.append("|---|---|---|---|")
        ci = f"{_fmt(cov['low'])} – {_fmt(cov['high'])}" if cov else "unscored"
        out.append(
            f"| {_fmt(cov['rate'] if cov else None)} | {ci} | "
            f"{_fmt(s['coverage_task_averaged'])} | "
            f"{_fmt(s['efficiency']['median_payload_tokens_covered'], pct=False)} |"
        )
        out.append("")
        out.append("| question type | coverage | n |")
        out.append("|---|---|---|")
        for qtype, est in s["coverage_by_type"].items():
            n = est["n_scored"] if est else 0
            out.append(f"| {qtype} | {_fmt(est['rate'] if est else None)} | {n} |")
        out.append("")
        out.append("| level | variant | recall_any@5 | recall_all@5 | ndcg@5 | recall_all@10 |")
        out.append("|---|---|---|---|---|---|")
        for level, variants in s["retrieval"].items():
            for variant, m in variants.items():
                cells = [
                    _fmt(m[k]["mean"])
                    for k in ("recall_any@5", "recall_all@5", "ndcg@5", "recall_all@10")
                ]
                out.append(f"| {level} | {variant} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)
