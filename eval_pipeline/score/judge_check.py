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
import io
import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.judge_labels import (
    DEFAULT_LABELS,
    JudgeLabelError,
    LabelIssue,
    LabelItem,
    LabelSet,
    ProbePair,
    ProbeSet,
    as_golden,
    fill_missing,
    invariant_items,
    load_labels,
    load_probes,
    own_tags,
)
from eval_pipeline.corpus.published_run import (
    PublishedRunError,
    QuestionSet,
    as_label_set,
    load_published_run,
    load_question_set,
    looks_published,
    pinned_question_set,
)
from eval_pipeline.llm import LLMLayer
from eval_pipeline.llm.layer import layer_for
from eval_pipeline.llm.role_check import ModelRoleError, check_model_roles
from eval_pipeline.progress import Progress
from eval_pipeline.score import verdicts as verdicts_mod
from eval_pipeline.score.agreement import (
    AGREEMENT_FILE,
    PROBE_BIAS_LIMIT,
    AgreementResult,
    AgreementStore,
    CheckFiles,
    ProbeReport,
    VerdictRecord,
    agreement_pin,
    compute_agreement,
    default_labels_sha256,
    lookup_agreement,
    probe_report,
    probe_verdicts,
    read_agreement,
    verdict_of,
    write_check,
)
from eval_pipeline.score.answer_match import MATCH_RULES_VERSION, Match
from eval_pipeline.score.gate import MetricResult
from eval_pipeline.score.judges import longmemeval_judge, prompt_hash, reasoned_judge
from eval_pipeline.score.verdicts import (
    REFERENCE_METHOD,
    ItemInputs,
    combine,
    cross_validated,
    is_rubric,
    rules_match,
    verdicts_of,
)
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
DEFAULT_FOLDS = 5
METHODS_SUBDIR = "methods"
RTM = "rules_then_model"  # the invariant judge behind the answer rules


class JudgeCheckError(ValueError):
    """A bad option or input of judge-check: one line, before any call is made."""


@dataclass(frozen=True)
class JudgeCheckOutcome:
    out_dir: Path
    answer: CheckFiles | None  # the reference method (None when offline: it needs a model)
    invariant: CheckFiles | None
    stored: list[Path]
    wall_s: float
    usage: dict[str, Any] | None
    methods: list[Any] = field(default_factory=list)  # MethodCheck, one per verdict method
    notes: list[str] = field(default_factory=list)  # what the input held and what was filled in
    published: bool = False  # the labels are a published run's: accuracies are compared


def question_set(references: str | Path | None, *, required: bool) -> QuestionSet | None:
    """The question set a run's ids are matched to: `references`, else the pinned
    LongMemEval_S file when it is on this machine; None (or, when `required`, a one-line
    error) when neither is at hand."""
    try:
        if references is not None:
            return load_question_set(references)
        found = pinned_question_set()
    except (PublishedRunError, CorpusError) as exc:
        raise JudgeCheckError(f"--references: {exc}") from None
    if found is None and required:
        raise JudgeCheckError(
            "--references FILE: the pinned LongMemEval_S file is not on this machine, so a "
            "published run needs the questions it answers (question_id, question, answer, "
            "question_type per question)"
        )
    return found


def label_input(
    labels: str | Path | None,
    verdicts: str | Path | None = None,
    references: str | Path | None = None,
    answer_field: str | None = None,
) -> tuple[LabelSet, list[str], bool]:
    """(the label set, notes on it, whether it is a published run) of judge-check's input:
    the project's set, a label file of ours (a missing type or abstention flag filled in from
    the question set where the id is LongMemEval's), or a published run in the field's formats
    (`corpus.published_run`; `verdicts` holds its labels when they are kept apart)."""
    published = verdicts is not None or (labels is not None and looks_published(labels))
    if not published:
        try:
            label_set = load_labels(labels)
        except JudgeLabelError as exc:
            raise JudgeCheckError(one_line(exc)) from None
        if labels is None:
            return label_set, [], False
        questions = question_set(references, required=False)
        filled, notes = fill_missing(label_set, questions.questions if questions else None)
        tags = own_tags(filled.items)
        if tags:  # kept and counted, each with its own figures in agreement.json
            listed = ", ".join(f"{t} ({n})" for t, n in tags.items())
            notes.append(f"tags of the file's own, counted per tag: {listed}")
        return filled, notes, False
    if labels is None:
        raise JudgeCheckError("--verdicts: needs --labels FILE, the run whose answers it labels")
    try:
        run = load_published_run(labels, verdicts, answer_field=answer_field)
        labelled = as_label_set(run, question_set(references, required=True))  # type: ignore[arg-type]
    except PublishedRunError as exc:
        raise JudgeCheckError(str(exc)) from None
    return labelled.labels, labelled.notes(), True


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


async def _gathered(
    calls: Sequence[Callable[[], Any]], concurrency: int, progress: Progress
) -> list[Any]:
    gate = asyncio.Semaphore(concurrency)

    async def one(call):
        async with gate:
            result = await call()
        progress.update()
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


@dataclass(frozen=True)
class MethodCheck:
    """One verdict method's figures on one label set."""

    method: str
    labels: str  # "project" | "labels" (the --labels file)
    files: CheckFiles
    evaluation: str


def _inputs(
    items: Sequence[LabelItem],
    matches: Sequence[Match | None],
    model: Mapping[str, Sequence[MetricResult]],
) -> list[ItemInputs]:
    out = []
    for n, item in enumerate(items):
        m = matches[n]
        out.append(
            ItemInputs(
                id=item.id,
                label=item.label,
                rubric=is_rubric(as_golden(item)),
                match=None if m is None else asdict(m),
                model={p: verdict_of(r[n]) for p, r in model.items()},
            )
        )
    return out


def _method_records(
    name: str,
    items: Sequence[LabelItem],
    inputs: Sequence[ItemInputs],
    verdicts: Sequence[str | None],
    model: Mapping[str, Sequence[MetricResult]],
) -> list[VerdictRecord]:
    """verdicts.jsonl lines of one method: the model's reason where it decided, else the
    rule's (an unscored model call keeps its error)."""
    prompt = verdicts_mod.method(name).prompt
    out = []
    for n, (item, inp, v) in enumerate(zip(items, inputs, verdicts, strict=True)):
        if v is None and prompt is not None:
            r = model[prompt][n]
            reason = r.error or r.reason
        else:
            decided = combine(
                name,
                inp.match_obj(),
                inp.model.get(prompt) if prompt else None,
                rubric=inp.rubric,
            )[1]
            reason = model[prompt][n].reason if decided == "model" and prompt else decided
        out.append(VerdictRecord(id=item.id, label=item.label, verdict=v, reason=reason or ""))
    return out


def _probe_inputs(
    calls: Sequence[tuple[ProbePair, str]],
    model: Mapping[str, Sequence[MetricResult]],
) -> list[ItemInputs]:
    out = []
    for n, (pair, side) in enumerate(calls):
        golden = as_golden(pair)
        m = rules_match(golden, pair.variant(side).response)  # type: ignore[arg-type]
        out.append(
            ItemInputs(
                id=f"{pair.id}:{side}",
                label=pair.label,
                rubric=is_rubric(golden),
                match=asdict(m),
                model={p: verdict_of(r[n]) for p, r in model.items()},
            )
        )
    return out


def _as_metric(verdict: str | None, why: str) -> MetricResult:
    if verdict is None:
        return MetricResult.unscored(why, gating=True)
    return MetricResult.judged(1.0 if verdict == "yes" else 0.0, 1.0, why, gating=True)


def run_judge_check(
    judge: str,
    *,
    labels: str | Path | None = None,
    verdicts: str | Path | None = None,
    references: str | Path | None = None,
    answer_field: str | None = None,
    probes: str | Path | None = None,
    with_probes: bool = True,
    with_invariant: bool = True,
    methods: Sequence[str] | None = None,
    folds: int = DEFAULT_FOLDS,
    out_dir: str | Path | None = None,
    store: AgreementStore | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    layer: LLMLayer | None = None,
    progress_stream: Any = sys.stderr,
) -> JudgeCheckOutcome:
    """Judge every labelled item (and the probes) under every verdict method, write the files,
    store the results.

    Each method's kappa on the project's set is cross-validated (`verdicts.cross_validated`:
    its parameters tuned on the other folds, never on the fold it is scored on); on a
    `--labels` file it is measured as shipped (`verdicts.DEFAULT_PARAMS`, tuned on the project's
    set, not on this file). `judge` "offline" checks the methods that need no model.

    Every input is checked before the first call (JudgeCheckError, one line). `layer` is for
    tests that bring their own; by default it is the one scoring builds for `judge`."""
    if concurrency < 1:
        raise JudgeCheckError(f"--concurrency must be at least 1, got {concurrency}")
    if folds < 2:
        raise JudgeCheckError(f"--folds must be at least 2, got {folds}")
    label_set, notes, published = label_input(labels, verdicts, references, answer_field)
    try:
        probe_set = load_probes(probes) if with_probes else None
    except JudgeLabelError as exc:
        raise JudgeCheckError(one_line(exc)) from None
    offline = judge.strip() in ("", "offline") and layer is None
    chosen = _chosen_methods(methods, offline)
    prompts = sorted({verdicts_mod.method(m).prompt for m in chosen} - {None})  # type: ignore[type-var]
    inv_set = invariant_items(label_set)
    if not with_invariant or offline:
        inv_set = LabelSet(path=inv_set.path, sha256=inv_set.sha256, items=[])
    goldens = tier2_goldens() if any(i.golden for i in label_set.items) else {}
    check_goldens(label_set, goldens, labels if labels is not None else DEFAULT_LABELS)
    judge = "offline" if offline else (check_judge_spec(judge) if layer is None else judge.strip())
    external = labels is not None and label_set.sha256 != default_labels_sha256()
    out = Path(out_dir) if out_dir is not None else default_out_dir(judge)
    if out.exists() and not out.is_dir():
        raise JudgeCheckError(f"--out {out}: exists and is not a directory")
    store = store or AgreementStore()

    probe_calls = _probe_sides(probe_set.pairs) if probe_set else []
    own_layer = layer is None and not offline
    layer = layer or (None if offline else scoring_judge_layer(judge))
    started = time.monotonic()
    model: dict[str, list[MetricResult]] = {}
    probe_model: dict[str, list[MetricResult]] = {}
    inv_results: list[InvariantResult] = []
    usage = None
    try:
        if layer is not None:
            role = layer.role("judge")
            universe = None
            if inv_set.items:
                from eval_pipeline.tier2.load import load_universe

                universe = load_universe()
            n_calls = (len(label_set) + len(probe_calls)) * len(prompts) + len(inv_set)
            # No stream (the judge_agreement asset): the lines go nowhere but the count.
            progress = Progress(
                "judge-check",
                n_calls,
                unit="call",
                stream=progress_stream if progress_stream is not None else io.StringIO(),
            )

            def answer_call(prompt: str, golden: Mapping[str, Any], response: str):
                fn = reasoned_judge if prompt == "reasoned" else longmemeval_judge
                return lambda: fn(role, golden, response)

            def invariant_call(item: LabelItem) -> Callable[[], Any]:
                golden = {**goldens[item.golden], "input": item.question}  # type: ignore[index]
                return lambda: invariant_judge(role, golden, item.response, universe=universe)

            # In this order (the calls start in it): per prompt the labelled items, then the
            # probes, then the invariant judge's longer calls; an interrupted check resumes
            # from the cache.
            calls: list[Callable[[], Any]] = []
            for prompt in prompts:
                calls += [answer_call(prompt, as_golden(i), i.response) for i in label_set.items]
                calls += [
                    answer_call(prompt, as_golden(p), p.variant(s).response) for p, s in probe_calls
                ]
            calls += [invariant_call(i) for i in inv_set.items]
            with progress:
                results = layer.run_sync(_gathered(calls, concurrency, progress))
            n_items, n_probe = len(label_set), len(probe_calls)
            for k, prompt in enumerate(prompts):
                base = k * (n_items + n_probe)
                model[prompt] = results[base : base + n_items]
                probe_model[prompt] = results[base + n_items : base + n_items + n_probe]
            inv_results = results[len(prompts) * (n_items + n_probe) :]
            usage = layer.snapshot().to_metadata()
    finally:
        if own_layer and layer is not None:
            layer.close()
    wall = time.monotonic() - started
    measured_at = datetime.now(UTC).isoformat()

    matches = [rules_match(as_golden(i), i.response) for i in label_set.items]
    inputs = _inputs(label_set.items, matches, model)
    probe_inputs = _probe_inputs(probe_calls, probe_model) if probe_set else []
    checks: list[MethodCheck] = []
    stored: list[Path] = []
    for name in chosen:
        m = verdicts_mod.method(name)
        if external:
            held = verdicts_of(name, inputs)
            evaluation = "as shipped: the parameters in the code, not tuned on this file"
            if m.tuned:
                cv, _ = cross_validated(name, inputs, k=folds)
                evaluation += f"; cross-validated on this file: kappa {_num(_kappa_of(inputs, cv))}"
        elif m.tuned:
            held, params = cross_validated(name, inputs, k=folds)
            tuned = sorted({json.dumps({p: asdict(x)[p] for p in m.tuned}) for x in params})
            evaluation = (
                f"cross-validated: {folds} folds, each scored with parameters tuned on the "
                f"others (chosen: {'; '.join(tuned)})"
            )
        else:
            held = verdicts_of(name, inputs)
            evaluation = "no tuned parameter: every item scored as is"
        report = _method_probes(name, probe_set, probe_calls, probe_inputs) if probe_set else None
        records = _method_records(name, label_set.items, inputs, held, model)
        result = compute_agreement(
            label_set,
            records,
            judge_model=judge if m.needs_model else "none",
            prompt_hash=verdicts_mod.method_hash(name),
            judge_kind=ANSWER_KIND,
            probes=report,
            measured_at=measured_at,
        ).model_copy(update={"method": name, "evaluation": evaluation})
        files = write_check(out / METHODS_SUBDIR / name, records, result)
        stored.append(store.put(files.result))
        checks.append(MethodCheck(name, "labels" if external else "project", files, evaluation))
    reference = next((c for c in checks if c.method == REFERENCE_METHOD), None)
    written = (
        write_check(out, _read_records(reference.files), reference.files.result)
        if reference is not None
        else None
    )
    inv_written = None
    if inv_set.items:
        inv_written = _invariant_checks(
            inv_set, inv_results, label_set, matches, judge, measured_at, out, store, stored
        )
    return JudgeCheckOutcome(
        out, written, inv_written, stored, wall, usage, checks, notes, published
    )


def _read_records(files: CheckFiles) -> list[VerdictRecord]:
    from eval_pipeline.score.agreement import read_verdicts

    return read_verdicts(files.verdicts)


def _kappa_of(inputs: Sequence[ItemInputs], verdicts: Sequence[str | None]) -> float | None:
    from eval_pipeline.score.agreement import cohen_kappa

    pairs = [(i.label, v) for i, v in zip(inputs, verdicts, strict=True) if v is not None]
    return cohen_kappa([a for a, _ in pairs], [b for _, b in pairs]) if pairs else None  # type: ignore[misc]


def _chosen_methods(methods: Sequence[str] | None, offline: bool) -> list[str]:
    names = list(methods) if methods else list(verdicts_mod.METHODS)
    for name in names:
        try:
            verdicts_mod.method(name)
        except verdicts_mod.MethodError as exc:
            raise JudgeCheckError(f"--methods: {exc}") from None
    if offline:
        needing = [n for n in names if verdicts_mod.method(n).needs_model]
        if methods and needing:
            raise JudgeCheckError(
                f"--methods {','.join(needing)}: needs a judge model (--judge PROVIDER:MODEL); "
                "offline checks only the methods that need none"
            )
        names = [n for n in names if not verdicts_mod.method(n).needs_model]
    return names


def _method_probes(
    name: str,
    probe_set: ProbeSet,
    calls: Sequence[tuple[ProbePair, str]],
    inputs: Sequence[ItemInputs],
) -> ProbeReport:
    """The probes under one method (its shipped parameters): a and b of each pair."""
    verdicts = verdicts_of(name, inputs)
    results = [_as_metric(v, f"method {name}") for v in verdicts]
    return _probes(probe_set, calls, results)


def _invariant_checks(
    inv_set: LabelSet,
    results: Sequence[InvariantResult],
    label_set: LabelSet,
    matches: Sequence[Match | None],
    judge: str,
    measured_at: str,
    out: Path,
    store: AgreementStore,
    stored: list[Path],
) -> CheckFiles:
    """The invariant judge as it is (`model`), and `rules_then_model`: an answer the rules
    find wrong (a reference value given wrongly, nothing of it there, a refusal of an
    answerable question) cannot pass the invariants either, whatever the model grades."""
    by_id = {i.id: n for n, i in enumerate(label_set.items)}
    model_records = [invariant_record(i, r) for i, r in zip(inv_set.items, results, strict=True)]
    combined = []
    for item, rec in zip(inv_set.items, model_records, strict=True):
        m = matches[by_id[item.id]]
        if m is not None and m.verdict == "no":
            combined.append(rec.model_copy(update={"verdict": "no", "reason": f"rules: {m.rule}"}))
        else:
            combined.append(rec)
    written = []
    for method, records, digest, where in (
        ("model", model_records, invariant_prompt_hash(), out / INVARIANT_SUBDIR),
        ("rules_then_model", combined, invariant_rules_hash(), out / INVARIANT_SUBDIR / RTM),
    ):
        result = compute_agreement(
            inv_set,
            records,
            judge_model=judge,
            prompt_hash=digest,
            judge_kind=INVARIANT_KIND,
            measured_at=measured_at,
        ).model_copy(update={"method": method, "evaluation": "no tuned parameter"})
        written.append(write_check(where, records, result))
        stored.append(store.put(written[-1].result))
    return written[0]


def invariant_rules_hash() -> str:
    """The pin of the invariant judge behind the answer rules (`rules_then_model`)."""
    import hashlib

    body = {"invariant": invariant_prompt_hash(), "rules": MATCH_RULES_VERSION}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


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
    """What the CLI prints: per verdict method its kappa with the interval and how it was
    kept honest, then the invariant judge, then the probes of each method."""
    out = list(outcome.notes)
    for check in outcome.methods:
        r = check.files.result
        line = f"{check.method:<10} {_kappa_text(r)}"
        if outcome.published:
            line += f"; {_accuracy_text(r, check.method)}"
        out.append(f"{line}  [{check.evaluation}]")
    inv_dir = outcome.out_dir / INVARIANT_SUBDIR
    if outcome.invariant is not None:
        out.append(agreement_line(outcome.invariant.result))
        both = inv_dir / RTM / AGREEMENT_FILE
        if both.exists():
            out.append(agreement_line(read_agreement(both)))
    for check in outcome.methods:
        probes = check.files.result.probes
        for res in probes.results.values() if probes else []:
            out.append(f"  {check.method}: {_probe_text(res)}")
    return out


def _kappa_text(result: AgreementResult) -> str:
    k, a = result.kappa, result.accuracy
    k_ci = f" [{_num(k.low)}, {_num(k.high)}]" if k.low is not None else ""
    c = result.confusion
    errors = (
        f", false yes {_num(c.false_yes_rate)}, false no {_num(c.false_no_rate)}"
        if c.false_yes_rate is not None and c.false_no_rate is not None
        else ""
    )
    return (
        f"kappa {_num(k.estimate)}{k_ci}, agreement {_num(a.estimate)}{errors}; "
        f"{result.n_judged} judged, {result.n_unscored} unscored of {result.n_items}"
    )


def _accuracy_text(result: AgreementResult, method: str) -> str:
    """The run's accuracy by the file's own labels and by `method`, on the items both judged."""
    c = result.confusion
    if c.label_yes_rate is None or c.judge_yes_rate is None:
        return "accuracy not measured (nothing judged)"
    delta = 100 * (c.judge_yes_rate - c.label_yes_rate)
    return (
        f"run accuracy {100 * c.label_yes_rate:.1f}% by the file's labels, "
        f"{100 * c.judge_yes_rate:.1f}% by {method} ({delta:+.1f} pts)"
    )


def _probe_text(res: Any) -> str:
    if res.status != "measured":
        return f"probe {res.probe}: not applicable ({res.note})"
    if res.delta is None:
        return f"probe {res.probe}: no pair judged on both sides"
    ci = f" [{res.delta_low:+.2f}, {res.delta_high:+.2f}]" if res.delta_low is not None else ""
    flag = "  BIAS" if abs(res.delta) > PROBE_BIAS_LIMIT + 1e-9 else ""
    return (
        f"probe {res.probe}: yes-rate {res.a} {res.yes_rate_a:.2f} → {res.b} "
        f"{res.yes_rate_b:.2f}, delta {res.delta:+.2f}{ci} over {res.n_judged_pairs} "
        f"pair(s) ({res.n_unscored_pairs} unscored){flag}"
    )


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


def judge_agreement_pins(
    judge: str,
    answer_prompt_hash: str | None = None,
    *,
    needs_model: bool = True,
    store: AgreementStore | None = None,
) -> dict[str, Any]:
    """What a run manifest's `pins.judge` adds for its judge: the invariant judge's prompt
    hash, and the stored check of the answer verdict (`answer_prompt_hash`, default the
    reference prompt's; a method that needs no model is checked under the model "none") and of
    the invariant prompt (`agreement_pin`: `status: none` when no check exists). Offline with a
    method that needs a model: nothing is judged, so nothing is added.

    These are records, not comparability pins: a check made between two runs must not make
    them incomparable; `compare` shows each run's and warns."""
    if judge == "offline" and needs_model:
        return {}
    root = (store or AgreementStore()).root
    inv_hash = invariant_prompt_hash()
    answer_hash = answer_prompt_hash or prompt_hash()
    checked_as = judge if needs_model else "none"
    out = {"agreement": agreement_pin(lookup_agreement(checked_as, answer_hash, root=root))}
    if judge != "offline":
        out["invariant_prompt_hash"] = inv_hash
        out["invariant_agreement"] = agreement_pin(lookup_agreement(judge, inv_hash, root=root))
    return out
