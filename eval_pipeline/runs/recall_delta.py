"""The evidence-recall delta between two runs, per tier, beside the coverage delta.

Offline, coverage is mostly the reader's (does its passage give the answer?): two memories that
retrieve differently can cover the same questions. Evidence recall is the number that
separates them, so `compare` reports it with a paired test of its own. It never decides the
verdict: coverage does.

The outcome per question is the run's own gate recall (`score.scorer.evidence_recall`, the
`evidence_recall` metric of each row): recall_all@k at the gate's k, at the run's evidence
level — was *all* of the question's evidence in the top k? Paired as coverage is, with the
exact McNemar test on the questions measured in both runs. Left out, and counted apart:
abstention questions and questions with no labelled evidence (nothing to recall), and
questions whose retrieval was not measured in either run (unscored: never 0). Beside it, the
mean recall_any@k (some evidence in the top k) over the same pairs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel

from eval_pipeline.runs.load import ResultRow, RunBundle
from eval_pipeline.score.scorer import GATE_K
from eval_pipeline.score.stats import mcnemar_paired

ALPHA = 0.05
GATE_METRIC = "evidence_recall"
LEVELS = ("turn", "session")
ABSTENTION = "abstention question"
NOT_MEASURED = "not measured"  # in either run: its retrieval failed (infrastructure)

Pair = tuple[ResultRow, ResultRow]


class RecallDelta(BaseModel):
    """One tier's evidence-recall delta, candidate − base: reported, never deciding."""

    tier: str
    k: int  # the gate's k (`scoring.gate_k`, pinned as `pins.gate`)
    pairs: int  # answerable questions with evidence, measured in both runs
    # Left out: no evidence to recall (abstention, no labelled evidence), by reason...
    no_evidence: dict[str, int]
    unscored: int  # ... and not measured in one run or both (never counted as a miss)
    base_rate: float | None  # share of the pairs with all their evidence in the top k
    candidate_rate: float | None
    delta_pp: float | None
    b: int  # all evidence retrieved in base, not in candidate
    c: int  # all evidence retrieved in candidate, not in base
    p_value: float
    significant: bool | None  # McNemar p < ALPHA; None: nothing paired
    # Mean recall_any@k over the same pairs (some evidence in the top k).
    base_recall_any: float | None = None
    candidate_recall_any: float | None = None
    recall_any_delta_pp: float | None = None


def gate_k(run: RunBundle) -> int:
    """The k of the run's gate (`pins.gate.evidence_recall`, "recall_all@10")."""
    gate = run.pins.get("gate") if isinstance(run.pins.get("gate"), dict) else {}
    text = str((gate or {}).get("evidence_recall") or "")
    _, _, k = text.partition("@")
    return int(k) if k.isdigit() else GATE_K


def _level(row: ResultRow) -> str:
    """The evidence level the row's gate measured at: its reason names it ("turn
    recall_all@10 over ...", `score.scorer.evidence_recall`); turn when it does not say."""
    metric = row.metrics.get(GATE_METRIC)
    word = (metric.reason.split(" ", 1)[0] if metric else "") or "turn"
    return word if word in LEVELS else "turn"


def _left_out(row: ResultRow) -> str | None:
    """Why the question has no evidence to recall, or None when it has some."""
    if row.abstention:
        return ABSTENTION
    infra = (row.model_extra or {}).get("infra_failures") or []
    if any(isinstance(f, dict) and f.get("stage") == "retrieval" for f in infra):
        return None  # not measured, but it has evidence: unscored, not "no evidence"
    return (row.retrieval_metrics.get("excluded") or {}).get("all")


def _outcome(row: ResultRow) -> bool | None:
    """All evidence in the top k (the gate passed), not, or not measured (None)."""
    metric = row.metrics.get(GATE_METRIC)
    return None if metric is None else metric.passed


def _recall_any(row: ResultRow, k: int) -> float | None:
    values = (row.retrieval_metrics.get(_level(row)) or {}).get("all") or {}
    value = values.get(f"recall_any@{k}")
    return float(value) if value is not None else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _pp(base: float | None, candidate: float | None) -> float | None:
    return None if base is None or candidate is None else round((candidate - base) * 100, 9)


def recall_delta(tier: str, pairs: Sequence[Pair], k: int) -> RecallDelta:
    """The tier's paired evidence-recall delta over `pairs` (every question of the tier)."""
    no_evidence: Counter[str] = Counter()
    measured: list[Pair] = []
    unscored = 0
    for b, c in pairs:
        why = _left_out(b) or _left_out(c)
        if why is not None:
            no_evidence[why] += 1
        elif _outcome(b) is None or _outcome(c) is None:
            unscored += 1
        else:
            measured.append((b, c))
    base = [_outcome(b) for b, _ in measured]
    cand = [_outcome(c) for _, c in measured]
    test = mcnemar_paired(base, cand)
    base_rate = _mean([1.0 if x else 0.0 for x in base])
    cand_rate = _mean([1.0 if y else 0.0 for y in cand])
    # recall_any over the pairs where both runs have it (the same questions as above).
    anys = [(_recall_any(b, k), _recall_any(c, k)) for b, c in measured]
    anys = [(x, y) for x, y in anys if x is not None and y is not None]
    base_any = _mean([x for x, _ in anys])
    cand_any = _mean([y for _, y in anys])
    return RecallDelta(
        tier=tier,
        k=k,
        pairs=test.n_pairs,
        no_evidence=dict(sorted(no_evidence.items())),
        unscored=unscored,
        base_rate=base_rate,
        candidate_rate=cand_rate,
        delta_pp=_pp(base_rate, cand_rate),
        b=test.b,
        c=test.c,
        p_value=test.p_value,
        significant=None if not measured else test.p_value < ALPHA,
        base_recall_any=base_any,
        candidate_recall_any=cand_any,
        recall_any_delta_pp=_pp(base_any, cand_any),
    )


def recall_deltas(
    base: RunBundle, by_tier: dict[str, list[Pair]], tiers: Sequence[str]
) -> list[RecallDelta]:
    """Per tier, in `tiers` order; the gate's k is the base's (a comparability pin)."""
    k = gate_k(base)
    return [recall_delta(tier, by_tier.get(tier, []), k) for tier in tiers]


def _pct(value: float | None) -> str:
    return "unscored" if value is None else f"{100 * value:.1f}%"


def _delta(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1f} pp"


def left_out_text(d: RecallDelta) -> str:
    """ "abstention question 4, no evidence 1, unscored 1": each reason with its count."""
    parts = [f"{why} {n}" for why, n in d.no_evidence.items()]
    if d.unscored:
        parts.append(f"unscored {d.unscored}")
    return ", ".join(parts) or "none"


def recall_line(d: RecallDelta) -> str:
    """One line for the CLI: reported beside coverage, and saying it never decides."""
    verdict = {True: "significant", False: "not significant", None: "nothing paired"}[d.significant]
    anys = (
        ""
        if d.recall_any_delta_pp is None
        else f"; mean recall_any@{d.k} {_pct(d.base_recall_any)} → "
        f"{_pct(d.candidate_recall_any)} ({_delta(d.recall_any_delta_pp)})"
    )
    return (
        f"tier {d.tier} evidence recall (all evidence in the top {d.k}, the gate's "
        f"recall_all@{d.k}): {_pct(d.base_rate)} → {_pct(d.candidate_rate)} "
        f"({_delta(d.delta_pp)}, {d.pairs} paired; left out: {left_out_text(d)}); McNemar "
        f"b={d.b} c={d.c} p={d.p_value:.3g} → {verdict}{anys}; reported, coverage decides "
        "the verdict"
    )
