"""Why each question failed: one stage per question that was not covered.

The pipeline holds every stage of every question — what memory formed from the sessions
(`retrieve.evidence_trace`), what retrieval returned, the reader's context and answer, the
judges' verdicts — so a miss can be put where it happened, in pipeline order:

- `gold_suspect`: the dataset's own answer or evidence labels are suspect (the row's errata);
- `formation`: an evidence turn retrieval did not return is held by no memory (never stored,
  or only by a fact since superseded);
- `retrieval`: memory holds the evidence, retrieval did not return it (evidence recall, or an
  empty payload for an answerable question);
- `judge_split`: the evidence was returned, the answer failed, and the judges of a panel
  disagree on it;
- `reader`: the context held the evidence (or there was none to hold: abstention), the answer
  is wrong; or the reference arms ran and the reader missed the question with the evidence
  sessions in front of it too (the ceiling arm not covered). Then better formation or
  retrieval would not have saved it: what the reader cannot do (the offline reader's count
  across sessions, date arithmetic) is the reader's miss, not retrieval's.

Null for a covered question, for one the pipeline's own failure left unmeasured (never the
system's miss) and for one no gate failed on (undecided). `weakest_link` (the first gating
metric that failed) stays beside it: it names a metric, this names a stage.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

STAGES = ("gold_suspect", "formation", "retrieval", "reader", "judge_split")
# Gating metrics that measure what retrieval handed on; any other gate judges the answer.
RETRIEVAL_GATES = frozenset({"evidence_recall", "contextual_recall", "empty_payload"})


def failed_gates(row: Mapping[str, Any]) -> list[str]:
    failed = [n for n, m in row["metrics"].items() if m.get("gating") and m["passed"] is False]
    if row.get("payload_tokens") == 0 and not row["abstention"]:
        failed.append("empty_payload")
    return failed


def _formation_missed(row: Mapping[str, Any], trace: Mapping[str, Any] | None) -> bool:
    """An evidence unit retrieval did not return is held by no live memory."""
    if not trace or not trace.get("held"):
        return False
    returned = set(
        row["retrieved_session_ids"]
        if trace.get("level") == "session"
        else row["retrieved_turn_ids"]
    )
    return any(held != "live" for unit, held in trace["held"].items() if unit not in returned)


def ceiling_missed(row: Mapping[str, Any]) -> bool:
    """The ceiling arm ran on this question and the reader, given the evidence sessions,
    did not cover it either."""
    return ((row.get("arms") or {}).get("ceiling") or {}).get("covered") is False


def failure_stage(row: Mapping[str, Any], trace: Mapping[str, Any] | None = None) -> str | None:
    """The stage a not-covered question failed at (see the module doc), or None."""
    if row["covered"] is True or row.get("infra_failures"):
        return None
    failed = failed_gates(row)
    if not failed:
        return None
    if (row.get("errata") or {}).get("status") == "suspect":
        return "gold_suspect"
    if RETRIEVAL_GATES.intersection(failed):
        if ceiling_missed(row):
            return "reader"  # the evidence itself would not have been enough
        return "formation" if _formation_missed(row, trace) else "retrieval"
    if row.get("panel_split"):
        return "judge_split"
    return "reader"


def attribute(
    rows: Iterable[dict[str, Any]], traces: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Rows with `failure_stage` and the question's `evidence_memory` (what memory held of
    each evidence unit: `live` / `superseded` / `absent`, and the ids tracing to it)."""
    out = []
    for row in rows:
        trace = traces.get(row["question_id"])
        memory = (
            {"level": trace["level"], "held": trace["held"], "nodes": trace["nodes"]}
            if trace
            else None
        )
        out.append({**row, "failure_stage": failure_stage(row, trace), "evidence_memory": memory})
    return out


def _counts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    stages = Counter(r.get("failure_stage") for r in rows if r.get("failure_stage"))
    return {
        "questions": len(rows),
        "covered": sum(1 for r in rows if r["covered"] is True),
        **{stage: stages.get(stage, 0) for stage in STAGES},
        "unscored": sum(1 for r in rows if r.get("infra_failures")),
        # Neither covered nor failed at a stage: a gate was not taken (no judge, no label).
        "undecided": sum(
            1
            for r in rows
            if r["covered"] is not True
            and not r.get("failure_stage")
            and not r.get("infra_failures")
        ),
    }


def funnel(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """A tier's funnel: per question type (answerable) and for abstention apart, how many
    questions were covered and how many were lost at each stage."""
    rows = list(rows)
    answerable = [r for r in rows if not r["abstention"]]
    by_type: dict[str, list] = defaultdict(list)
    for r in answerable:
        by_type[r["question_type"]].append(r)
    return {
        "stages": list(STAGES),
        "answerable": _counts(answerable),
        "by_type": {t: _counts(rs) for t, rs in sorted(by_type.items())},
        "abstention": _counts([r for r in rows if r["abstention"]]),
    }


FUNNEL_COLUMNS = ("questions", *STAGES, "covered", "unscored", "undecided")


def funnel_markdown(tier_funnel: Mapping[str, Any] | None) -> list[str]:
    """The funnel as a table: one line per question type, answerable total, abstention."""
    if not tier_funnel:
        return []
    head = ["question type", *(c.replace("_", " ") for c in FUNNEL_COLUMNS)]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines = [
        *tier_funnel["by_type"].items(),
        ("**answerable**", tier_funnel["answerable"]),
        ("abstention", tier_funnel["abstention"]),
    ]
    for name, counts in lines:
        out.append(f"| {name} | " + " | ".join(str(counts[c]) for c in FUNNEL_COLUMNS) + " |")
    out.append("")
    return out


def memory_change(before: Mapping | None, after: Mapping | None) -> str:
    """What changed in a question's evidence memory between two runs, in a few words."""
    if not before or not after:
        return "not traced in both runs"
    held_b, held_a = before.get("held") or {}, after.get("held") or {}
    changes = [
        f"{unit} {held_b.get(unit, 'absent')}→{held_a.get(unit, 'absent')}"
        for unit in sorted(set(held_b) | set(held_a))
        if held_b.get(unit) != held_a.get(unit)
    ]
    if changes:
        return "; ".join(changes)
    nodes_b, nodes_a = before.get("nodes") or {}, after.get("nodes") or {}
    if nodes_b != nodes_a:
        return "same evidence held, by other memory nodes"
    return "evidence memory unchanged"
