"""Canaries, scored apart: was each planted fact returned, and answered?

A canary (`corpus.canaries`) is *returned* when its evidence turn is among the top k the
retriever handed on (k = the coverage gate's, through provenance as for any question; at
session level when the run's evidence level is), and *answered* when the answer judge said
yes. A canary the pipeline's own infrastructure failed on is *unscored*: neither returned
nor failed, and never a sign that the memory system is broken.

Nothing here touches a tier's rows: canaries have their own rows (`canaries.jsonl` in the
bundle) and their own block in `summary.json`:

    "canaries": {"planted", "returned", "answered", "unscored", "failed": [ids],
                 "unanswered": [ids], "unscored_ids": [ids], "set": {version, sha256}}

`returned` and `answered` are null when nothing was scored (never 0), `answered` also when no
judge decided any of them. With K question batches every batch holds every canary, so each
is planted K times and named `<id>@<batch>`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval_pipeline.score.gate import MetricResult

BROKEN = (
    "the memory system is broken, not the dataset: it could not return a fact it was given "
    "moments before (a planted canary)"
)


def canary_key(question_id: str, batch: str | None) -> str:
    return f"{question_id}@{batch}" if batch else question_id


def _answered(judged: Mapping[str, MetricResult] | None) -> bool | None:
    """The answer judge's yes/no: every gating judged metric passed (None: not judged)."""
    metrics = dict(judged or {})
    gating = [m for m in metrics.values() if m.gating]
    chosen = gating or [m for n, m in metrics.items() if n == "answer_judge"]
    if not chosen or any(m.passed is None for m in chosen):
        return None
    return all(m.passed for m in chosen)


def canary_row(
    golden: Mapping[str, Any],
    scored: Mapping[str, Any],
    judged: Mapping[str, MetricResult] | None,
    *,
    batch: str | None,
    gate_k: int,
    level: str,
) -> dict[str, Any]:
    """One canaries.jsonl row from the canary's golden and its row as `score_question` scored
    it (the same metrics as any question's, read here and kept nowhere else)."""
    meta = golden["additional_metadata"]
    infra = list(scored.get("infra_failures") or [])
    evidence = list(meta["evidence_turn_ids"])
    ranked = list(scored["retrieved_turn_ids"])
    rank = next((i + 1 for i, t in enumerate(ranked) if t in evidence), None)
    # Only a failure of retrieval itself leaves "returned" unknown; a reader's or a judge's
    # leaves the answer unjudged (the metrics it could not take are null).
    value = scored["retrieval_metrics"][level]["all"][f"recall_all@{gate_k}"]
    returned: bool | None = None if value is None else value >= 1.0
    answered = None if returned is None else _answered(judged)
    status = "unscored" if returned is None else "returned" if returned else "failed"
    return {
        "canary_id": golden["name"],
        "key": canary_key(golden["name"], batch),
        "batch": batch,
        "question": golden["input"],
        "expected_output": golden["expected_output"],
        "evidence_turn_ids": evidence,
        "evidence_rank": rank,
        "k": gate_k,
        "level": level,
        "retrieved_turn_ids": ranked[: max(gate_k, 10)],
        "answer": scored["answer"],
        "returned": returned,
        "answered": answered,
        "status": status,
        "errors": list(scored.get("errors") or []),
        "infra_failures": infra,
    }


def canary_summary(rows: Sequence[Mapping[str, Any]], pin: Mapping[str, Any] | None) -> dict:
    """summary.json's `canaries` block (layout in the module docstring)."""
    scored = [r for r in rows if r["returned"] is not None]
    judged = [r for r in scored if r["answered"] is not None]
    return {
        "planted": len(rows),
        "returned": sum(1 for r in scored if r["returned"]) if scored else None,
        "answered": sum(1 for r in judged if r["answered"]) if judged else None,
        "unscored": len(rows) - len(scored),
        "failed": [r["key"] for r in scored if not r["returned"]],
        "unanswered": [r["key"] for r in judged if not r["answered"]],
        "unscored_ids": [r["key"] for r in rows if r["returned"] is None],
        "set": {"version": pin.get("version"), "sha256": pin.get("sha256")} if pin else None,
    }


def canary_verdict(summary: Mapping[str, Any] | None) -> tuple[str, str]:
    """(`ok` | `broken` | `unchecked` | `off`, one line saying so) for the run's canaries."""
    if not summary or not summary["planted"]:
        return "off", "canaries: none planted"
    planted, failed = summary["planted"], summary["failed"]
    answered = summary["answered"]
    answered_text = "not judged" if answered is None else f"{answered} answered"
    if failed:
        shown = ", ".join(failed[:5]) + (" …" if len(failed) > 5 else "")
        return "broken", (
            f"canaries: {len(failed)} of {planted} planted facts not returned ({shown}): {BROKEN}"
        )
    if summary["unscored"]:
        return "unchecked", (
            f"canaries: {summary['returned'] or 0} of {planted} returned, "
            f"{summary['unscored']} unscored by infrastructure failures (not a miss), "
            f"{answered_text}"
        )
    return "ok", f"canaries: {planted} of {planted} planted facts returned, {answered_text}"
