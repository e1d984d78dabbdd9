"""How far a judge agrees with the labelled set, its bias-probe deltas, and where results live.

Input: one `VerdictRecord` per labelled item (`{id, label, verdict, reason}`, verdict None when
the judge gave none). Output: an `AgreementResult`, which serialises to `agreement.json`:

- accuracy (share of judged items whose verdict equals the label) and Cohen's kappa, each with
  a 95% percentile bootstrap interval (`scipy.stats.bootstrap`, seeded as in `score.stats`);
- n items, n judged, n unscored: an unscored item is left out of every rate and counted;
- a confusion cell (label × verdict counts, accuracy, kappa, false-yes and false-no rates)
  overall, per question type, per hard case, per tier and for abstention vs answerable;
- optionally the bias probes: per probe kind, yes-rate(b) − yes-rate(a) over the pairs judged
  on both sides, with a bootstrap interval.

Cohen's kappa is computed here, not taken from a library: for two raters and two classes it
is one line over four counts, kappa = (n·agree − Σ row·col) / (n² − Σ row·col), and the
libraries that have it do not fit. scikit-learn (`cohen_kappa_score`) and statsmodels
(`cohens_kappa`) are heavy dependencies (joblib/threadpoolctl, pandas/patsy) for that line,
and both return NaN with a warning in the undefined case, where this project's contract is an
explicit None. The formula is checked in the tests against hand-computed tables.

Kappa is undefined (None) when both raters put every item in the same class (chance
agreement is then 1); when only one of them does, kappa is 0. A bootstrap resample can hit
the undefined case; the interval is then None with a note rather than a NaN in a report.

`write_check` publishes `verdicts.jsonl` then `agreement.json` (with the sha256 of the
verdicts it describes) atomically: both appear together or neither does.
`AgreementStore` keeps results keyed by (judge model spec, prompt hash), one file per label
set, so a run's manifest, `compare` and the report can look up the check for their judge.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from eval_pipeline.atomic import staged_files, write_text
from eval_pipeline.corpus.jsonl import dumps_line
from eval_pipeline.corpus.judge_labels import (
    DEFAULT_LABELS,
    PROBES,
    LabelItem,
    LabelSet,
    ProbePair,
    ProbeSet,
)
from eval_pipeline.llm import redact
from eval_pipeline.score.gate import MetricResult
from eval_pipeline.score.stats import (
    BOOTSTRAP_METHOD,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    bootstrap_ci,
    percentile_bootstrap,
)
from eval_pipeline.settings import state_dir

log = logging.getLogger(__name__)

AGREEMENT_SCHEMA_VERSION = 2
KAPPA_WARN_BELOW = 0.8
# A probe that moves the yes-rate by more than this is a bias every judged run names.
PROBE_BIAS_LIMIT = 0.10
VERDICTS_FILE = "verdicts.jsonl"
AGREEMENT_FILE = "agreement.json"
STORE_DIRNAME = "judge_agreement"
INTERVAL_METHOD = f"{BOOTSTRAP_METHOD} bootstrap (scipy.stats.bootstrap)"
ORDER_FIXED_NOTE = (
    "not measured: the judge's prompt fixes the order (question, correct answer, then the "
    "response); placing the response first would be another prompt with another hash"
)

Verdict = Literal["yes", "no"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VerdictRecord(_Model):
    """One line of verdicts.jsonl."""

    id: str
    label: Verdict
    verdict: Verdict | None
    reason: str = ""


def verdict_of(result: MetricResult) -> Verdict | None:
    """The yes/no a judged MetricResult stands for (score 1 / 0); None when unscored."""
    if result.score is None:
        return None
    if result.score == 1.0:
        return "yes"
    if result.score == 0.0:
        return "no"
    raise ValueError(f"a yes/no judge scores 0 or 1, got {result.score!r}")


def verdict_record(item: LabelItem, result: MetricResult) -> VerdictRecord:
    """The record of one item from the judge's MetricResult (its error when unscored)."""
    verdict = verdict_of(result)
    reason = result.reason if verdict is not None else (result.error or result.reason)
    return VerdictRecord(id=item.id, label=item.label, verdict=verdict, reason=reason or "")


# --------------------------------------------------------------------------------------------
# statistics


def _counts(labels: Sequence[Verdict], verdicts: Sequence[Verdict]) -> tuple[int, int, int, int]:
    """(yes_yes, yes_no, no_yes, no_no) as label_verdict."""
    yy = yn = ny = nn = 0
    for lab, ver in zip(labels, verdicts, strict=True):
        if lab == "yes":
            yy, yn = (yy + 1, yn) if ver == "yes" else (yy, yn + 1)
        else:
            ny, nn = (ny + 1, nn) if ver == "yes" else (ny, nn + 1)
    return yy, yn, ny, nn


def kappa_from_counts(yy: int, yn: int, ny: int, nn: int) -> float | None:
    """Cohen's kappa of a 2×2 table (label rows, verdict columns); None when undefined."""
    n = yy + yn + ny + nn
    if n == 0:
        return None
    agree = yy + nn
    label_yes, label_no = yy + yn, ny + nn
    verdict_yes, verdict_no = yy + ny, yn + nn
    chance = label_yes * verdict_yes + label_no * verdict_no  # n² · p_e
    if chance == n * n:
        return None  # both raters used one and the same class: chance agreement is 1
    return (n * agree - chance) / (n * n - chance)


def cohen_kappa(labels: Sequence[Verdict], verdicts: Sequence[Verdict]) -> float | None:
    """Cohen's kappa over judged pairs only (no None verdicts here)."""
    if len(labels) != len(verdicts):
        raise ValueError(f"{len(labels)} labels but {len(verdicts)} verdicts")
    return kappa_from_counts(*_counts(labels, verdicts))


def _kappa_statistic(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Vectorised kappa of 0/1 arrays along `axis`; NaN where undefined."""
    n = x.shape[axis]
    agree = (x == y).sum(axis=axis)
    x_yes = x.sum(axis=axis)
    y_yes = y.sum(axis=axis)
    chance = x_yes * y_yes + (n - x_yes) * (n - y_yes)
    den = n * n - chance
    safe = np.where(den > 0, den, 1)
    return np.where(den > 0, (n * agree - chance) / safe, np.nan)


class Interval(_Model):
    estimate: float | None
    low: float | None
    high: float | None
    n: int
    note: str | None = None


class IntervalSettings(_Model):
    method: str = INTERVAL_METHOD
    level: float = 0.95
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED


def accuracy_interval(
    labels: Sequence[Verdict], verdicts: Sequence[Verdict], settings: IntervalSettings
) -> Interval:
    outcomes = [int(lab == ver) for lab, ver in zip(labels, verdicts, strict=True)]
    est = bootstrap_ci(
        outcomes, resamples=settings.resamples, seed=settings.seed, level=settings.level
    )
    if est is None:
        return Interval(estimate=None, low=None, high=None, n=0, note="nothing judged")
    return Interval(estimate=est.rate, low=est.low, high=est.high, n=est.n_scored)


def kappa_interval(
    labels: Sequence[Verdict], verdicts: Sequence[Verdict], settings: IntervalSettings
) -> Interval:
    n = len(labels)
    point = cohen_kappa(labels, verdicts)
    if n == 0:
        return Interval(estimate=None, low=None, high=None, n=0, note="nothing judged")
    if point is None:
        return Interval(
            estimate=None,
            low=None,
            high=None,
            n=n,
            note="undefined: the labels and the verdicts are all one and the same class",
        )
    if len(set(zip(labels, verdicts, strict=True))) == 1 or n == 1:
        # One kind of pair only: every resample is the same table.
        return Interval(estimate=point, low=point, high=point, n=n)
    x = np.asarray([lab == "yes" for lab in labels], dtype=np.int64)
    y = np.asarray([ver == "yes" for ver in verdicts], dtype=np.int64)
    interval = percentile_bootstrap(
        (x, y),
        _kappa_statistic,
        paired=True,
        resamples=settings.resamples,
        seed=settings.seed,
        level=settings.level,
    )
    if interval is None:
        return Interval(
            estimate=point,
            low=None,
            high=None,
            n=n,
            note="no interval: kappa is undefined in some bootstrap resamples (too few items)",
        )
    return Interval(estimate=point, low=interval[0], high=interval[1], n=n)


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


class Confusion(_Model):
    """Label × verdict counts of a group of items (unscored counted apart)."""

    n_items: int
    n_judged: int
    n_unscored: int
    yes_yes: int  # label yes, judge yes
    yes_no: int  # label yes, judge no  (too strict)
    no_yes: int  # label no,  judge yes (too lenient)
    no_no: int  # label no,  judge no
    accuracy: float | None
    accuracy_low: float | None
    accuracy_high: float | None
    kappa: float | None
    judge_yes_rate: float | None
    label_yes_rate: float | None
    false_yes_rate: float | None  # of the judged items labelled no, the share judged yes
    false_no_rate: float | None  # of the judged items labelled yes, the share judged no


def confusion(
    pairs: Sequence[tuple[Verdict, Verdict | None]], settings: IntervalSettings
) -> Confusion:
    judged = [(lab, ver) for lab, ver in pairs if ver is not None]
    labels = [lab for lab, _ in judged]
    verdicts = [ver for _, ver in judged]  # type: ignore[misc]
    yy, yn, ny, nn = _counts(labels, verdicts)
    acc = accuracy_interval(labels, verdicts, settings)
    n = len(judged)
    return Confusion(
        n_items=len(pairs),
        n_judged=n,
        n_unscored=len(pairs) - n,
        yes_yes=yy,
        yes_no=yn,
        no_yes=ny,
        no_no=nn,
        accuracy=acc.estimate,
        accuracy_low=acc.low,
        accuracy_high=acc.high,
        kappa=kappa_from_counts(yy, yn, ny, nn),
        judge_yes_rate=_rate(yy + ny, n),
        label_yes_rate=_rate(yy + yn, n),
        false_yes_rate=_rate(ny, ny + nn),
        false_no_rate=_rate(yn, yy + yn),
    )


# --------------------------------------------------------------------------------------------
# bias probes


class ProbePairVerdicts(_Model):
    id: str
    probe: str
    label: Verdict
    a: Verdict | None
    b: Verdict | None
    reason_a: str = ""
    reason_b: str = ""


class ProbeResult(_Model):
    probe: str
    a: str  # what variant a is (e.g. "terse")
    b: str  # what variant b is (e.g. "padded")
    status: Literal["measured", "not_applicable"]
    note: str | None = None
    n_pairs: int
    n_judged_pairs: int  # judged on both sides
    n_unscored_pairs: int
    yes_rate_a: float | None = None
    yes_rate_b: float | None = None
    delta: float | None = None  # yes_rate_b - yes_rate_a over pairs judged on both sides
    delta_low: float | None = None
    delta_high: float | None = None
    delta_by_label: dict[str, float | None] = {}
    flips_to_yes: int = 0  # a no, b yes
    flips_to_no: int = 0  # a yes, b no


class ProbeReport(_Model):
    path: str | None
    sha256: str | None
    results: dict[str, ProbeResult]
    pairs: list[ProbePairVerdicts]


def probe_verdicts(pair: ProbePair, a: MetricResult, b: MetricResult) -> ProbePairVerdicts:
    """One pair's entry from the judge's MetricResult on each variant."""

    def why(result: MetricResult) -> str:
        return (result.reason if result.score is not None else result.error or result.reason) or ""

    return ProbePairVerdicts(
        id=pair.id,
        probe=pair.probe,
        label=pair.label,
        a=verdict_of(a),
        b=verdict_of(b),
        reason_a=why(a),
        reason_b=why(b),
    )


def _mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def _delta(
    both: Sequence[ProbePairVerdicts], settings: IntervalSettings
) -> tuple[float | None, float | None, float | None]:
    if not both:
        return None, None, None
    diffs = [int(p.b == "yes") - int(p.a == "yes") for p in both]
    point = sum(diffs) / len(diffs)
    if len(set(diffs)) == 1:
        return point, point, point
    interval = percentile_bootstrap(
        (np.asarray(diffs, dtype=np.float64),),
        _mean,
        paired=False,
        resamples=settings.resamples,
        seed=settings.seed,
        level=settings.level,
    )
    return (point, *interval) if interval is not None else (point, None, None)


def probe_report(
    probes: ProbeSet | Sequence[ProbePair],
    verdicts: Iterable[ProbePairVerdicts],
    *,
    order_can_vary: bool,
    settings: IntervalSettings | None = None,
) -> ProbeReport:
    """Yes-rate deltas per probe kind. `verdicts` holds one entry per judged pair; the order
    probe's pairs are left out (and reported not applicable) unless `order_can_vary`."""
    settings = settings or IntervalSettings()
    pairs = list(probes.pairs if isinstance(probes, ProbeSet) else probes)
    known = {p.id: p for p in pairs}
    got: dict[str, ProbePairVerdicts] = {}
    for v in verdicts:
        if v.id not in known:
            raise ValueError(f"probe verdict for unknown pair {v.id!r}")
        if v.id in got:
            raise ValueError(f"probe pair {v.id!r} has two verdict entries")
        if v.probe != known[v.id].probe or v.label != known[v.id].label:
            raise ValueError(f"probe pair {v.id!r}: kind or label differs from the probe file")
        got[v.id] = v
    results: dict[str, ProbeResult] = {}
    for kind, (a_name, b_name) in PROBES.items():
        of_kind = [p for p in pairs if p.probe == kind]
        if kind == "response_order" and not order_can_vary:
            results[kind] = ProbeResult(
                probe=kind,
                a=a_name,
                b=b_name,
                status="not_applicable",
                note=ORDER_FIXED_NOTE,
                n_pairs=len(of_kind),
                n_judged_pairs=0,
                n_unscored_pairs=0,
            )
            continue
        missing = [p.id for p in of_kind if p.id not in got]
        if missing:
            raise ValueError(f"no verdicts for probe pair(s) {missing}")
        judged = [got[p.id] for p in of_kind]
        both = [v for v in judged if v.a is not None and v.b is not None]
        delta, low, high = _delta(both, settings)
        by_label: dict[str, float | None] = {}
        for lab in ("yes", "no"):
            sub = [v for v in both if v.label == lab]
            by_label[lab] = (
                sum(int(v.b == "yes") - int(v.a == "yes") for v in sub) / len(sub) if sub else None
            )
        results[kind] = ProbeResult(
            probe=kind,
            a=a_name,
            b=b_name,
            status="measured",
            n_pairs=len(of_kind),
            n_judged_pairs=len(both),
            n_unscored_pairs=len(of_kind) - len(both),
            yes_rate_a=_rate(sum(v.a == "yes" for v in both), len(both)),
            yes_rate_b=_rate(sum(v.b == "yes" for v in both), len(both)),
            delta=delta,
            delta_low=low,
            delta_high=high,
            delta_by_label=by_label,
            flips_to_yes=sum(1 for v in both if v.a == "no" and v.b == "yes"),
            flips_to_no=sum(1 for v in both if v.a == "yes" and v.b == "no"),
            note=None if of_kind else "no pair of this kind in the probe file",
        )
    return ProbeReport(
        path=probes.path if isinstance(probes, ProbeSet) else None,
        sha256=probes.sha256 if isinstance(probes, ProbeSet) else None,
        results=results,
        pairs=[got[p.id] for p in pairs if p.id in got],
    )


# --------------------------------------------------------------------------------------------
# the result


class JudgePin(_Model):
    kind: str = "answer_judge"  # answer_judge | invariant_judge | ...
    model: str  # the judge role's spec, PROVIDER:MODEL[@BASE_URL]
    prompt_hash: str


class LabelsPin(_Model):
    path: str | None
    sha256: str
    items: int


class AgreementResult(_Model):
    """What agreement.json holds."""

    schema_version: int = AGREEMENT_SCHEMA_VERSION
    judge: JudgePin
    labels: LabelsPin
    measured_at: str | None = None
    n_items: int
    n_judged: int
    n_unscored: int
    accuracy: Interval
    kappa: Interval
    interval: IntervalSettings
    confusion: Confusion
    by_question_type: dict[str, Confusion]
    by_hard_case: dict[str, Confusion]
    by_tier: dict[str, Confusion]
    by_abstention: dict[str, Confusion]
    probes: ProbeReport | None = None
    verdicts_sha256: str | None = None
    method: str | None = None  # the verdict method (score.verdicts); None: before methods
    evaluation: str | None = None  # how its figures were kept off the data it was tuned on


def _check_records(
    items: Sequence[LabelItem], records: Sequence[VerdictRecord]
) -> dict[str, VerdictRecord]:
    by_id: dict[str, VerdictRecord] = {}
    known = {i.id: i for i in items}
    for r in records:
        if r.id not in known:
            raise ValueError(f"verdict for unknown item {r.id!r}")
        if r.id in by_id:
            raise ValueError(f"item {r.id!r} has two verdicts")
        if r.label != known[r.id].label:
            raise ValueError(f"item {r.id!r}: record label {r.label!r} != {known[r.id].label!r}")
        by_id[r.id] = r
    missing = [i.id for i in items if i.id not in by_id]
    if missing:
        raise ValueError(f"no verdict for {len(missing)} item(s): {missing[:5]}")
    return by_id


def compute_agreement(
    labels: LabelSet,
    records: Sequence[VerdictRecord],
    *,
    judge_model: str,
    prompt_hash: str,
    judge_kind: str = "answer_judge",
    probes: ProbeReport | None = None,
    settings: IntervalSettings | None = None,
    measured_at: str | None = None,
) -> AgreementResult:
    """Agreement of `records` (one per item of `labels`) with the labels."""
    settings = settings or IntervalSettings()
    by_id = _check_records(labels.items, records)
    rows = [(item, by_id[item.id].verdict) for item in labels.items]
    judged = [(item.label, v) for item, v in rows if v is not None]
    lab = [x for x, _ in judged]
    ver = [y for _, y in judged]

    def grouped(key: Callable[[LabelItem], str]) -> dict[str, Confusion]:
        groups: dict[str, list[tuple[Verdict, Verdict | None]]] = defaultdict(list)
        for item, v in rows:
            groups[key(item)].append((item.label, v))
        return {k: confusion(groups[k], settings) for k in sorted(groups)}

    return AgreementResult(
        judge=JudgePin(kind=judge_kind, model=judge_model, prompt_hash=prompt_hash),
        labels=LabelsPin(path=labels.path, sha256=labels.sha256, items=len(labels.items)),
        measured_at=measured_at,
        n_items=len(rows),
        n_judged=len(judged),
        n_unscored=len(rows) - len(judged),
        accuracy=accuracy_interval(lab, ver, settings),  # type: ignore[arg-type]
        kappa=kappa_interval(lab, ver, settings),  # type: ignore[arg-type]
        interval=settings,
        confusion=confusion([(i.label, v) for i, v in rows], settings),
        # an item that leaves a field out is grouped under "unknown" (judge_labels.UNKNOWN)
        by_question_type=grouped(lambda i: i.question_type_key),
        by_hard_case=grouped(lambda i: i.hard_case_key),
        by_tier=grouped(lambda i: i.tier_key),
        by_abstention=grouped(lambda i: i.abstention_key),
        probes=probes,
    )


def recompute_from_verdicts(path: str | Path) -> dict[str, float | int | None]:
    """Accuracy, kappa and counts straight from a verdicts.jsonl (the check's own audit)."""
    records = read_verdicts(path)
    judged = [r for r in records if r.verdict is not None]
    lab = [r.label for r in judged]
    ver = [r.verdict for r in judged]
    agree = sum(1 for x, y in zip(lab, ver, strict=True) if x == y)
    return {
        "n_items": len(records),
        "n_judged": len(judged),
        "n_unscored": len(records) - len(judged),
        "accuracy": _rate(agree, len(judged)),
        "kappa": cohen_kappa(lab, ver),  # type: ignore[arg-type]
    }


def read_verdicts(path: str | Path) -> list[VerdictRecord]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(VerdictRecord.model_validate_json(line))
            except ValidationError as exc:
                first = exc.errors(include_url=False, include_input=False)[0]
                where = ".".join(str(p) for p in first["loc"]) or "<line>"
                raise ValueError(f"{path}:{lineno}: field {where!r}: {first['msg']}") from None
    return out


# --------------------------------------------------------------------------------------------
# publishing


@dataclass(frozen=True)
class CheckFiles:
    verdicts: Path
    agreement: Path
    result: AgreementResult


def _json_text(result: AgreementResult) -> str:
    return json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n"


def write_check(
    out_dir: str | Path, records: Sequence[VerdictRecord], result: AgreementResult
) -> CheckFiles:
    """Write DIR/verdicts.jsonl and DIR/agreement.json together (staged, then renamed; the
    agreement last, carrying the verdicts' sha256). Reasons are redacted before writing."""
    out_dir = Path(out_dir)
    clean = [r.model_copy(update={"reason": redact(r.reason)}) for r in records]
    body = "".join(dumps_line(r.model_dump(mode="json")) + "\n" for r in clean).encode("utf-8")
    final = result.model_copy(update={"verdicts_sha256": hashlib.sha256(body).hexdigest()})
    with staged_files(out_dir, [VERDICTS_FILE, AGREEMENT_FILE]) as stage:
        (stage / VERDICTS_FILE).write_bytes(body)
        (stage / AGREEMENT_FILE).write_text(_json_text(final), encoding="utf-8")
    return CheckFiles(out_dir / VERDICTS_FILE, out_dir / AGREEMENT_FILE, final)


def read_agreement(path: str | Path) -> AgreementResult:
    return AgreementResult.model_validate_json(Path(path).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------
# the store: results keyed by (judge model spec, prompt hash)


def default_store_dir() -> Path:
    return state_dir() / STORE_DIRNAME


def store_key(judge_model: str, prompt_hash: str) -> str:
    """A file-system-safe key of (model spec, prompt hash); the spec may hold ':' '/' '@'."""
    return hashlib.sha256(json.dumps([judge_model, prompt_hash]).encode()).hexdigest()[:32]


class AgreementStore:
    """`<root>/<store_key>/<labels sha256[:16]>.json`: the latest check of one judge on one
    label set (a re-check replaces it; each file says when it was measured)."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_store_dir()

    def path_for(self, judge_model: str, prompt_hash: str, labels_sha256: str) -> Path:
        return self.root / store_key(judge_model, prompt_hash) / f"{labels_sha256[:16]}.json"

    def put(self, result: AgreementResult) -> Path:
        path = self.path_for(result.judge.model, result.judge.prompt_hash, result.labels.sha256)
        write_text(path, _json_text(result))
        return path

    def _entries_of(self, judge_model: str, prompt_hash: str) -> list[AgreementResult]:
        folder = self.root / store_key(judge_model, prompt_hash)
        out = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                result = read_agreement(path)
            except (OSError, ValueError) as exc:
                log.warning("judge agreement store: skipping unreadable %s: %s", path, exc)
                continue
            if (result.judge.model, result.judge.prompt_hash) == (judge_model, prompt_hash):
                out.append(result)
        return out

    def get(
        self, judge_model: str, prompt_hash: str, *, labels_sha256: str | None = None
    ) -> AgreementResult | None:
        """The check for this judge and prompt (on that label set, or the latest measured)."""
        entries = self._entries_of(judge_model, prompt_hash)
        if labels_sha256 is not None:
            entries = [e for e in entries if e.labels.sha256 == labels_sha256]
        if not entries:
            return None
        return max(entries, key=lambda e: e.measured_at or "")

    def all(self) -> list[AgreementResult]:
        out = []
        for folder in sorted(p for p in self.root.glob("*") if p.is_dir()):
            for path in sorted(folder.glob("*.json")):
                try:
                    out.append(read_agreement(path))
                except (OSError, ValueError) as exc:
                    log.warning("judge agreement store: skipping unreadable %s: %s", path, exc)
        return out


def default_labels_sha256() -> str | None:
    try:
        return hashlib.sha256(DEFAULT_LABELS.read_bytes()).hexdigest()
    except OSError:
        return None


def lookup_agreement(
    judge_model: str,
    prompt_hash: str,
    *,
    root: str | Path | None = None,
    labels_sha256: str | None = None,
) -> AgreementResult | None:
    """The check of this judge and prompt on `labels_sha256`; without it, the check on the
    committed label set: the check a judge is known by. A check on a user's file is kept in
    the store apart (its own file) and never stands in for it."""
    store = AgreementStore(root)
    if labels_sha256 is not None:
        return store.get(judge_model, prompt_hash, labels_sha256=labels_sha256)
    default = default_labels_sha256()
    return store.get(judge_model, prompt_hash, labels_sha256=default) if default else None


def agreement_warnings(result: AgreementResult | None) -> list[str]:
    """What `compare` and the report should warn about for a run's judge."""
    if result is None:
        return ["no agreement check exists for this judge and prompt hash"]
    out = []
    k = result.kappa.estimate
    if k is None:
        out.append("the judge's kappa is undefined on its check")
    elif k < KAPPA_WARN_BELOW:
        out.append(f"the judge's kappa {k:.2f} is below {KAPPA_WARN_BELOW}")
    if result.n_unscored:
        out.append(f"{result.n_unscored} of {result.n_items} check items went unscored")
    out += [f"bias: {line}" for line in biased_probes(result)]
    return out


def biased_probes(result: AgreementResult) -> list[str]:
    """Each measured probe whose yes-rate delta exceeds PROBE_BIAS_LIMIT, as one line."""
    out = []
    for res in result.probes.results.values() if result.probes else []:
        if res.status == "measured" and res.delta is not None:
            if abs(res.delta) > PROBE_BIAS_LIMIT + 1e-9:
                out.append(
                    f"probe {res.probe}: {res.b} answers judged yes {abs(res.delta) * 100:.0f} "
                    f"points {'more' if res.delta > 0 else 'less'} often than {res.a} ones "
                    f"({res.n_judged_pairs} pairs)"
                )
    return out


def agreement_pin(result: AgreementResult | None) -> dict:
    """The small record a run manifest carries for its judge (`status: none` when unchecked)."""
    if result is None:
        return {"status": "none", "warnings": agreement_warnings(None)}
    return {
        "status": "checked",
        "kind": result.judge.kind,
        "kappa": result.kappa.estimate,
        "kappa_low": result.kappa.low,
        "kappa_high": result.kappa.high,
        "accuracy": result.accuracy.estimate,
        "accuracy_low": result.accuracy.low,
        "accuracy_high": result.accuracy.high,
        "n_items": result.n_items,
        "n_judged": result.n_judged,
        "n_unscored": result.n_unscored,
        "labels_sha256": result.labels.sha256,
        "measured_at": result.measured_at,
        "method": result.method,
        "evaluation": result.evaluation,
        "biased_probes": biased_probes(result),
        "warnings": agreement_warnings(result),
    }
