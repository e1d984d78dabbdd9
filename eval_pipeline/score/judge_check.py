"""`eval-pipeline judge-check`: run a judge over the labelled set, exactly as scoring runs it.

Exactly as scoring means the same code path, not a copy of it: every item is judged by the
scoring functions themselves, on the layer scoring builds:

- every item (tier 1 and tier 2) by `judges.longmemeval_judge`, the `answer_judge` metric
  that gates coverage, on `judge_labels.as_golden(item)`: the same instruction per type,
  abstention and tier, the same user message; pinned by `judges.prompt_hash()`;
- the tier-2 items that name a golden also by tier 2's invariant judge
  (`tier2.invariant_judge.invariant_judge`), against that golden's signal events; pinned by
  `invariant_prompt_hash()`, labelled by `invariant_items` (the invariant verdict).

The layer is `llm.layer.layer_for`, the builder scoring judges with: same
provider settings, same response cache (`<state dir>`), no sample identity (as in a run
without repeats), so a check and a run share cached verdicts of identical calls.

The criteria judge is not checked: its score is a sum of authored criterion weights, and the
labels are not verdicts of that protocol.

The bias probes go through the answer judge too; the order probe is reported not applicable
(its prompt fixes the order, see `agreement.ORDER_FIXED_NOTE`).

Output, in DIR: `verdicts.jsonl` + `agreement.json` (the answer judge) and, when the label
set has tier-2 items naming a golden, `invariant_judge/verdicts.jsonl` + `agreement.json`.
Each result is also put in the `AgreementStore` (default `<state dir>/judge_agreement/`),
keyed by judge spec and prompt hash, where a run's manifest, `compare`, the report and the
`judge_agreement` asset find it. The store lives under the state dir, beside the runs whose
manifests it pins: one EVAL_PIPELINE_HOME is one set of runs and the checks of their judges,
and a test or a scratch home never leaks a check into another.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval_pipeline.corpus.judge_labels import (
    DEFAULT_LABELS,
    JudgeLabelError,
    LabelIssue,
    LabelItem,
    LabelSet,
    ProbePair,
    ProbeSet,
    as_golden,
    invariant_items,
    load_labels,
    load_probes,
)
from eval_pipeline.llm import LLMLayer
from eval_pipeline.llm.layer import layer_for
from eval_pipeline.llm.role_check import ModelRoleError, check_model_roles
from eval_pipeline.score.agreement import (
    AgreementResult,
    AgreementStore,
    CheckFiles,
    ProbeReport,
    VerdictRecord,
    agreement_pin,
    compute_agreement,
    lookup_agreement,
    probe_report,
    probe_verdicts,
    verdict_record,
    write_check,
)
from eval_pipeline.score.gate import MetricResult
from eval_pipeline.score.judges import longmemeval_judge, prompt_hash
from eval_pipeline.settings import state_dir
from eval_pipeline.tier2.invariant_judge import (
    InvariantResult,
    invariant_judge,
    invariant_prompt_hash,
    invariant_verdict,
)

CHECKS_DIRNAME = "judge_checks"
INVARIANT_SUBDIR = "invariant_judge"
ANSWER_KIND = "answer_judge"
INVARIANT_KIND = "invariant_judge"
DEFAULT_CONCURRENCY = 4


class JudgeCheckError(ValueError):
    """A bad option or input of judge-check: one line, before any call is made."""


@dataclass(frozen=True)
class JudgeCheckOutcome:
    out_dir: Path
    answer: CheckFiles
    invariant: CheckFiles | None
    stored: list[Path]
    wall_s: float
    usage: dict[str, Any] | None


def one_line(exc: JudgeLabelError) -> str:
    """A label-file error as one line: the first problem (file:line: item: field: message),
    and how many more there are."""
    first: LabelIssue = exc.issues[0]
    more = len(exc.issues) - 1
    return f"{first}" + (f" (and {more} more problem(s) in the file)" if more else "")


def default_out_dir(judge: str, now: datetime | None = None) -> Path:
    """A fresh directory under `<state dir>/judge_checks/`, named by time and judge."""
    now = now or datetime.now(UTC)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", judge.split("@", 1)[0]).strip("-")[:60]
    base = state_dir() / CHECKS_DIRNAME / f"{now.strftime('%Y%m%dT%H%M%SZ')}-{slug}"
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def tier2_goldens() -> dict[str, dict[str, Any]]:
    from eval_pipeline.tier2 import load_tier2

    return {g["name"]: g for g in load_tier2().goldens}


def _line_of(path: str | Path, item_id: str) -> int | None:
    """The line of a label file that holds `item_id` (the loader does not keep lines)."""
    try:
        for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if line.strip() and json.loads(line).get("id") == item_id:
                return n
    except (OSError, ValueError, AttributeError):
        return None
    return None


def check_goldens(labels: LabelSet, goldens: Mapping[str, Any], source: str | Path) -> None:
    """Every golden an item names exists in the tier-2 corpus (else one line naming it)."""
    for item in labels.items:
        if item.golden is not None and item.golden not in goldens:
            line = _line_of(source, item.id)
            where = f"{labels.path}:{line}" if line is not None else labels.path
            raise JudgeCheckError(
                f"{where}: item {item.id!r}: field 'golden': {item.golden!r} is not a "
                "golden of the tier-2 corpus (corpus/tier2/)"
            )


def check_judge_spec(judge: str) -> str:
    """The judge spec, checked as `run --judge` is checked (parses, credentials present)."""
    judge = judge.strip()
    if judge in ("", "offline"):
        raise JudgeCheckError(
            "--judge: judge-check needs a judge model (PROVIDER:MODEL[@BASE_URL]); 'offline' "
            "gives no verdict at all"
        )
    try:
        check_model_roles({"--judge": judge})
    except ModelRoleError as exc:
        raise JudgeCheckError(str(exc)) from None
    return judge


class _Progress:
    """A line on stderr every `every` judged calls: a CPU model takes minutes."""

    def __init__(self, total: int, stream: Any, every: int = 10) -> None:
        self.total, self.done, self.every, self.stream = total, 0, every, stream
        self.started = time.monotonic()

    def tick(self) -> None:
        self.done += 1
        if self.stream is not None and (self.done % self.every == 0 or self.done == self.total):
            spent = time.monotonic() - self.started
            print(
                f"judge-check: {self.done}/{self.total} calls ({spent:.0f} s)",
                file=self.stream,
                flush=True,
            )


async def _gathered(
    calls: Sequence[Callable[[], Any]], concurrency: int, progress: _Progress
) -> list[Any]:
    gate = asyncio.Semaphore(concurrency)

    async def one(call):
        async with gate:
            result = await call()
        progress.tick()
        return result

    return list(await asyncio.gather(*(one(c) for c in calls)))


def _probe_sides(pairs: Sequence[ProbePair]) -> list[tuple[ProbePair, str]]:
    """The (pair, side) calls the probes need: the order probe is not run (fixed prompt)."""
    return [(p, side) for p in pairs if p.probe != "response_order" for side in ("a", "b")]


def scoring_judge_layer(judge: str) -> LLMLayer:
    """The layer scoring builds for this judge (`layer_for`, its own builder, not a copy
    of it: same provider settings, same cache, no sample identity as in a non-repeat run)."""
    layer = layer_for({"judge": (judge, {})})
    if layer is None:  # pragma: no cover - check_judge_spec refuses offline first
        raise JudgeCheckError("--judge: offline gives no verdict")
    return layer


def run_judge_check(
    judge: str,
    *,
    labels: str | Path | None = None,
    probes: str | Path | None = None,
    with_probes: bool = True,
    with_invariant: bool = True,
    out_dir: str | Path | None = None,
    store: AgreementStore | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    layer: LLMLayer | None = None,
    progress_stream: Any = sys.stderr,
) -> JudgeCheckOutcome:
    """Judge every labelled item (and the probes), write both files, store the results.

    Every input is checked before the first call (JudgeCheckError, one line). `layer` is for
    tests that bring their own; by default it is the one scoring builds for `judge`."""
    if concurrency < 1:
        raise JudgeCheckError(f"--concurrency must be at least 1, got {concurrency}")
    try:
        label_set = load_labels(labels)
        probe_set = load_probes(probes) if with_probes else None
    except JudgeLabelError as exc:
        raise JudgeCheckError(one_line(exc)) from None
    inv_set = invariant_items(label_set)
    if not with_invariant:
        inv_set = LabelSet(path=inv_set.path, sha256=inv_set.sha256, items=[])
    goldens = tier2_goldens() if any(i.golden for i in label_set.items) else {}
    check_goldens(label_set, goldens, labels if labels is not None else DEFAULT_LABELS)
    judge = check_judge_spec(judge) if layer is None else judge.strip()
    out = Path(out_dir) if out_dir is not None else default_out_dir(judge)
    if out.exists() and not out.is_dir():
        raise JudgeCheckError(f"--out {out}: exists and is not a directory")
    store = store or AgreementStore()

    own_layer = layer is None
    layer = layer or scoring_judge_layer(judge)
    started = time.monotonic()
    try:
        role = layer.role("judge")
        universe = None
        if inv_set.items:
            from eval_pipeline.tier2.load import load_universe

            universe = load_universe()
        probe_calls = _probe_sides(probe_set.pairs) if probe_set else []
        progress = _Progress(len(label_set) + len(inv_set) + len(probe_calls), progress_stream)

        def answer_call(golden: Mapping[str, Any], response: str) -> Callable[[], Any]:
            return lambda: longmemeval_judge(role, golden, response)

        def invariant_call(item: LabelItem) -> Callable[[], Any]:
            golden = {**goldens[item.golden], "input": item.question}  # type: ignore[index]
            return lambda: invariant_judge(role, golden, item.response, universe=universe)

        # In this order (the calls start in it): the labelled items, the probes, then the
        # invariant judge's longer calls; an interrupted check resumes from the cache.
        calls: list[Callable[[], Any]] = [
            *(answer_call(as_golden(i), i.response) for i in label_set.items),
            *(answer_call(as_golden(p), p.variant(s).response) for p, s in probe_calls),
            *(invariant_call(i) for i in inv_set.items),
        ]
        results = layer.run_sync(_gathered(calls, concurrency, progress))
        usage = layer.snapshot().to_metadata()
    finally:
        if own_layer:
            layer.close()
    wall = time.monotonic() - started
    measured_at = datetime.now(UTC).isoformat()

    n_answer, n_probe = len(label_set), len(probe_calls)
    answer_results: list[MetricResult] = results[:n_answer]
    probe_results: list[MetricResult] = results[n_answer : n_answer + n_probe]
    inv_results: list[InvariantResult] = results[n_answer + n_probe :]

    report = _probes(probe_set, probe_calls, probe_results) if probe_set else None
    records = [verdict_record(i, r) for i, r in zip(label_set.items, answer_results, strict=True)]
    answer = compute_agreement(
        label_set,
        records,
        judge_model=judge,
        prompt_hash=prompt_hash(),
        judge_kind=ANSWER_KIND,
        probes=report,
        measured_at=measured_at,
    )
    written = write_check(out, records, answer)
    stored = [store.put(written.result)]
    inv_written = None
    if inv_set.items:
        inv_records = [
            invariant_record(i, r) for i, r in zip(inv_set.items, inv_results, strict=True)
        ]
        inv = compute_agreement(
            inv_set,
            inv_records,
            judge_model=judge,
            prompt_hash=invariant_prompt_hash(),
            judge_kind=INVARIANT_KIND,
            measured_at=measured_at,
        )
        inv_written = write_check(out / INVARIANT_SUBDIR, inv_records, inv)
        stored.append(store.put(inv_written.result))
    return JudgeCheckOutcome(out, written, inv_written, stored, wall, usage)


def invariant_record(item: LabelItem, result: InvariantResult) -> VerdictRecord:
    """One verdicts.jsonl line of the invariant judge: pass = yes (`invariant_verdict`)."""
    verdict = invariant_verdict(result)
    reason = result.reason if verdict is not None else (result.error or result.reason)
    return VerdictRecord(id=item.id, label=item.label, verdict=verdict, reason=reason or "")


def _probes(
    probe_set: ProbeSet,
    calls: Sequence[tuple[ProbePair, str]],
    results: Sequence[MetricResult],
) -> ProbeReport:
    sides: dict[str, dict[str, MetricResult]] = {}
    for (pair, side), result in zip(calls, results, strict=True):
        sides.setdefault(pair.id, {})[side] = result
    by_id = {p.id: p for p in probe_set.pairs}
    verdicts = [probe_verdicts(by_id[pid], s["a"], s["b"]) for pid, s in sides.items()]
    return probe_report(probe_set, verdicts, order_can_vary=False)


def summary_lines(outcome: JudgeCheckOutcome) -> list[str]:
    """What the CLI prints: per judge kind its agreement, then the probes."""
    out = [agreement_line(outcome.answer.result)]
    if outcome.invariant is not None:
        out.append(agreement_line(outcome.invariant.result))
    probes = outcome.answer.result.probes
    for res in probes.results.values() if probes else []:
        if res.status != "measured":
            out.append(f"  probe {res.probe}: not applicable ({res.note})")
        elif res.delta is None:
            out.append(f"  probe {res.probe}: no pair judged on both sides")
        else:
            ci = (
                f" [{res.delta_low:+.2f}, {res.delta_high:+.2f}]"
                if res.delta_low is not None
                else ""
            )
            out.append(
                f"  probe {res.probe}: yes-rate {res.a} {res.yes_rate_a:.2f} → {res.b} "
                f"{res.yes_rate_b:.2f}, delta {res.delta:+.2f}{ci} over {res.n_judged_pairs} "
                f"pair(s) ({res.n_unscored_pairs} unscored)"
            )
    return out


def _num(value: float | None, fmt: str = ".2f") -> str:
    return "undefined" if value is None else format(value, fmt)


def agreement_line(result: AgreementResult) -> str:
    k, a = result.kappa, result.accuracy
    k_ci = f" [{_num(k.low)}, {_num(k.high)}]" if k.low is not None else ""
    a_ci = f" [{_num(a.low)}, {_num(a.high)}]" if a.low is not None else ""
    return (
        f"{result.judge.kind} {result.judge.model}: kappa {_num(k.estimate)}{k_ci}, accuracy "
        f"{_num(a.estimate)}{a_ci}; {result.n_judged} judged, {result.n_unscored} unscored of "
        f"{result.n_items} (prompt {result.judge.prompt_hash[:12]})"
    )


# --------------------------------------------------------------------------------------------
# the pin a run carries


def judge_agreement_pins(judge: str, *, store: AgreementStore | None = None) -> dict[str, Any]:
    """What a run manifest's `pins.judge` adds for its judge: the invariant judge's prompt
    hash, and the stored check of each prompt (`agreement_pin`: `status: none` when no check
    exists). Offline: nothing is judged, so nothing is added.

    These are records, not comparability pins: a check made between two runs must not make
    them incomparable; `compare` shows each run's and warns."""
    if judge == "offline":
        return {}
    root = (store or AgreementStore()).root
    inv_hash = invariant_prompt_hash()
    return {
        "invariant_prompt_hash": inv_hash,
        "agreement": agreement_pin(lookup_agreement(judge, prompt_hash(), root=root)),
        "invariant_agreement": agreement_pin(lookup_agreement(judge, inv_hash, root=root)),
    }
