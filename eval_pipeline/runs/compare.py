"""Compare two runs: is the candidate's coverage really different from the baseline's?

Refusal
-------
Runs that differ in any comparability pin (see `eval_pipeline.runs.pins`) measured different
things: `compare` raises `ComparisonRefused` naming every differing pin. A refusal, not a
warning. So is a run that failed a protocol check that fails the run or makes it not
comparable, and two runs retrieved under different budgets (`eval_pipeline.runs.protocol`:
top_k, the reader's output budget, the retriever's context cap), each in one line.

Which noise floor
-----------------
Given explicitly (`compare(..., noise_floor=FILE)`, `--noise-floor FILE`), a floor must have
been calibrated on the runs' comparability pins (else `NoiseFloorMismatch`). Otherwise, with a
runs directory (`compare(..., runs_dir=DIR)`, the CLI), `find_noise_floor` looks up the floor
stored per configuration (`<runs_dir>/noise_floors/<key>.json`, see `runs.calibrate`): the
base's configuration first, else the candidate's; the one used is named in
`Comparison.noise_floor_source`, or why none was (NOT CALIBRATED).

Deltas
------
Per tier and per question type (within the tier), over answerable questions; abstention
questions are compared apart and never decide the verdict. A question unscored in either run
is left out of that pair (an unscored question cannot flip). The delta is the candidate's
coverage minus the baseline's, in percentage points, over the questions scored in both.
The paired test is the exact McNemar test on the per-question covered outcomes.

Classification rule (per delta)
-------------------------------
* no noise floor (not calibrated), or nothing scored in both runs → **cannot tell**;
* **real** iff |delta| > floor (strictly; the floor of that tier, or of that question type
  when calibrated) AND the McNemar p-value < 0.05; both are needed: the floor guards against
  run-to-run noise of one configuration, McNemar against the luck of which questions flipped;
* otherwise → **not real**.

Evidence recall
---------------
Beside coverage, per tier, the paired delta of each question's gate recall (all its evidence
in the top k) with its own exact McNemar test, and the mean recall_any@k
(`runs.recall_delta`): offline, coverage is mostly the reader's, and recall is what separates
memories. Reported; it never decides the verdict.

Judge agreement
---------------
Coverage is gated by the judge, so a comparison says how far to trust it: per judge prompt
the runs pinned (answer judge, tier 2's invariant judge), the check their manifests recorded
(`pins.judge.agreement`, see `score.judge_check`), else the one stored now for that judge and
prompt, with a warning when kappa is below 0.8 or no check exists. It never decides.

Verdict
-------
REGRESSED if any tier has a real coverage loss (even when efficiency improved); IMPROVED if
some tier has a real gain and none a real loss; otherwise INCONCLUSIVE. Efficiency (median
payload tokens over questions covered in BOTH runs) is reported but never decides.

Judge panel
-----------
When both runs were scored under the same judge panel (`--judge-panel`, `score.panel`;
the same members with the same pins), each member's coverage delta is computed per tier
exactly as the main one (`paired_delta`: McNemar, the same floor). A real tier delta stays
real only if under EVERY member it keeps its sign and is real too; otherwise it counts as
not real and the verdict says it is not robust to the judge panel, naming the members. The
band is the members' min..max delta. Questions the panel splits on (in either run) and
flips that depend on the member are listed. Panels that differ: no band, and why; never a
refusal (the panel is not a comparability pin).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, computed_field

from eval_pipeline.runs.calibrate import (
    NOISE_FLOOR_FILE,
    NoiseFloor,
    NoiseFloorError,
    floor_path_for,
    load_noise_floor,
)
from eval_pipeline.runs.load import ResultRow, RunBundle, load_run
from eval_pipeline.runs.markdown import md_cell
from eval_pipeline.runs.pins import (
    CHANGE_PINS,
    COMPARABILITY_PINS,
    CONFIGURATION_PINS,
    PinDifference,
    differing_pins,
    differing_values,
    pin_values,
)
from eval_pipeline.runs.protocol import budget_differences, protocol_refusals
from eval_pipeline.runs.recall_delta import RecallDelta, recall_deltas, recall_line
from eval_pipeline.score.attribution import STAGES, memory_change
from eval_pipeline.score.stats import mcnemar_paired, median

ALPHA = 0.05
PP_DIGITS = 9  # percentage points are compared at this precision
REAL = "real"
NOT_REAL = "not real"
CANNOT_TELL = "cannot tell"
Classification = Literal["real", "not real", "cannot tell"]
Verdict = Literal["REGRESSED", "IMPROVED", "INCONCLUSIVE"]

RULE = (
    f"A delta is real iff |delta| > the calibrated noise floor AND the exact McNemar "
    f"p-value < {ALPHA}; with no noise floor every delta is 'cannot tell' (NOT CALIBRATED). "
    "REGRESSED if any tier has a real coverage loss, IMPROVED if a real gain and no real "
    "loss, else INCONCLUSIVE; efficiency never decides."
)


class ComparisonRefused(ValueError):
    """Two runs differ in comparability pins: comparing them would mislead."""

    def __init__(self, base: str, candidate: str, differences: Sequence[PinDifference]):
        self.base = base
        self.candidate = candidate
        self.differences = list(differences)
        super().__init__(
            f"refusing to compare {base} with {candidate}: {len(self.differences)} "
            f"comparability pin(s) differ or protocol check(s) failed: "
            f"{', '.join(self.pin_names)}"
        )

    @property
    def pin_names(self) -> list[str]:
        return [d.name for d in self.differences]

    def lines(self) -> list[str]:
        return [d.describe() for d in self.differences]


class NoiseFloorMismatch(ValueError):
    """The noise floor was calibrated on other pins or another question set."""


class PairedDelta(BaseModel):
    tier: str
    question_type: str | None  # None: the whole tier
    kind: Literal["coverage", "abstention"]
    pairs: int  # questions scored in both runs
    excluded_unscored: int  # questions left out because unscored in either run
    base_rate: float | None
    candidate_rate: float | None
    delta_pp: float | None
    b: int  # covered in base, not in candidate
    c: int  # not covered in base, covered in candidate
    p_value: float
    floor_pp: float | None
    calibrated: bool  # a noise floor was given (it may still lack this scope)
    classification: Classification

    @property
    def label(self) -> str:
        return f"tier {self.tier}" + (f" · {self.question_type}" if self.question_type else "")

    @property
    def floor_text(self) -> str:
        if not self.calibrated:
            return "NOT CALIBRATED"
        if self.floor_pp is None:
            return "no floor for this scope"
        return f"floor {self.floor_pp:.1f} pp"


class Efficiency(BaseModel):
    tier: str
    covered_in_both: int
    base_median_tokens: float | None
    candidate_median_tokens: float | None
    delta_tokens: float | None
    delta_pct: float | None


class FormationShares(BaseModel):
    """A provider's formation audit in both runs (`summary.formation_audit`): reported, never
    deciding. None where a run's memory was not audited (graph memory)."""

    base_unsupported: float | None
    candidate_unsupported: float | None
    base_unsourced: float | None
    candidate_unsourced: float | None
    base_memories: int | None
    candidate_memories: int | None


def formation_shares(base: RunBundle, candidate: RunBundle) -> FormationShares | None:
    b = base.summary.get("formation_audit") or {}
    c = candidate.summary.get("formation_audit") or {}
    if not b and not c:
        return None
    return FormationShares(
        base_unsupported=b.get("unsupported_share"),
        candidate_unsupported=c.get("unsupported_share"),
        base_unsourced=b.get("unsourced_share"),
        candidate_unsourced=c.get("unsourced_share"),
        base_memories=b.get("memories"),
        candidate_memories=c.get("memories"),
    )


class Flip(BaseModel):
    question_id: str
    tier: str
    question_type: str
    abstention: bool
    direction: Literal["lost", "gained"]  # lost: covered in base, not in candidate
    weakest_link: str | None  # from the failing run's row
    failure_stage: str | None = None  # the failing run's stage (score.attribution)
    memory: str | None = None  # what changed in the memory of its evidence


class JudgeAgreement(BaseModel):
    """One judge prompt's check as a comparison shows it (both runs share judge and prompt:
    they are comparability pins; the check each recorded may still differ in time)."""

    kind: str  # answer_judge | invariant_judge
    model: str
    prompt_hash: str | None
    base: dict[str, Any] | None  # agreement_pin as base's manifest recorded it
    candidate: dict[str, Any] | None
    source: str  # "manifest", or "store" when looked up because no run recorded a check
    check: dict[str, Any]  # the agreement_pin shown: status "checked" or "none"
    warnings: list[str]

    @property
    def kappa(self) -> float | None:
        return self.check.get("kappa")


class PanelMemberDelta(BaseModel):
    """One panel member's coverage delta for a tier, and whether it holds the main one."""

    member: str
    delta: PairedDelta
    holds: bool | None  # same sign and real; None when the main delta is not real
    why: str | None = None  # why it does not hold


class PanelBand(BaseModel):
    tier: str
    main_delta_pp: float | None
    main_classification: Classification
    low_pp: float | None  # the members' smallest delta (None: none scored in both)
    high_pp: float | None
    members: list[PanelMemberDelta]

    @computed_field  # in comparison.json too
    @property
    def robust(self) -> bool | None:
        """The main delta is real and every member holds it; None: the main is not real."""
        if self.main_classification != REAL:
            return None
        return all(m.holds for m in self.members)


class PanelFlip(BaseModel):
    """A question whose flip between the runs depends on the panel member."""

    question_id: str
    tier: str
    abstention: bool
    by_member: dict[str, Literal["lost", "gained", "same"] | None]  # None: unscored in one


class PanelComparison(BaseModel):
    members: list[str]
    band: bool  # the runs share their panel, so its band is shown
    reason: str | None = None  # why there is no band
    tiers: list[PanelBand] = []
    split_base: list[str] = []  # questions the panel splits on, per run
    split_candidate: list[str] = []
    member_dependent_flips: list[PanelFlip] = []


class RunRef(BaseModel):
    name: str
    path: str


class Comparison(BaseModel):
    base: RunRef
    candidate: RunRef
    calibrated: bool
    noise_floor: str | None  # the file, when one was given by path or found
    noise_floor_note: str | None = None  # its repeats and stability line
    # Which floor decided and why (given / the base's or candidate's configuration), or why
    # the comparison is NOT CALIBRATED.
    noise_floor_source: str | None = None
    rule: str = RULE
    pins: dict[str, Any]
    changes: list[dict[str, Any]]  # non-comparability pins that differ: what the team changed
    tiers: list[PairedDelta]
    by_type: list[PairedDelta]
    abstention: list[PairedDelta]
    # Per tier, the gate's evidence recall paired (`runs.recall_delta`): never decides.
    evidence_recall: list[RecallDelta] = []
    efficiency: list[Efficiency]
    formation: FormationShares | None = None
    # tier -> failure stage -> [base, candidate] questions failed there (score.attribution)
    stages: dict[str, dict[str, list[int]]] = {}
    flips: list[Flip]
    verdict: Verdict
    verdict_reason: str
    # The judge's stored agreement with the labelled set, per judge prompt (see
    # `judge_agreement`), and what a reader should be warned about.
    judge_agreement: list[JudgeAgreement] = []
    judge_warnings: list[str] = []
    # The judge panel both runs were scored under, if any (`panel_comparison`), and the
    # verdict the main judge alone gave, when the panel changed it.
    judge_panel: PanelComparison | None = None
    verdict_without_panel: Verdict | None = None

    @property
    def lost(self) -> list[Flip]:
        return [f for f in self.flips if f.direction == "lost"]

    @property
    def gained(self) -> list[Flip]:
        return [f for f in self.flips if f.direction == "gained"]


def classify(delta_pp: float | None, p_value: float, floor_pp: float | None) -> Classification:
    if delta_pp is None or floor_pp is None:
        return CANNOT_TELL
    # Rounded so that float noise (20.000000000000004 vs 20.0) cannot make a delta equal to
    # the floor "beyond" it.
    beyond = round(abs(delta_pp), PP_DIGITS) > round(floor_pp, PP_DIGITS)
    return REAL if beyond and p_value < ALPHA else NOT_REAL


def paired_delta(
    tier: str,
    question_type: str | None,
    kind: Literal["coverage", "abstention"],
    pairs: Sequence[tuple[ResultRow, ResultRow]],
    floor_pp: float | None,
    calibrated: bool,
) -> PairedDelta:
    base = [b.covered for b, _ in pairs]
    cand = [c.covered for _, c in pairs]
    test = mcnemar_paired(base, cand)
    # Rates over the pairs scored in both runs, the same questions McNemar counts.
    scored = [(x, y) for x, y in zip(base, cand, strict=True) if x is not None and y is not None]
    base_rate = cand_rate = delta = None
    if scored:
        base_rate = sum(1 for x, _ in scored if x) / len(scored)
        cand_rate = sum(1 for _, y in scored if y) / len(scored)
        delta = round((cand_rate - base_rate) * 100, PP_DIGITS)
    return PairedDelta(
        tier=tier,
        question_type=question_type,
        kind=kind,
        pairs=test.n_pairs,
        excluded_unscored=len(pairs) - test.n_pairs,
        base_rate=base_rate,
        candidate_rate=cand_rate,
        delta_pp=delta,
        b=test.b,
        c=test.c,
        p_value=test.p_value,
        floor_pp=floor_pp,
        calibrated=calibrated,
        classification=classify(delta, test.p_value, floor_pp),
    )


def efficiency(tier: str, pairs: Sequence[tuple[ResultRow, ResultRow]]) -> Efficiency:
    """Median payload tokens over questions covered in BOTH runs: the same questions, so a
    smaller payload means the same answers for less, not easier questions answered."""
    both = [
        (b, c)
        for b, c in pairs
        if b.covered is True
        and c.covered is True
        and b.payload_tokens is not None
        and c.payload_tokens is not None
    ]
    base_median = median(b.payload_tokens for b, _ in both)  # type: ignore[misc]
    cand_median = median(c.payload_tokens for _, c in both)  # type: ignore[misc]
    delta = None if base_median is None or cand_median is None else cand_median - base_median
    pct = None if delta is None or not base_median else 100 * delta / base_median
    return Efficiency(
        tier=tier,
        covered_in_both=len(both),
        base_median_tokens=base_median,
        candidate_median_tokens=cand_median,
        delta_tokens=delta,
        delta_pct=pct,
    )


def flips(pairs: Sequence[tuple[ResultRow, ResultRow]]) -> list[Flip]:
    out = []
    for b, c in pairs:
        if b.covered is True and c.covered is False:
            direction, failing = "lost", c
        elif b.covered is False and c.covered is True:
            direction, failing = "gained", b
        else:
            continue
        out.append(
            Flip(
                question_id=b.question_id,
                tier=b.tier,
                question_type=b.question_type,
                abstention=b.abstention,
                direction=direction,
                weakest_link=failing.weakest_link,
                failure_stage=failing.failure_stage,
                memory=memory_change(b.evidence_memory, c.evidence_memory),
            )
        )
    return out


def stage_counts(pairs: Sequence[tuple[ResultRow, ResultRow]]) -> dict[str, list[int]] | None:
    """Per failure stage, how many questions failed there in base and in candidate: which
    stage moved. None when neither run attributed stages (bundles from before)."""
    if not any(r.failure_stage for p in pairs for r in p):
        return None
    base = Counter(b.failure_stage for b, _ in pairs)
    cand = Counter(c.failure_stage for _, c in pairs)
    return {s: [base.get(s, 0), cand.get(s, 0)] for s in STAGES}


def decide(tiers: Sequence[PairedDelta], calibrated: bool) -> tuple[Verdict, str]:
    losses = [t for t in tiers if t.classification == REAL and (t.delta_pp or 0) < 0]
    gains = [t for t in tiers if t.classification == REAL and (t.delta_pp or 0) > 0]
    if losses:
        names = ", ".join(f"tier {t.tier} ({t.delta_pp:+.1f} pp)" for t in losses)
        return "REGRESSED", f"real coverage loss in {names}"
    if gains:
        names = ", ".join(f"tier {t.tier} ({t.delta_pp:+.1f} pp)" for t in gains)
        return "IMPROVED", f"real coverage gain in {names} and no real loss"
    if not calibrated:
        return "INCONCLUSIVE", "NOT CALIBRATED: without a noise floor no delta can be called real"
    return "INCONCLUSIVE", "no tier has a real coverage change"


def check_comparable(base: RunBundle, candidate: RunBundle) -> None:
    """Refused: differing comparability pins, a failed protocol check of either run, or
    different retrieval budgets (`runs.protocol`)."""
    differences = [
        *differing_pins(base, candidate, COMPARABILITY_PINS),
        *budget_differences(base, candidate),
        *protocol_refusals(base, candidate),
    ]
    if differences:
        raise ComparisonRefused(base.name, candidate.name, differences)


def check_floor(floor: NoiseFloor, run: RunBundle) -> None:
    names = [p.name for p in COMPARABILITY_PINS]
    differences = differing_values(floor.pins, pin_values(run, COMPARABILITY_PINS), names)
    if differences:
        names = ", ".join(d.name for d in differences)
        lines = "; ".join(d.describe("noise floor", "runs") for d in differences)
        raise NoiseFloorMismatch(f"the noise floor was calibrated on other pins ({names}): {lines}")


def check_floor_configuration(floor: NoiseFloor, run: RunBundle) -> None:
    """The floor was calibrated on repeats of `run`'s configuration (reconciler, retriever...)."""
    names = [p.name for p in CONFIGURATION_PINS]
    differences = differing_values(floor.configuration, pin_values(run, CONFIGURATION_PINS), names)
    if differences:
        lines = "; ".join(d.describe("noise floor", "run") for d in differences)
        raise NoiseFloorMismatch(f"the noise floor is another configuration's: {lines}")


def locate_noise_floor(
    runs_dir: str | Path, base: RunBundle, candidate: RunBundle
) -> tuple[NoiseFloor | None, Path | None, str]:
    """`find_noise_floor`, with the file it came from."""
    notes: list[str] = []
    tried: set[Path] = set()
    for who, run in (("base", base), ("candidate", candidate)):
        path = floor_path_for(runs_dir, run)
        if path in tried:
            continue  # the candidate has the base's configuration
        tried.add(path)
        if not path.is_file():
            continue
        try:
            floor = load_noise_floor(path)
            check_floor(floor, run)
            check_floor_configuration(floor, run)
        except (NoiseFloorError, NoiseFloorMismatch) as exc:
            notes.append(f"{path} not used: {exc}")
            continue
        used = f"{path} (the {who}'s configuration, calibrated on {len(floor.runs)} repeats)"
        return floor, path, "; ".join([used, *notes])
    text = (
        f"NOT CALIBRATED: no noise floor for the base's or the candidate's configuration in "
        f"{Path(runs_dir).expanduser() / 'noise_floors'} (calibrate repeats of either: "
        "`eval-pipeline run --repeat N`, then `eval-pipeline calibrate`)"
    )
    legacy = Path(runs_dir).expanduser() / NOISE_FLOOR_FILE
    if legacy.is_file():
        notes.append(
            f"{legacy} ignored: one floor shared by every configuration, from before floors "
            "were kept per configuration (possibly over replayed repeats); recalibrate, or "
            "pass it with --noise-floor"
        )
    return None, None, "; ".join([text, *notes])


def find_noise_floor(
    runs_dir: str | Path, base: RunBundle, candidate: RunBundle
) -> tuple[NoiseFloor | None, str]:
    """The stored floor that fits this comparison, and a line saying which (or why none).

    A floor fits when its comparability pins equal the runs' and its configuration is the
    base's (tried first) or the candidate's. The line names the file and whose configuration
    it is, or starts with NOT CALIBRATED. The runs must be comparable (`check_comparable`).
    """
    floor, _, note = locate_noise_floor(runs_dir, base, candidate)
    return floor, note


def compare(
    base: RunBundle | str | Path,
    candidate: RunBundle | str | Path,
    noise_floor: NoiseFloor | str | Path | None = None,
    *,
    runs_dir: str | Path | None = None,
) -> Comparison:
    """Compare; the floor is `noise_floor` when given (checked against the runs' pins), else
    the one `find_noise_floor(runs_dir, ...)` finds when `runs_dir` is given, else none."""
    base = base if isinstance(base, RunBundle) else load_run(base)
    candidate = candidate if isinstance(candidate, RunBundle) else load_run(candidate)
    check_comparable(base, candidate)
    floor_path: str | None = None
    source: str
    if noise_floor is not None and not isinstance(noise_floor, NoiseFloor):
        floor_path = str(Path(noise_floor).expanduser().resolve())
        noise_floor = load_noise_floor(noise_floor)
    if noise_floor is not None:
        check_floor(noise_floor, base)
        source = f"given: {floor_path}" if floor_path else "given"
    elif runs_dir is not None:
        noise_floor, found, source = locate_noise_floor(runs_dir, base, candidate)
        floor_path = str(found) if found is not None else None
    else:
        source = "NOT CALIBRATED: no noise floor given"

    cand_rows = candidate.by_id()
    by_tier: dict[str, list[tuple[ResultRow, ResultRow]]] = defaultdict(list)
    for row in base.rows:  # the question sets are equal: the pins said so
        by_tier[row.tier].append((row, cand_rows[row.question_id]))

    calibrated = noise_floor is not None

    def floor(tier: str, qtype: str | None = None) -> float | None:
        return noise_floor.floor_for(tier, qtype) if noise_floor else None

    tiers, by_type, abstention, eff, flipped = [], [], [], [], []
    stages: dict[str, dict[str, list[int]]] = {}
    for tier in base.tiers():
        pairs = by_tier[tier]
        answerable = [p for p in pairs if not p[0].abstention]
        abstaining = [p for p in pairs if p[0].abstention]
        tiers.append(paired_delta(tier, None, "coverage", answerable, floor(tier), calibrated))
        types: dict[str, list] = defaultdict(list)
        for p in answerable:
            types[p[0].question_type].append(p)
        for qtype, typed in sorted(types.items()):
            by_type.append(
                paired_delta(tier, qtype, "coverage", typed, floor(tier, qtype), calibrated)
            )
        if abstaining:
            ab_floor = noise_floor.abstention_floor(tier) if noise_floor else None
            abstention.append(
                paired_delta(tier, None, "abstention", abstaining, ab_floor, calibrated)
            )
        eff.append(efficiency(tier, answerable))
        flipped.extend(flips(pairs))
        if (moved := stage_counts(pairs)) is not None:
            stages[tier] = moved

    verdict, reason = decide(tiers, calibrated=calibrated)
    panel = panel_comparison(base, candidate, by_tier, tiers, floor, calibrated)
    robust_verdict, reason = panel_verdict(tiers, panel, calibrated, verdict, reason)
    unpanelled, verdict = verdict, robust_verdict
    agreement = judge_agreement(base, candidate)
    changes = [
        {"pin": d.name, "base": d.left, "candidate": d.right}
        for d in differing_pins(base, candidate, CHANGE_PINS)
    ]
    return Comparison(
        base=RunRef(name=base.name, path=str(base.path)),
        candidate=RunRef(name=candidate.name, path=str(candidate.path)),
        calibrated=calibrated,
        noise_floor=floor_path,
        noise_floor_source=source,
        noise_floor_note=(
            f"calibrated on {len(noise_floor.runs)} repeats; {noise_floor.stability_line}"
            if noise_floor
            else None
        ),
        pins=pin_values(base, COMPARABILITY_PINS),
        changes=changes,
        tiers=tiers,
        by_type=by_type,
        abstention=abstention,
        evidence_recall=recall_deltas(base, by_tier, base.tiers()),
        efficiency=eff,
        formation=formation_shares(base, candidate),
        stages=stages,
        flips=flipped,
        verdict=verdict,
        verdict_reason=reason,
        judge_agreement=agreement,
        judge_warnings=[f"{a.kind}: {w}" for a in agreement for w in a.warnings],
        judge_panel=panel,
        verdict_without_panel=unpanelled if unpanelled != verdict else None,
    )


# --- the judge panel ------------------------------------------------------------------------


def _panel_pins(run: RunBundle) -> list[dict[str, Any]] | None:
    judge = run.pins.get("judge") if isinstance(run.pins.get("judge"), dict) else {}
    panel = judge.get("panel")
    return panel if isinstance(panel, list) and panel else None


def _keys(pins: list[dict[str, Any]] | None) -> list[str]:
    return [str(p.get("member")) for p in pins or []]


def _panel_difference(
    base: list[dict[str, Any]] | None, candidate: list[dict[str, Any]] | None
) -> str | None:
    """Why the two runs' panels cannot give a band (None: they are the same panel)."""
    if base is None or candidate is None:
        who = "base" if base is None else "candidate"
        return f"the {who} was scored without a judge panel"
    if _keys(base) != _keys(candidate):
        return (
            f"the panels differ: base {', '.join(_keys(base))}; candidate "
            f"{', '.join(_keys(candidate))}"
        )
    for b, c in zip(base, candidate, strict=True):
        if b != c:
            what = "method" if b.get("method_hash") != c.get("method_hash") else "model"
            return f"member {b.get('member')} is pinned differently in the two runs ({what})"
    return None


def _member_covered(row: ResultRow, key: str) -> bool | None:
    return ((row.model_extra or {}).get("panel_covered") or {}).get(key)


def _as_member(row: ResultRow, key: str) -> ResultRow:
    """The row as if `key` had been the main judge: its coverage is the member's."""
    return row.model_copy(update={"covered": _member_covered(row, key)})


def _direction(b: bool | None, c: bool | None) -> Literal["lost", "gained", "same"] | None:
    if b is None or c is None:
        return None
    return "same" if b == c else "lost" if b else "gained"


def _sign(value: float | None) -> int:
    return 0 if not value else (1 if value > 0 else -1)


def _holds(main: PairedDelta, member: PairedDelta) -> tuple[bool | None, str | None]:
    if main.classification != REAL:
        return None, None
    problems = []
    if _sign(member.delta_pp) != _sign(main.delta_pp):
        problems.append("opposite sign" if _sign(member.delta_pp) else "no change")
    if member.classification != REAL:
        problems.append(member.classification)
    if not problems:
        return True, None
    return False, f"{_pp(member.delta_pp)} ({', '.join(problems)})"


def panel_comparison(
    base: RunBundle,
    candidate: RunBundle,
    by_tier: dict[str, list[tuple[ResultRow, ResultRow]]],
    tiers: Sequence[PairedDelta],
    floor: Any,
    calibrated: bool,
) -> PanelComparison | None:
    """Each member's paired coverage delta per tier (the main delta's test and floor), the
    band, the split questions and the member-dependent flips; None when neither run had a
    panel."""
    pins_b, pins_c = _panel_pins(base), _panel_pins(candidate)
    if pins_b is None and pins_c is None:
        return None
    members = _keys(pins_c or pins_b)
    why = _panel_difference(pins_b, pins_c)
    split_b = [r.question_id for r in base.rows if (r.model_extra or {}).get("panel_split")]
    split_c = [r.question_id for r in candidate.rows if (r.model_extra or {}).get("panel_split")]
    if why is not None:
        return PanelComparison(
            members=members,
            band=False,
            reason=why,
            split_base=split_b,
            split_candidate=split_c,
        )
    bands = []
    for main in tiers:
        answerable = [p for p in by_tier[main.tier] if not p[0].abstention]
        deltas = []
        for key in members:
            pairs = [(_as_member(b, key), _as_member(c, key)) for b, c in answerable]
            d = paired_delta(main.tier, None, "coverage", pairs, floor(main.tier), calibrated)
            holds, reason = _holds(main, d)
            deltas.append(PanelMemberDelta(member=key, delta=d, holds=holds, why=reason))
        values = [m.delta.delta_pp for m in deltas if m.delta.delta_pp is not None]
        bands.append(
            PanelBand(
                tier=main.tier,
                main_delta_pp=main.delta_pp,
                main_classification=main.classification,
                low_pp=min(values) if values else None,
                high_pp=max(values) if values else None,
                members=deltas,
            )
        )
    flips_by_member = []
    for tier in base.tiers():
        for b, c in by_tier[tier]:
            directions = {
                key: _direction(_member_covered(b, key), _member_covered(c, key)) for key in members
            }
            if len({d for d in directions.values() if d is not None}) > 1:
                flips_by_member.append(
                    PanelFlip(
                        question_id=b.question_id,
                        tier=tier,
                        abstention=b.abstention,
                        by_member=directions,
                    )
                )
    return PanelComparison(
        members=members,
        band=True,
        tiers=bands,
        split_base=split_b,
        split_candidate=split_c,
        member_dependent_flips=flips_by_member,
    )


def panel_verdict(
    tiers: Sequence[PairedDelta],
    panel: PanelComparison | None,
    calibrated: bool,
    verdict: Verdict,
    reason: str,
) -> tuple[Verdict, str]:
    """The verdict with every real tier delta the panel does not hold counted as not real
    (`decide` again), and a reason naming the members that do not hold it."""
    if panel is None or not panel.band:
        return verdict, reason
    fragile = {b.tier: b for b in panel.tiers if b.robust is False}
    robust = [b for b in panel.tiers if b.robust]
    if not fragile:
        if robust:
            reason += f"; robust to the judge panel ({len(panel.members)} members agree)"
        return verdict, reason
    kept = [
        t.model_copy(update={"classification": NOT_REAL}) if t.tier in fragile else t for t in tiers
    ]
    new_verdict, new_reason = decide(kept, calibrated)
    notes = []
    for b in fragile.values():
        failing = ", ".join(f"{m.member} {m.why}" for m in b.members if m.holds is False)
        notes.append(
            f"tier {b.tier} {_pp(b.main_delta_pp)} is not robust to the judge panel: {failing}"
        )
    head = f"{verdict} downgraded: " if new_verdict != verdict else ""
    return new_verdict, f"{head}{'; '.join(notes)}; {new_reason}"


def _ids(ids: Sequence[str], limit: int = 10) -> str:
    more = f", … {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def panel_lines(c: Comparison) -> list[str]:
    """The judge panel for the CLI: per tier the band and each member's delta, the split
    questions, the flips that depend on the member; or why there is no band."""
    p = c.judge_panel
    if p is None:
        return []
    out = [f"judge panel ({len(p.members)} members: {', '.join(p.members)}):"]
    if not p.band:
        out.append(f"  no band: {p.reason}")
    for b in p.tiers:
        band = (
            "nothing scored in both" if b.low_pp is None else f"{_pp(b.low_pp)} .. {_pp(b.high_pp)}"
        )
        robust = {True: "robust", False: "NOT ROBUST", None: "main delta not real"}[b.robust]
        out.append(
            f"  tier {b.tier} sensitivity band {band} (main {_pp(b.main_delta_pp)}, "
            f"{b.main_classification}; {robust})"
        )
        for m in b.members:
            d = m.delta
            out.append(
                f"    {m.member}: {_pct(d.base_rate)} → {_pct(d.candidate_rate)} "
                f"({_pp(d.delta_pp)}, {d.pairs} paired); McNemar b={d.b} c={d.c} "
                f"p={d.p_value:.3g} → {d.classification}"
                + ("" if m.holds is not False else f"; does not hold: {m.why}")
            )
    out.append(
        f"  panel splits on: base {len(p.split_base)}"
        + (f" ({_ids(p.split_base)})" if p.split_base else "")
        + f", candidate {len(p.split_candidate)}"
        + (f" ({_ids(p.split_candidate)})" if p.split_candidate else "")
    )
    if p.band:
        out.append(f"  flips that depend on the member ({len(p.member_dependent_flips)}):")
        for f in p.member_dependent_flips[:20]:
            by = ", ".join(f"{k} {v or 'unscored'}" for k, v in f.by_member.items())
            out.append(f"    {f.question_id} (tier {f.tier}): {by}")
        if len(p.member_dependent_flips) > 20:
            out.append(f"    … {len(p.member_dependent_flips) - 20} more")
    return out


_PROMPTS = (
    ("answer_judge", "prompt_hash", "agreement"),
    ("invariant_judge", "invariant_prompt_hash", "invariant_agreement"),
)


def _checked(pin: Any) -> bool:
    return isinstance(pin, dict) and pin.get("status") == "checked"


def judge_agreement(base: RunBundle, candidate: RunBundle) -> list[JudgeAgreement]:
    """Per judge prompt the runs used: the check their manifests recorded (the candidate's,
    being newer, decides the warnings), else the one stored now for that judge and prompt
    (a check made after the runs), else a warning that none exists. No judge: nothing."""
    from eval_pipeline.score.agreement import agreement_pin, lookup_agreement

    judge_b = base.pins.get("judge") if isinstance(base.pins.get("judge"), dict) else {}
    judge_c = candidate.pins.get("judge") if isinstance(candidate.pins.get("judge"), dict) else {}
    model = judge_c.get("model") or judge_b.get("model")
    if not model or model == "offline":
        return []
    out = []
    for kind, hash_key, pin_key in _PROMPTS:
        prompt = judge_c.get(hash_key) or judge_b.get(hash_key)
        if prompt is None:
            continue  # a bundle from before this prompt was pinned
        pin_b, pin_c = judge_b.get(pin_key), judge_c.get(pin_key)
        chosen = pin_c if _checked(pin_c) else pin_b if _checked(pin_b) else None
        source = "manifest"
        if chosen is None:
            chosen = agreement_pin(lookup_agreement(model, prompt))
            source = "store"
        out.append(
            JudgeAgreement(
                kind=kind,
                model=model,
                prompt_hash=prompt,
                base=pin_b,
                candidate=pin_c,
                source=source,
                check=chosen,
                warnings=list(chosen.get("warnings") or []),
            )
        )
    return out


def judge_agreement_line(a: JudgeAgreement) -> str:
    """One line per judge prompt for the CLI: its kappa, where it comes from, warnings."""
    head = f"judge agreement ({a.kind}, {a.model}, prompt {str(a.prompt_hash)[:12]}): "
    c = a.check
    if c.get("status") != "checked":
        text = head + "NO CHECK (run eval-pipeline judge-check)"
    else:
        k = c.get("kappa")
        low, high = c.get("kappa_low"), c.get("kappa_high")
        ci = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
        where = "recorded in the manifest" if a.source == "manifest" else "checked after the run"
        text = head + ("kappa undefined" if k is None else f"kappa {k:.2f}{ci}")
        text += f", {c.get('n_judged')} of {c.get('n_items')} items judged ({where})"
    if a.warnings:
        text += "; WARNING: " + "; ".join(a.warnings)
    return text


def _pct(value: float | None) -> str:
    return "unscored" if value is None else f"{100 * value:.1f}%"


def _pp(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1f} pp"


def delta_line(d: PairedDelta) -> str:
    floor = d.floor_text
    excluded = f", {d.excluded_unscored} unscored left out" if d.excluded_unscored else ""
    return (
        f"{d.label} {d.kind}: {_pct(d.base_rate)} → {_pct(d.candidate_rate)} "
        f"({_pp(d.delta_pp)}, {d.pairs} paired{excluded}); McNemar b={d.b} c={d.c} "
        f"p={d.p_value:.3g}; {floor} → {d.classification}"
    )


def efficiency_line(e: Efficiency) -> str:
    if e.base_median_tokens is None:
        return f"tier {e.tier} efficiency: no question covered in both runs"
    pct = "" if e.delta_pct is None else f", {e.delta_pct:+.1f}%"
    return (
        f"tier {e.tier} efficiency (median payload tokens over {e.covered_in_both} questions "
        f"covered in both): {e.base_median_tokens:g} → {e.candidate_median_tokens:g} "
        f"({e.delta_tokens:+g}{pct}); efficiency never decides the verdict"
    )


def formation_line(f: FormationShares) -> str:
    def side(share: float | None, unsourced: float | None, n: int | None) -> str:
        if n is None:
            return "not audited"
        return f"{_pct(share)} unsupported, {_pct(unsourced)} unsourced of {n}"

    return (
        "formation audit (memories checked against their sessions; never decides): base "
        f"{side(f.base_unsupported, f.base_unsourced, f.base_memories)}; candidate "
        f"{side(f.candidate_unsupported, f.candidate_unsourced, f.candidate_memories)}"
    )


def flip_line(f: Flip) -> str:
    kind = "abstention, " if f.abstention else ""
    stage = f"failed at {f.failure_stage}, " if f.failure_stage else ""
    memory = f"; memory: {f.memory}" if f.memory else ""
    return (
        f"{f.question_id} (tier {f.tier}, {kind}{f.question_type}): {stage}weakest link "
        f"{f.weakest_link or 'not recorded'}{memory}"
    )


def stage_line(tier: str, moved: dict[str, list[int]]) -> str:
    """Which failure stage moved, base → candidate."""
    cells = ", ".join(f"{s} {b}→{c}" for s, (b, c) in moved.items() if b or c)
    return f"tier {tier} questions failed at each stage (base → candidate): {cells or 'none'}"


def comparison_markdown(c: Comparison) -> str:
    """The deltas as a markdown table (Dagster metadata and the report's summary)."""
    out = [
        f"**{c.verdict}**: {c.verdict_reason}",
        "",
        *(f"- {judge_agreement_line(a)}" for a in c.judge_agreement),
        *([""] if c.judge_agreement else []),
        "| scope | base | candidate | delta | McNemar p | floor | classification |",
        "|---|---|---|---|---|---|---|",
    ]
    for d in [*c.tiers, *c.by_type, *c.abstention]:
        floor = d.floor_text
        label = d.label + (" (abstention)" if d.kind == "abstention" else "")
        out.append(  # a type label comes from the input (tier 2): escaped
            f"| {md_cell(label)} | {_pct(d.base_rate)} | {_pct(d.candidate_rate)} "
            f"| {_pp(d.delta_pp)} | {d.p_value:.3g} | {floor} | {d.classification} |"
        )
    if c.evidence_recall:
        out += ["", *(f"- {recall_line(d)}" for d in c.evidence_recall)]
    if c.judge_panel is not None:
        out += ["", "```", *panel_lines(c), "```"]
    return "\n".join(out)
