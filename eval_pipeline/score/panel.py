"""The judge panel: the same hypotheses scored by several verdict methods or judge models.

A run's main judge decides `covered`. A panel (`--judge-panel A,B,...`) asks, beside it, how
far that decision depends on the judge: each member gives the answer_judge verdict of every
question (`verdicts.judge_answer`), and the question's coverage is decided again by the gate
with that verdict in place of the main one (`member_coverage`). `compare` then calls a delta
real only when it holds under every member (`runs.compare`).

A member is `METHOD` (a method that needs no model: `match`), `METHOD=MODEL` (`MODEL` as
`--judge` takes it) or a bare `MODEL` (the run's `--judge-verdict` method with that model; none
asked: the default with a model, `reference`, as for the main judge: `score.verdict_choice`).
Its key, in rows, summaries and pins, is the canonical `METHOD` or `METHOD=MODEL`.

Row fields: `judge_panel` {member: score | null}, `panel_covered` {member: bool | null},
`panel_split` (true when the members that judged the question disagree; null when fewer
than two did). A score not taken is null, never 0.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eval_pipeline.llm.config import parse_provider_spec
from eval_pipeline.llm.errors import LLMConfigError
from eval_pipeline.score.gate import MetricResult, decide_coverage
from eval_pipeline.score.stats import bootstrap_ci
from eval_pipeline.score.verdict_choice import choose_verdict
from eval_pipeline.score.verdicts import METHODS, judge_answer, method, method_hash

if TYPE_CHECKING:
    from eval_pipeline.llm import LLMLayer

OPTION = "--judge-panel"
MIN_MEMBERS = 2
NOT_JUDGED = "not judged: retrieval was not measured (infrastructure failure)"
# Questions judged at once by a member that needs no model (no provider to spare).
OFFLINE_CONCURRENCY = 16

Item = tuple[Mapping[str, Any], str | None]  # (golden, answer); None: not judged


class PanelError(ValueError):
    """A panel that cannot work; one line naming the member."""


@dataclass(frozen=True)
class PanelMember:
    method: str
    model: str | None  # None: the method needs no model

    @property
    def key(self) -> str:
        return self.method if self.model is None else f"{self.method}={self.model}"


def _model(spec: str, text: str, what: str = "") -> str | None:
    """A member's model spec, checked as `--judge` checks one; `offline` is no model."""
    try:
        parsed = parse_provider_spec(text)
    except (LLMConfigError, ValueError) as exc:
        raise PanelError(f"member {spec!r}: {what}{' '.join(str(exc).split())}") from None
    return None if parsed.provider == "offline" else text.strip()


def parse_member(spec: str, run_verdict: str | None) -> PanelMember:
    """One member; `run_verdict` is the run's `--judge-verdict` as given (None: not given)."""
    text = spec.strip()
    if not text:
        raise PanelError("an empty member (A,B,... with nothing between two commas)")
    if "=" in text:
        name, model_text = (p.strip() for p in text.split("=", 1))
        if name not in METHODS:
            raise PanelError(
                f"member {spec!r}: unknown verdict method {name!r} (one of {', '.join(METHODS)})"
            )
        model = _model(spec, model_text)
    elif text in METHODS:
        name, model = text, None
    else:  # a bare model: the run's own verdict method with it, chosen as the run's is
        known = f"neither a verdict method ({', '.join(METHODS)}) nor a model: "
        model = _model(spec, text, known)
        name = choose_verdict(run_verdict, with_model=model is not None).method
        if model is None and not method(name).needs_model:
            # `offline` under a model-free method is that method itself.
            return PanelMember(name, None)
    m = method(name)
    if m.needs_model and model is None:
        raise PanelError(
            f"member {spec!r}: method {name} needs a judge model; give {name}=MODEL "
            f"(e.g. {name}=local:smollm2-135m-instruct)"
        )
    if not m.needs_model and model is not None:
        raise PanelError(f"member {spec!r}: method {name} needs no model; give it alone ({name})")
    return PanelMember(name, model)


def split_specs(value: Any) -> Any:
    """The CLI's `A,B,...` as a list; a list (a --config file) as it is."""
    if isinstance(value, str):
        return [p.strip() for p in value.split(",")] if value.strip() else []
    return value


def parse_panel(specs: Sequence[str], run_verdict: str | None) -> list[PanelMember]:
    """The members of a panel, checked: each known and well-formed, none twice, at least
    two (a panel of one measures nothing the main judge does not). Empty: no panel.
    `run_verdict`: the run's `--judge-verdict` as given (None: not given)."""
    if not specs:
        return []
    members: list[PanelMember] = []
    seen: dict[str, str] = {}
    for spec in specs:
        member = parse_member(spec, run_verdict)
        if member.key in seen:
            raise PanelError(f"member {spec!r} repeats {seen[member.key]!r} ({member.key})")
        seen[member.key] = spec
        members.append(member)
    if len(members) < MIN_MEMBERS:
        raise PanelError(
            f"needs at least {MIN_MEMBERS} members, got {len(members)} ({members[0].key})"
        )
    return members


def models(members: Sequence[PanelMember]) -> list[str]:
    """The distinct judge models of a panel, in member order: one LLM layer each."""
    return list(dict.fromkeys(m.model for m in members if m.model is not None))


def member_pin(member: PanelMember, role: dict[str, Any] | None) -> dict[str, Any]:
    """What a member's verdicts are pinned by: its method's hash and its model's role pins
    (for `local`, the weights' sha256)."""
    return {
        "member": member.key,
        "method": member.method,
        "method_hash": method_hash(member.method),
        "model": member.model,
        "role": role,
    }


# --- judging -------------------------------------------------------------------------------


async def _judge_all(
    name: str,
    role: Any,
    items: Sequence[Item | None],
    concurrency: int,
    progress: Callable[[], None] | None = None,
) -> list[MetricResult]:
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(item: Item | None) -> MetricResult:
        if item is None:
            result = MetricResult.unscored(NOT_JUDGED, gating=True)
        else:
            async with gate:
                result = await judge_answer(name, role, item[0], item[1])
        if progress is not None:
            progress()
        return result

    return list(await asyncio.gather(*(one(i) for i in items)))


def judge_panel(
    members: Sequence[PanelMember],
    items: Sequence[Item | None],
    layers: Mapping[str, LLMLayer],
    concurrency: Mapping[str, int] | None = None,
    progress: Callable[[], None] | None = None,
) -> list[dict[str, MetricResult]]:
    """Per item (in order), each member's answer_judge result. `layers` holds one layer per
    model of the panel (`models`), its judge role the member's model; `progress()` after
    each member's verdict on an item."""
    per_member: dict[str, list[MetricResult]] = {}
    for member in members:
        if member.model is None:
            coro = _judge_all(member.method, None, items, OFFLINE_CONCURRENCY, progress)
            per_member[member.key] = asyncio.run(coro)
            continue
        layer = layers[member.model]
        limit = (concurrency or {}).get(member.model, 1)
        coro = _judge_all(member.method, layer.role("judge"), items, limit, progress)
        per_member[member.key] = layer.run_sync(coro)
    return [{key: results[i] for key, results in per_member.items()} for i in range(len(items))]


def member_coverage(row: Mapping[str, Any], result: MetricResult) -> bool | None:
    """The row's coverage with `result` as its answer_judge, decided by the gate. A question
    retrieval or reading left unmeasured stays unscored; the main judge's own failure does
    not decide for another judge."""
    if any(f.get("stage") != "judge" for f in row.get("infra_failures") or []):
        return None
    metrics = {name: MetricResult.model_validate(m) for name, m in row["metrics"].items()}
    metrics["answer_judge"] = result
    covered, _ = decide_coverage(metrics, row["payload_tokens"], abstention=row["abstention"])
    return covered


def panel_fields(row: Mapping[str, Any], results: Mapping[str, MetricResult]) -> dict[str, Any]:
    """The row's panel fields from each member's result."""
    scores = {key: r.score for key, r in results.items()}
    judged = [s for s in scores.values() if s is not None]
    return {
        "judge_panel": scores,
        "panel_covered": {key: member_coverage(row, r) for key, r in results.items()},
        "panel_split": None if len(judged) < MIN_MEMBERS else len(set(judged)) > 1,
    }


# --- summary -------------------------------------------------------------------------------


def _ci(outcomes: list[bool | None]) -> dict[str, Any] | None:
    est = bootstrap_ci(outcomes)
    return None if est is None else est.as_dict()


def _split(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    ids = [r["question_id"] for r in rows if r.get("panel_split") is True]
    return {"questions": len(ids), "question_ids": ids}


def panel_members(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The member keys the rows were judged by, in first-seen order."""
    return list(dict.fromkeys(k for r in rows for k in r.get("judge_panel") or {}))


def tier_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Per member: coverage of the answerable questions (overall and per type), the
    abstention questions' apart, and how many it left unjudged; the split questions."""
    keys = panel_members(rows)
    if not keys:
        return None
    answerable = [r for r in rows if not r["abstention"]]
    abstaining = [r for r in rows if r["abstention"]]

    def covered(rs: Sequence[Mapping[str, Any]], key: str) -> list[bool | None]:
        return [(r.get("panel_covered") or {}).get(key) for r in rs]

    members = {}
    for key in keys:
        by_type: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for r in answerable:
            by_type[r["question_type"]].append(r)
        members[key] = {
            "coverage": _ci(covered(answerable, key)),
            "coverage_by_type": {t: _ci(covered(rs, key)) for t, rs in sorted(by_type.items())},
            "abstention_coverage": _ci(covered(abstaining, key)),
            "unjudged": sum(1 for r in rows if (r.get("judge_panel") or {}).get(key) is None),
        }
    return {"members": members, "split": _split(rows)}


def run_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The run's panel: its members and every question it splits on (all tiers)."""
    keys = panel_members(rows)
    return {"members": keys, "split": _split(rows)} if keys else None
