"""Aggregate scored rows into summary.json: per tier, never one blended headline.

Layout (documented in docs/scores.md):

    {"status": "complete" | "incomplete",
     "incomplete": {questions, by_cause, by_stage, question_ids},
     "tiers": {"1": {
        "counts": {questions, abstention, covered, not_covered, unscored,
                   unscored_infrastructure},
        "infrastructure": {questions, by_cause, by_stage, question_ids},
        "retrieval": {level: {variant: {"recall_any@k" | "recall_all@k" | "ndcg@k":
                      {"mean", "low", "high", "n"}}}},
        "excluded": {variant: {question_id: reason}},
        "coverage": {rate, low, high, n_scored, n_unscored} | null,
        "coverage_by_type": {question_type: {...} | null},
        "coverage_task_averaged": float | null,
        "abstention": {"questions", "coverage": {...} | null,
                       "weakest_link": {metric: questions},
                       "metrics": {metric: {...}}},
        "efficiency": {"median_payload_tokens_covered", "median_payload_tokens_all",
                       "note"},
        "weakest_link": {metric: questions},
        "metrics": {metric: {"mean", "n_scored", "n_unscored", "pass_rate"}},
        "judge_panel": {"members": {member: {coverage, coverage_by_type,
                        abstention_coverage, unjudged}},
                        "split": {questions, question_ids}}   (with --judge-panel),
        "funnel": {"stages", "answerable", "by_type": {question_type: ...}, "abstention"},
                   each {questions, covered, <stage>: n, unscored, undecided}},
        "arms": {"arms": {arm: {coverage, coverage_by_type, abstention_coverage, unscored,
                 unscored_infrastructure}},
                 "position": {overall, by_type, abstention, outside}}   (with --arms),
        "errata": {flagged, by_status, suspect_ids, coverage_without_suspect,
                   coverage_task_averaged_without_suspect}   (when errata flag a question)}},
     "judge_panel": {"members": [member], "split": {questions, question_ids}}}

Answerable questions and abstention questions are aggregated apart: `coverage`, `retrieval`,
`efficiency`, `weakest_link` and `metrics` are over the answerable ones only, `abstention` holds
the others. Every retrieval mean is the plain mean of the non-null per-question values of the
answerable rows (`n` of them), so it can be recomputed from results.jsonl. `excluded` lists,
per variant, every question whose retrieval metrics are null there: abstention questions in
every variant, answerable ones with the reason their row gives. A rate over nothing scored is
null, not 0.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from statistics import fmean
from typing import Any

from eval_pipeline.score import arms, panel
from eval_pipeline.score.attribution import funnel, funnel_markdown
from eval_pipeline.score.errata_summary import errata_summary
from eval_pipeline.score.retrieval_metrics import (
    EXCLUDED_ABSTENTION,
    KS,
    LEVELS,
    METRIC_NAMES,
    VARIANTS,
)
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


def _metric_stats(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per metric name: mean of the scored values, how many were (un)scored, pass rate."""
    out = {}
    for name in sorted({name for r in rows for name in r["metrics"]}):
        results = [r["metrics"][name] for r in rows if name in r["metrics"]]
        scores = [m["score"] for m in results if m["score"] is not None]
        passes = [m["passed"] for m in results if m["passed"] is not None]
        out[name] = {
            "mean": fmean(scores) if scores else None,
            "n_scored": len(scores),
            "n_unscored": len(results) - len(scores),
            "pass_rate": (sum(passes) / len(passes)) if passes else None,
        }
    return out


def _weakest_links(rows: list[dict[str, Any]]) -> dict[str, int]:
    return dict(Counter(r["weakest_link"] for r in rows if r["weakest_link"]))


def _excluded(rows: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """`{variant: {question_id: reason}}`: every question kept out of that variant's means."""
    out: dict[str, dict[str, str]] = {variant: {} for variant in VARIANTS}
    for r in rows:
        for variant in VARIANTS:
            if r["abstention"]:
                # Apart from every variant, whatever an older row's metrics say.
                out[variant][r["question_id"]] = EXCLUDED_ABSTENTION
            elif reason := r["retrieval_metrics"]["excluded"][variant]:
                out[variant][r["question_id"]] = reason
    return out


def summarize_tier(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in rows if not r["abstention"]]
    abstaining = [r for r in rows if r["abstention"]]
    retrieval: dict = {}
    for level in LEVELS:
        retrieval[level] = {}
        for variant in VARIANTS:
            retrieval[level][variant] = {
                f"{name}@{k}": _mean_ci(
                    [r["retrieval_metrics"][level][variant][f"{name}@{k}"] for r in answerable]
                )
                for name in METRIC_NAMES
                for k in KS
            }
    by_type: dict[str, list] = defaultdict(list)
    for r in answerable:
        by_type[r["question_type"]].append(r["covered"])
    coverage_by_type = {t: _ci(v) for t, v in sorted(by_type.items())}
    type_rates = [c["rate"] for c in coverage_by_type.values() if c is not None]
    covered_tokens = [r["payload_tokens"] for r in answerable if r["covered"]]
    panel_summary = panel.tier_summary(rows)
    out = {
        "counts": {
            "questions": len(rows),
            "abstention": len(abstaining),
            "covered": sum(1 for r in answerable if r["covered"] is True),
            "not_covered": sum(1 for r in answerable if r["covered"] is False),
            "unscored": sum(1 for r in answerable if r["covered"] is None),
            # ... of which the pipeline's own failure left unmeasured (abstention included)
            "unscored_infrastructure": sum(1 for r in rows if r.get("infra_failures")),
        },
        "infrastructure": infrastructure_report(rows),
        "retrieval": retrieval,
        "excluded": _excluded(rows),
        "coverage": _ci([r["covered"] for r in answerable]),
        "coverage_by_type": coverage_by_type,
        "coverage_task_averaged": fmean(type_rates) if type_rates else None,
        "abstention": {
            "questions": len(abstaining),
            "coverage": _ci([r["covered"] for r in abstaining]),
            "weakest_link": _weakest_links(abstaining),
            "metrics": _metric_stats(abstaining),
        },
        "efficiency": {
            "median_payload_tokens_covered": median(covered_tokens),
            "median_payload_tokens_all": median(
                r["payload_tokens"] for r in answerable if r["payload_tokens"] is not None
            ),
            "note": EFFICIENCY_NOTE,
        },
        "weakest_link": _weakest_links(answerable),
        "metrics": _metric_stats(answerable),
        # Each judge-panel member's coverage and the questions it splits on (with a panel).
        **({"judge_panel": panel_summary} if panel_summary else {}),
        # Where each question that was not covered failed (score.attribution).
        "funnel": funnel(rows),
        # With dataset errata flagging a question: coverage without the suspect ones.
        **({"errata": errata} if (errata := errata_summary(rows)) else {}),
    }
    # The reference arms' coverage and where the system sits between them (with --arms).
    tier_arms = arms.tier_summary(rows, out)
    return {**out, **({"arms": tier_arms} if tier_arms else {})}


def infrastructure_report(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Questions the pipeline's own failures left unscored: how many, by cause and by stage
    (a question can count under several causes, but once in `questions`), and which."""
    by_cause: Counter[str] = Counter()
    by_stage: Counter[str] = Counter()
    ids: list[str] = []
    for r in rows:
        failures = r.get("infra_failures") or []
        if not failures:
            continue
        ids.append(r["question_id"])
        by_cause.update({f["cause"] for f in failures})
        by_stage.update({f["stage"] for f in failures})
    return {
        "questions": len(ids),
        "by_cause": dict(sorted(by_cause.items())),
        "by_stage": dict(sorted(by_stage.items())),
        "question_ids": ids,
    }


def summarize(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`{"status": "complete" | "incomplete", "incomplete": {...}, "tiers": {...}}`.

    A run is incomplete when any question was left unscored by an infrastructure failure
    (graph server, LLM cache, provider, judge): its numbers stand, but they do not cover
    every question, and `incomplete` says how many and why.
    """
    rows = list(rows)
    by_tier: dict[str, list] = defaultdict(list)
    for r in rows:
        by_tier[str(r["tier"])].append(r)
    infra = infrastructure_report(rows)
    panel_summary = panel.run_summary(rows)
    return {
        "status": "incomplete" if infra["questions"] else "complete",
        "incomplete": infra,
        "tiers": {tier: summarize_tier(rs) for tier, rs in sorted(by_tier.items())},
        **({"judge_panel": panel_summary} if panel_summary else {}),
    }


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
        infra = s.get("infrastructure") or {}
        if infra.get("questions"):
            causes = ", ".join(f"{k} {v}" for k, v in infra["by_cause"].items())
            out.append("")
            out.append(
                f"**INCOMPLETE**: {infra['questions']} question(s) unscored by infrastructure "
                f"failures ({causes}); they are left out of every rate, never counted as misses"
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
        out.extend(panel_markdown(s.get("judge_panel")))
        if s.get("funnel"):
            out.append("Where the questions that were not covered failed:")
            out.append("")
            out.extend(funnel_markdown(s["funnel"]))
        out.extend(arms.markdown(s.get("arms")))
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


def panel_markdown(tier_panel: dict[str, Any] | None) -> list[str]:
    """A tier's judge panel: each member's coverage, and the questions it splits on."""
    if not tier_panel:
        return []
    out = ["| judge panel member | coverage | n | unjudged |", "|---|---|---|---|"]
    for key, m in tier_panel["members"].items():
        cov = m["coverage"]
        n = cov["n_scored"] if cov else 0
        out.append(f"| {key} | {_fmt(cov['rate'] if cov else None)} | {n} | {m['unjudged']} |")
    split = tier_panel["split"]
    ids = ", ".join(split["question_ids"][:10]) + (" …" if split["questions"] > 10 else "")
    out.append("")
    out.append(f"panel splits on {split['questions']} question(s){': ' + ids if ids else ''}")
    out.append("")
    return out
