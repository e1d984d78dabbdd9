"""Deterministic evidence-recall metrics: recall_any@k, recall_all@k and NDCG@k.

Conventions follow LongMemEval's own retrieval evaluation so our numbers can be read next to
the published ones:

- relevance is binary (an id is evidence or it is not);
- recall_any@k = 1 if any gold id is in the top k, recall_all@k = 1 if every gold id is;
- DCG uses upstream's log2 discount, in which ranks 1 and 2 both carry full weight
  (rank r >= 2 is divided by log2(r)); `discount="standard"` gives the textbook 1/log2(r + 1);
- the ideal DCG puts min(k, |gold|) relevant items at the top;
- k larger than the ranked list simply looks at the whole list (missing ranks score nothing);
- a ranked list may repeat an id (several queries hit the same turn): only its first position
  counts and later copies are dropped, so they neither score twice nor push other ids down;
- an empty gold set has nothing to recall: every metric is None (excluded), never 0.

Which turns a retrieved item stands for is decided at retrieval time, through provenance: an
item naming memory nodes (a fact, chunk, episode or a plug-in's own node) carries the turns
those nodes' provenance edges lead to (`eval_pipeline.retrieve.provenance`), so a memory
system that rewrites text is scored on where its memory came from, not on the wording.

Session-level lists are derived from turn ids `<session_id>#<index>` in order of first
appearance, which is what upstream's "expand k until k distinct sessions" amounts to.

Which questions are scored: abstention questions (the answer is not in memory) are excluded
from EVERY level and variant, with reason "abstention question": averaging them into recall
would hide failures, so they are reported apart (as upstream's retrieval evaluation skips them).
The variants change which evidence turns count, never which questions:

- `upstream`: upstream indexes user turns only, so only user-role evidence turns (and their
  sessions) are gold; an answerable question with no user-side evidence is excluded here only
  (reason "no user-role evidence turn");
- `all`: every evidence turn (assistant-side evidence included), and every evidence session;
  an answerable question with no evidence at all is excluded (reason "no evidence").

Every excluded question keeps every metric key with value None and is listed with its reason
(`exclusion_set`, and `excluded` in summary.json), per variant.

The retrieved list itself is never filtered by role: an assistant turn the retriever returned
still occupies its rank; it is simply not gold in the upstream variant.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Literal

KS: tuple[int, ...] = (1, 3, 5, 10)
LEVELS: tuple[str, ...] = ("turn", "session")
VARIANTS: tuple[str, ...] = ("upstream", "all")
METRIC_NAMES: tuple[str, ...] = ("recall_any", "recall_all", "ndcg")

# Exclusion reasons, stable strings: they end up in results.jsonl and the report.
EXCLUDED_ABSTENTION = "abstention question"
EXCLUDED_NO_USER_EVIDENCE = "no user-role evidence turn"
EXCLUDED_NO_EVIDENCE = "no evidence"

Discount = Literal["upstream", "standard"]
MetricDict = dict[str, float | None]


def dedupe(ranked: Iterable[str]) -> list[str]:
    """Keep the first position of every id, preserving rank order."""
    seen: set[str] = set()
    out: list[str] = []
    for item in ranked:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def session_of(turn_id: str) -> str:
    """`<session_id>#<index>` -> `<session_id>` (session ids cannot contain '#')."""
    session_id, sep, index = turn_id.rpartition("#")
    if not sep or not session_id or not index.isdigit():
        raise ValueError(f"not a turn id of the form <session_id>#<index>: {turn_id!r}")
    return session_id


def sessions_from_turns(turn_ids: Iterable[str]) -> list[str]:
    """Ranked session list from a ranked turn list: order of first appearance."""
    return dedupe(session_of(t) for t in turn_ids)


def recall_any_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float | None:
    if not gold:
        return None
    top = set(dedupe(ranked)[:k])
    return 1.0 if any(g in top for g in gold) else 0.0


def recall_all_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float | None:
    if not gold:
        return None
    top = set(dedupe(ranked)[:k])
    return 1.0 if all(g in top for g in gold) else 0.0


def _weight(rank: int, discount: Discount) -> float:
    """Gain weight of a relevant item at 1-based `rank`."""
    if discount == "upstream":
        # Upstream's DCG: the first item undiscounted, then rel_r / log2(r) for r >= 2.
        return 1.0 if rank == 1 else 1.0 / math.log2(rank)
    if discount == "standard":
        return 1.0 / math.log2(rank + 1)
    raise ValueError(f"unknown discount {discount!r}")


def ndcg_at_k(
    ranked: Sequence[str],
    gold: Collection[str],
    k: int,
    *,
    discount: Discount = "upstream",
) -> float | None:
    if not gold:
        return None
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    gold_set = set(gold)
    dcg = sum(
        _weight(rank, discount)
        for rank, item in enumerate(dedupe(ranked)[:k], start=1)
        if item in gold_set
    )
    ideal = sum(_weight(rank, discount) for rank in range(1, min(k, len(gold_set)) + 1))
    return dcg / ideal


def metrics_at_ks(
    ranked: Sequence[str],
    gold: Collection[str],
    ks: Sequence[int] = KS,
    *,
    discount: Discount = "upstream",
) -> MetricDict:
    """`{"recall_any@1": .., "recall_all@1": .., "ndcg@1": .., ...}`; all None if no gold."""
    ranked = dedupe(ranked)
    out: MetricDict = {}
    for k in ks:
        out[f"recall_any@{k}"] = recall_any_at_k(ranked, gold, k)
        out[f"recall_all@{k}"] = recall_all_at_k(ranked, gold, k)
        out[f"ndcg@{k}"] = ndcg_at_k(ranked, gold, k, discount=discount)
    return out


def empty_metrics(ks: Sequence[int] = KS) -> MetricDict:
    """The same keys as `metrics_at_ks`, all None: the shape of an excluded question."""
    return {f"{name}@{k}": None for k in ks for name in METRIC_NAMES}


def unscored_metrics(reason: str, ks: Sequence[int] = KS) -> dict:
    """The `question_metrics` shape of a question nothing was measured for (its retrieval
    did not run to the end: an infrastructure failure), excluded from every variant."""
    result: dict = {level: {v: empty_metrics(ks) for v in VARIANTS} for level in LEVELS}
    result["excluded"] = {variant: reason for variant in VARIANTS}
    return result


def question_metrics(
    retrieved_turn_ids: Sequence[str],
    evidence_turn_roles: Mapping[str, str],
    evidence_session_ids: Iterable[str],
    abstention: bool,
    *,
    retrieved_session_ids: Sequence[str] | None = None,
    ks: Sequence[int] = KS,
    discount: Discount = "upstream",
) -> dict:
    """Every retrieval metric of one question, both levels and both variants.

    `evidence_turn_roles` maps each evidence turn id to its role ("user" / "assistant").
    `retrieved_session_ids` is for retrievers that rank sessions themselves; otherwise the
    session ranking is derived from the turn ranking.

    Returns `{"turn": {"upstream": {...}, "all": {...}}, "session": {...},
    "excluded": {"upstream": reason | None, "all": reason | None}}`. An abstention question is
    excluded from both variants; an excluded variant keeps every key with value None, so the
    layout never depends on the question.
    """
    if retrieved_session_ids is None:
        retrieved_session_ids = sessions_from_turns(retrieved_turn_ids)

    all_turns = set(evidence_turn_roles)
    user_turns = {t for t, role in evidence_turn_roles.items() if role == "user"}
    gold = {
        "upstream": {
            "turn": user_turns,
            # Upstream relabels an answer session with no user-side evidence as a non-answer.
            "session": {session_of(t) for t in user_turns},
        },
        "all": {
            "turn": all_turns,
            "session": set(evidence_session_ids) | {session_of(t) for t in all_turns},
        },
    }

    excluded: dict[str, str | None] = {"upstream": None, "all": None}
    if abstention:
        # Apart from every variant: the variants differ in which turns are gold, not which
        # questions are scored.
        excluded = dict.fromkeys(VARIANTS, EXCLUDED_ABSTENTION)
    else:
        if not user_turns:
            excluded["upstream"] = EXCLUDED_NO_USER_EVIDENCE
        if not gold["all"]["turn"] and not gold["all"]["session"]:
            excluded["all"] = EXCLUDED_NO_EVIDENCE

    ranked = {"turn": list(retrieved_turn_ids), "session": list(retrieved_session_ids)}
    result: dict = {level: {} for level in LEVELS}
    for level in LEVELS:
        for variant in VARIANTS:
            if excluded[variant] is not None:
                result[level][variant] = empty_metrics(ks)
            else:
                # A level whose own gold set is empty (e.g. sessions labelled but no turn
                # flagged) still yields None metrics through metrics_at_ks.
                result[level][variant] = metrics_at_ks(
                    ranked[level], gold[variant][level], ks, discount=discount
                )
    result["excluded"] = excluded
    return result


def exclusion_set(per_question: Mapping[str, Mapping]) -> dict[str, dict[str, str]]:
    """`{variant: {question_id: reason}}` over a batch of `question_metrics` results."""
    out: dict[str, dict[str, str]] = {variant: {} for variant in VARIANTS}
    for question_id, metrics in per_question.items():
        for variant, reason in metrics["excluded"].items():
            if reason is not None:
                out[variant][question_id] = reason
    return out
