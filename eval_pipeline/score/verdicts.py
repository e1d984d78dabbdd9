"""How the answer judge reaches its yes/no: the verdict methods, measured by `judge-check`.

A method combines up to two sources, both computed per item: the deterministic rules of
`score.answer_match` (a verdict for the clear cases, a reference coverage for every item) and
a model's verdict under one of two prompts (`reference`, LongMemEval's protocol, the
reference judge; `reasoned`, the same rules with the reasoning written before the verdict).

    reference  the model, LongMemEval's prompt (needs a model)
    reasoned   the model, reasoning first (needs a model)
    match      the rules; an undecided item is yes when its coverage reaches `threshold`
               (`rubric_threshold` for a preference rubric). No model: runs anywhere
    hybrid     the rules; an undecided item goes to the model (reference prompt)
    cascade    the rules; an undecided item is decided by coverage outside the band
               [`band_low`, `band_high`], and only inside it by the model (reference prompt)

The parameters are tuned by `judge-check`'s cross-validation (`tune`, on training folds
only); `DEFAULT_PARAMS` are the values tuned on the project's whole labelled set, and every
parameter is in the method's hash (`method_hash`), a comparability pin like a prompt hash.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from eval_pipeline.score.answer_match import MATCH_RULES_VERSION, Match, decide
from eval_pipeline.score.gate import MetricResult
from eval_pipeline.score.judge_prompt import (
    longmemeval_judge,
    prompt_hash,
    reasoned_judge,
    reasoned_prompt_hash,
)

if TYPE_CHECKING:
    from eval_pipeline.llm import RoleClient

Verdict = Literal["yes", "no"]
Prompt = Literal["reference", "reasoned"]
VERDICTS_VERSION = 1


@dataclass(frozen=True)
class Params:
    """`match`'s two thresholds chosen on a grid against GPT-4o's verdicts on the dev runs
    (docs/judge.md#measured: 2,000 published answers; the same grid on the project's set
    picks them too), the cascade's band by `tune` on the project's labelled set with
    `local:qwen2.5-coder-1.5b-instruct` answering inside it. `judge-check` reports each method
    cross-validated on the project's set, never with these on the items they were fitted to."""

    threshold: float = 0.6
    rubric_threshold: float = 0.3
    band_low: float = 0.5
    band_high: float = 1.01  # above 1: coverage alone never says yes, the model reads those


DEFAULT_PARAMS = Params()


@dataclass(frozen=True)
class Method:
    name: str
    prompt: Prompt | None  # the model prompt it reads; None: no model
    uses_rules: bool
    tuned: tuple[str, ...]  # the Params fields cross-validation tunes
    description: str

    @property
    def needs_model(self) -> bool:
        return self.prompt is not None


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("reference", "reference", False, (), "the model, LongMemEval's prompt"),
        Method("reasoned", "reasoned", False, (), "the model, reasoning before the verdict"),
        Method(
            "match",
            None,
            True,
            ("threshold", "rubric_threshold"),
            "deterministic rules, coverage threshold for the rest (no model)",
        ),
        Method(
            "hybrid", "reference", True, (), "rules for the clear cases, the model for the rest"
        ),
        Method(
            "cascade",
            "reference",
            True,
            ("band_low", "band_high", "rubric_threshold"),
            "rules, then coverage outside a band, the model only inside it",
        ),
    )
}
REFERENCE_METHOD = "reference"
DEFAULT_METHOD = "match"  # with no judge model (score.verdict_choice): needs none, best measured
# The grids `tune` searches (coarse on purpose: 174 items do not support finer ones).
GRID = {
    "threshold": (0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0),
    "rubric_threshold": (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 1.01),
    "band_low": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5),
    "band_high": (0.6, 0.7, 0.8, 0.9, 1.01),
}


class MethodError(ValueError):
    """An unknown verdict method: one line naming the known ones."""


def method(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise MethodError(
            f"unknown judge verdict method {name!r} (one of {', '.join(METHODS)})"
        ) from None


def method_hash(name: str, params: Params = DEFAULT_PARAMS) -> str:
    """sha256 over what decides a method's verdicts: its prompt's hash, its rules' version and
    the parameters it reads."""
    m = method(name)
    body: dict[str, Any] = {"method": m.name, "version": VERDICTS_VERSION}
    if m.prompt == "reference":
        body["prompt"] = prompt_hash()
    elif m.prompt == "reasoned":
        body["prompt"] = reasoned_prompt_hash()
    if m.uses_rules:
        body["rules"] = MATCH_RULES_VERSION
        # The parameters it reads are the ones it tunes.
        body["params"] = {k: asdict(params)[k] for k in sorted(m.tuned)}
    if m.name == REFERENCE_METHOD:
        return prompt_hash()  # the reference judge keeps the hash runs have always pinned
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def rules_match(golden: Mapping[str, Any], answer: str) -> Match:
    meta = golden["additional_metadata"]
    return decide(
        str(golden["expected_output"]),
        answer,
        question_type=str(meta.get("question_type") or ""),
        abstention=bool(meta.get("abstention")),
        question=str(golden.get("input") or ""),
    )


def is_rubric(golden: Mapping[str, Any]) -> bool:
    return golden["additional_metadata"].get("question_type") == "single-session-preference"


def combine(
    name: str,
    match: Match | None,
    model: Verdict | None,
    *,
    rubric: bool,
    params: Params = DEFAULT_PARAMS,
) -> tuple[Verdict | None, str]:
    """One method's verdict from the rules' Match and the model's verdict (None: the model
    gave none, or was not asked), and which source decided. Pure: cross-validation calls it."""
    m = method(name)
    if not m.uses_rules:
        return model, "model"
    assert match is not None
    if match.verdict is not None:
        return match.verdict, f"rules: {match.rule}"
    if m.name == "match":
        t = params.rubric_threshold if rubric else params.threshold
        return ("yes" if match.coverage >= t else "no"), f"coverage {match.coverage:.2f} vs {t}"
    if m.name == "cascade":
        if rubric:
            t = params.rubric_threshold
            return ("yes" if match.coverage >= t else "no"), f"rubric coverage {match.coverage:.2f}"
        if match.coverage >= params.band_high:
            return "yes", f"coverage {match.coverage:.2f} above the band"
        if match.coverage <= params.band_low:
            return "no", f"coverage {match.coverage:.2f} below the band"
    return model, "model"


def needs_model_call(name: str, match: Match | None, *, rubric: bool, params: Params) -> bool:
    """Whether this item's verdict under `name` reads the model (so the call can be skipped)."""
    m = method(name)
    if not m.needs_model:
        return False
    if not m.uses_rules:
        return True
    return combine(name, match, "yes", rubric=rubric, params=params)[1] == "model"


async def judge_answer(
    name: str,
    role: RoleClient | None,
    golden: Mapping[str, Any],
    answer: str | None,
    params: Params = DEFAULT_PARAMS,
) -> MetricResult:
    """The answer judge's MetricResult under method `name` (the model is called only when
    the method needs it for this item; no model and needing one: unscored)."""
    if answer is None:
        return MetricResult.unscored("no answer was produced", gating=True)
    m = method(name)
    match = rules_match(golden, answer) if m.uses_rules else None
    rubric = is_rubric(golden)
    model: Verdict | None = None
    reason = ""
    # The rubric each source applied (the rules', the model's), recorded on the verdict.
    applied: set[str] = set() if match is None else {match.rubric_applied}
    if needs_model_call(name, match, rubric=rubric, params=params):
        if role is None or role.is_offline:
            return MetricResult.unscored(
                f"unscored: method {name} needs a judge model", gating=True
            )
        call = reasoned_judge if m.prompt == "reasoned" else longmemeval_judge
        result = await call(role, golden, answer)
        if result.score is None:
            return result
        model, reason = ("yes" if result.score == 1.0 else "no"), result.reason
        if result.rubric is not None:
            applied.add(result.rubric)
    verdict, source = combine(name, match, model, rubric=rubric, params=params)
    if verdict is None:  # pragma: no cover - combine reads the model only when asked for it
        return MetricResult.unscored("judge gave no verdict", gating=True)
    why = reason if source == "model" else source
    applied_rubric = applied.pop() if len(applied) == 1 else "mixed" if applied else None
    return MetricResult.judged(
        1.0 if verdict == "yes" else 0.0, 1.0, why, gating=True, rubric=applied_rubric
    )


# --------------------------------------------------------------------------------------------
# tuning (judge-check's cross-validation)


class ItemInputs(BaseModel):
    """What every method's verdict on one item is computed from."""

    id: str
    label: Verdict
    rubric: bool
    match: dict[str, Any] | None = None  # Match as a dict (verdict, rule, coverage, refusal)
    model: dict[str, Verdict | None] = Field(default_factory=dict)  # prompt -> verdict

    def match_obj(self) -> Match | None:
        return Match(**self.match) if self.match is not None else None


def verdicts_of(
    name: str, items: Sequence[ItemInputs], params: Params = DEFAULT_PARAMS
) -> list[Verdict | None]:
    m = method(name)
    return [
        combine(
            name,
            i.match_obj(),
            i.model.get(m.prompt) if m.prompt else None,
            rubric=i.rubric,
            params=params,
        )[0]
        for i in items
    ]


def _kappa(labels: Sequence[str], verdicts: Sequence[str | None]) -> float:
    from eval_pipeline.score.agreement import cohen_kappa

    pairs = [(lab, v) for lab, v in zip(labels, verdicts, strict=True) if v is not None]
    if not pairs:
        return float("-inf")
    k = cohen_kappa([p[0] for p in pairs], [p[1] for p in pairs])  # type: ignore[misc]
    return float("-inf") if k is None else k


def tune(name: str, items: Sequence[ItemInputs]) -> Params:
    """The grid point of the method's tuned parameters with the best kappa on `items`
    (ties: the first in grid order, so the result is deterministic)."""
    m = method(name)
    if not m.tuned:
        return DEFAULT_PARAMS
    best, best_k = DEFAULT_PARAMS, float("-inf")
    labels = [i.label for i in items]
    for values in itertools.product(*(GRID[p] for p in m.tuned)):
        cand = replace(DEFAULT_PARAMS, **dict(zip(m.tuned, values, strict=True)))
        if cand.band_low >= cand.band_high:
            continue
        k = _kappa(labels, verdicts_of(name, items, cand))
        if k > best_k + 1e-12:
            best, best_k = cand, k
    return best


def folds(items: Sequence[ItemInputs], k: int, seed: int) -> list[list[int]]:
    """k folds stratified by label, items shuffled by a seeded generator."""
    import random

    rng = random.Random(seed)
    out: list[list[int]] = [[] for _ in range(k)]
    for label in ("yes", "no"):
        idx = [n for n, i in enumerate(items) if i.label == label]
        rng.shuffle(idx)
        for j, n in enumerate(idx):
            out[j % k].append(n)
    return [sorted(f) for f in out]


def cross_validated(
    name: str, items: Sequence[ItemInputs], *, k: int = 5, seed: int = 0
) -> tuple[list[Verdict | None], list[Params]]:
    """Held-out verdicts of every item: each fold judged with parameters tuned on the others."""
    out: list[Verdict | None] = [None] * len(items)
    chosen: list[Params] = []
    for fold in folds(items, k, seed):
        held = set(fold)
        params = tune(name, [i for n, i in enumerate(items) if n not in held])
        chosen.append(params)
        for n, v in zip(fold, verdicts_of(name, [items[n] for n in fold], params), strict=True):
            out[n] = v
    return out, chosen
