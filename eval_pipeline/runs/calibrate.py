"""Calibration: how far apart two runs of ONE configuration land by chance (the noise floor).

Producing repeats
-----------------
Repeats are runs of the same configuration over the same question set: every comparability
pin and every configuration pin (reconciler, retriever, top_k, graph backend) equal. The
intended way is `eval-pipeline run --repeat N`, which builds and reconciles the graph once
(unless told to include reconciliation in the repeats) and repeats retrieval and scoring N
times, writing N bundles into the runs directory. Repeat k draws its LLM answers under the
sample identity "<salt>/k" (`manifest["repeat"]["sample_identity"]`), which is part of every
LLM cache key: repeat k never replays repeat j, and re-running repeat k reproduces it. Then:

    eval-pipeline calibrate RUN RUN [RUN ...] [--out FILE]

Where floors live
-----------------
One file per configuration: `<runs_dir>/noise_floors/<key>.json`, where `<key>` is the first
16 hex digits of the sha256 of the canonical JSON (sorted keys, no spaces) of
`{"pins": <comparability pin values>, "configuration": <configuration pin values>}` (see
`floor_key`). Calibrating another configuration writes another file, never over this one;
re-calibrating the same configuration replaces its own file. `eval-pipeline compare` without
`--noise-floor` (and `compare(..., runs_dir=...)`) looks there for the base's configuration,
then the candidate's. The old shared `<runs_dir>/noise_floor.json` is never read implicitly: it
may have been calibrated over repeats that replayed one another (a silent floor of 0) and was
overwritten by whichever configuration came last; pass it with `--noise-floor` to use it
anyway (its comparability pins are still checked), or recalibrate.

Independent samples (refused otherwise, with `CalibrationRefused`)
-----------------------------------------------------------------
A noise floor is only as good as its repeats' independence: a repeat that replays another's
cached LLM answers agrees with it by construction, and the floor becomes a silent 0. The rule,
read from each bundle's manifest (`manifest["repeat"]` and the per-stage accounting in
`manifest["llm_usage"]`, i.e. `UsageSnapshot.to_metadata()` or one role's `RoleUsage`):

* **Sampled stages.** Retrieval (reader, retrieval agent) and judging are sampled in every
  repeat. Reconciliation is sampled too, except in a repeat whose `manifest["repeat"]`
  says `includes_reconcile: false`: then the graph was built once and shared on purpose, and
  the floor does not measure the reconciler's variance (`NoiseFloor.reconcile_sampled`).
  A role *made LLM calls* in a stage when its `calls` (or `provider_requests`, `cache_hits`)
  is > 0.
* **(a) Distinct identities.** The identities of a run are its `repeat.sample_identity` and
  the `sample_identity` recorded by every sampled stage that made LLM calls. No identity may
  belong to two runs of the set: the same "<salt>/<k>" twice is one sample (the second replays
  the first, or reproduces it), not two.
* **(b) Distinct materializations.** No sampled stage with LLM calls may carry the same
  accounting `origin` in two runs: that is one materialization of the stage reused by both.
* **(c) Replays without identity.** A sampled stage's role with `cache_replayed` > 0 (cache
  hits on entries written by another origin) and no `sample_identity` is refused: nothing
  tells those answers from another run's, repeats of this set included. Likewise a role with
  `cache_hits` > 0 whose accounting predates replay counting (no `cache_replayed` field), and
  a stage whose accounting cannot be read at all.
* **Accepted:** hits on the run's own entries (`cache_replayed` 0: the same prompt asked
  twice within one run); replays under a sample identity that is unique in the set (a
  *reproduced* repeat: its cached answers can only come from an earlier run of that same
  repeat, since every key carries the identity); plain runs without identity whose LLM calls
  all went to the provider; and fully offline runs (no LLM call at all), which are
  deterministic: their floor is whatever their outcomes say, 0 when they agree.

The floor, per tier (and per question type and for abstention)
--------------------------------------------------------------
Coverage is taken over answerable questions (abstention apart); a question unscored in a run
is left out of that run's rate, never counted as a failure.

* **Observed spread**: the largest |coverage difference| between any two repeats, in
  percentage points, each pair over the questions scored in both.
* **Bootstrap half-width**: the repeats give each question an empirical pass distribution
  (its outcomes across repeats). We simulate pairs of runs by drawing each question's outcome
  twice, independently, from its own observed outcomes, and take the 95th percentile of the
  |coverage difference| over `resamples` simulated pairs. With two repeats the spread is a
  single draw from this null distribution; the bootstrap says how large a difference chance
  alone produces 95% of the time.
* **floor = max(spread, bootstrap half-width)**, the more cautious of the two. A fully
  deterministic configuration has floor 0; then McNemar alone decides whether a delta is real.

The floor measures run-to-run noise on this fixed question set; the uncertainty of sampling
questions is the paired test's job (exact McNemar, in `compare`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eval_pipeline.atomic import write_text
from eval_pipeline.runs.load import RunBundle, load_run
from eval_pipeline.runs.pins import (
    COMPARABILITY_PINS,
    CONFIGURATION_PINS,
    PinDifference,
    differing_pins,
    pin_values,
)
from eval_pipeline.score.stats import rate

# The old single shared file: still the name `--noise-floor` users pass, never read implicitly.
NOISE_FLOOR_FILE = "noise_floor.json"
NOISE_FLOORS_DIR = "noise_floors"  # <runs_dir>/noise_floors/<key>.json, one per configuration
FLOOR_KEY_DIGITS = 16
SCHEMA_VERSION = 2  # 2: per-configuration files, key, sample identities, independence
RECONCILE_STAGE = "reconcile"
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
LEVEL = 0.95
PP_DIGITS = 9  # float noise off percentage points (20.000000000000007 is 20)

METHOD = (
    "floor = max(observed spread, bootstrap half-width), in percentage points. Spread: the "
    "largest |coverage difference| between two repeats (each pair over questions scored in "
    "both). Bootstrap: each question's outcome drawn twice from its own outcomes across the "
    "repeats; the 95th percentile of |coverage difference| over the simulated pairs."
)


class CalibrationRefused(ValueError):
    """The runs are not repeats of one configuration over one question set, or not independent
    samples of it. The message is one first line, then one indented line per detail."""

    def __init__(
        self,
        message: str,
        differences: Sequence[tuple[str, PinDifference]] = (),
        details: Sequence[str] = (),
    ):
        self.differences = list(differences)
        self.details = list(details)
        lines = [message]
        lines += [f"  {run}: {diff.describe('first run', 'this run')}" for run, diff in differences]
        lines += [f"  {detail}" for detail in self.details]
        super().__init__("\n".join(lines))

    @property
    def pin_names(self) -> list[str]:
        return list(dict.fromkeys(diff.name for _, diff in self.differences))


class NoiseFloorError(ValueError):
    """A noise floor file that cannot be read."""


class FloorEstimate(BaseModel):
    floor_pp: float | None  # None: nothing scored in the repeats, so no floor
    spread_pp: float | None
    bootstrap_half_width_pp: float | None
    rates: list[float | None]  # per repeat, over its scored questions
    questions: int
    unstable: int  # questions whose outcome differed between repeats


class TierFloor(BaseModel):
    coverage: FloorEstimate
    by_type: dict[str, FloorEstimate] = Field(default_factory=dict)
    abstention: FloorEstimate | None = None


class QuestionPassRate(BaseModel):
    tier: str
    question_type: str
    abstention: bool
    passes: int
    scored: int  # repeats in which the question was scored
    pass_rate: float | None


class Stability(BaseModel):
    answerable: int
    always_pass: int  # covered in every repeat
    ever_pass: int  # covered in at least one repeat
    never_pass: int  # scored at least once, never covered
    unscored_in_some: int


class NoiseFloor(BaseModel):
    model_config = ConfigDict(extra="ignore")

    schema_version: int = SCHEMA_VERSION
    created_at: str
    runs: list[str]
    pins: dict[str, Any]  # comparability pin values the floor is valid for
    configuration: dict[str, Any]  # the configuration that was repeated
    key: str | None = None  # floor_key: the file name under <runs_dir>/noise_floors/
    sample_identities: list[str | None] = Field(default_factory=list)  # per run, in order
    reconcile_sampled: bool | None = None  # None: not known (plain runs, or mixed)
    independence: str = ""  # why the repeats count as independent samples
    method: str = METHOD
    level: float = LEVEL
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    tiers: dict[str, TierFloor]
    questions: dict[str, QuestionPassRate]
    stability: dict[str, Stability]
    stability_line: str

    def floor_for(self, tier: str, question_type: str | None = None) -> float | None:
        """Per-type floor when calibrated, else the tier's; None when not calibrated."""
        entry = self.tiers.get(tier)
        if entry is None:
            return None
        if question_type is not None and question_type in entry.by_type:
            typed = entry.by_type[question_type].floor_pp
            if typed is not None:
                return typed
        return entry.coverage.floor_pp

    def abstention_floor(self, tier: str) -> float | None:
        entry = self.tiers.get(tier)
        return entry.abstention.floor_pp if entry and entry.abstention else None


def check_repeats(runs: Sequence[RunBundle]) -> None:
    """Refuse anything that is not >= 2 distinct repeats of one configuration."""
    if len(runs) < 2:
        raise CalibrationRefused(
            f"refusing to calibrate: need at least two repeat runs, got {len(runs)} "
            "(produce repeats with `eval-pipeline run --repeat N`)"
        )
    seen: set[Path] = set()
    for run in runs:
        if run.path in seen:
            raise CalibrationRefused(f"refusing to calibrate: run given twice: {run.path}")
        seen.add(run.path)
    pins = (*COMPARABILITY_PINS, *CONFIGURATION_PINS)
    first = runs[0]
    differences = [(run.name, d) for run in runs[1:] for d in differing_pins(first, run, pins)]
    if differences:
        names = list(dict.fromkeys(d.name for _, d in differences))
        raise CalibrationRefused(
            f"refusing to calibrate: the runs are not repeats of one configuration; "
            f"differing pin(s): {', '.join(names)} (compared with {first.name})",
            differences,
        )
    check_independent(runs)


# --- independent samples -----------------------------------------------------------------------


@dataclass(frozen=True)
class RoleCalls:
    """One role's LLM calls in one stage of a run, as its manifest accounts for them."""

    stage: str
    role: str
    calls: int
    cache_hits: int
    cache_replayed: int | None  # None: not recorded (accounting from before replay counting)
    sample_identity: str | None
    origin: str | None  # the accounting layer's origin token (None: not recorded)

    @property
    def label(self) -> str:
        return f"{self.stage}/{self.role}"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def reconcile_sampled(run: RunBundle) -> bool | None:
    """Whether this run's reconciliation is part of its sample: False for a repeat that shares
    the graph (`includes_reconcile: false`), True for one that includes it, None when unknown
    (a plain run: its reconcile stage is checked like the others)."""
    repeat = run.repeat
    if repeat is None or not isinstance(repeat.get("includes_reconcile"), bool):
        return None
    return repeat["includes_reconcile"]


def sampled_llm_calls(run: RunBundle) -> tuple[list[RoleCalls], list[str]]:
    """(roles that made LLM calls in a sampled stage, stages whose accounting is unreadable)."""
    calls: list[RoleCalls] = []
    unreadable: list[str] = []
    for stage, usage in run.llm_usage.items():
        if stage == RECONCILE_STAGE and reconcile_sampled(run) is False:
            continue  # built once and shared by the repeats on purpose
        if not usage:
            continue  # offline stage
        if not isinstance(usage, dict):
            unreadable.append(stage)
            continue
        if isinstance(usage.get("roles"), dict):  # a UsageSnapshot
            entries = [u for u in usage["roles"].values() if isinstance(u, dict)]
            identity, origin = _text(usage.get("sample_identity")), _text(usage.get("origin"))
        elif "role" in usage:  # one role's RoleUsage (the reconciler reports this way)
            entries, identity, origin = [usage], None, None
        else:
            unreadable.append(stage)
            continue
        for u in entries:
            made = max(_count(u.get(k)) for k in ("calls", "provider_requests", "cache_hits"))
            if made == 0:
                continue
            replayed = u.get("cache_replayed")
            calls.append(
                RoleCalls(
                    stage=str(stage),
                    role=str(u.get("role") or "?"),
                    calls=_count(u.get("calls")),
                    cache_hits=_count(u.get("cache_hits")),
                    cache_replayed=_count(replayed) if replayed is not None else None,
                    sample_identity=_text(u.get("sample_identity")) or identity,
                    origin=origin,
                )
            )
    return calls, unreadable


def replay_problems(run: RunBundle) -> list[str]:
    """What, in this run alone, cannot be told from a replay of another run (rule (c))."""
    calls, unreadable = sampled_llm_calls(run)
    out = [
        f"{run.name}: the LLM accounting of stage {stage!r} cannot be read: fresh calls "
        "cannot be told from replays"
        for stage in unreadable
    ]
    for c in calls:
        if c.cache_replayed is None and c.cache_hits > 0:
            out.append(
                f"{run.name}: {c.label}: {c.cache_hits} cache hit(s) with no record of who "
                "wrote them (accounting from before replay counting): cannot be told from a "
                "replay of another run"
            )
        elif c.cache_replayed and c.sample_identity is None:
            out.append(
                f"{run.name}: {c.label}: {c.cache_replayed} of {c.calls} call(s) replayed "
                "cached answers written by another run, and no sample identity: cannot be "
                "told from a replay of another repeat (use `eval-pipeline run --repeat N`)"
            )
    return out


def run_identities(run: RunBundle) -> set[str]:
    """The run's repeat identity and every identity its sampled stages drew LLM calls under."""
    calls, _ = sampled_llm_calls(run)
    found = {c.sample_identity for c in calls} | {run.sample_identity}
    return {i for i in found if i is not None}


def run_materializations(run: RunBundle) -> set[str]:
    """ "<stage> (origin <token>)" of every sampled stage with LLM calls whose accounting
    records its origin: a stage materialization reused by two runs shows up in both."""
    calls, _ = sampled_llm_calls(run)
    return {f"{c.stage} (origin {c.origin})" for c in calls if c.origin is not None}


def _shared(owners: dict[str, list[str]]) -> dict[str, list[str]]:
    return {k: list(dict.fromkeys(v)) for k, v in owners.items() if len(set(v)) > 1}


def independence_problems(runs: Sequence[RunBundle]) -> tuple[list[str], list[str]]:
    """(problems across runs: rules (a) and (b); problems within runs: rule (c))."""
    identities: dict[str, list[str]] = {}
    origins: dict[str, list[str]] = {}
    for run in runs:
        for identity in run_identities(run):
            identities.setdefault(identity, []).append(run.name)
        for stage in run_materializations(run):
            origins.setdefault(stage, []).append(run.name)
    across = [
        f"sample identity {identity!r} is shared by {', '.join(names)}: one replays (or "
        "reproduces) the other; each repeat needs its own identity"
        for identity, names in _shared(identities).items()
    ]
    across += [
        f"stage {stage} is one and the same materialization in {', '.join(names)}"
        for stage, names in _shared(origins).items()
    ]
    within = [problem for run in runs for problem in replay_problems(run)]
    return across, within


def check_independent(runs: Sequence[RunBundle]) -> None:
    """Refuse repeats that are not independent samples (the rule is in the module docstring)."""
    across, within = independence_problems(runs)
    if not across and not within:
        return
    why = []
    if across:
        why.append("runs share a sample")
    if within:
        why.append("cached LLM answers replayed from another run")
    raise CalibrationRefused(
        f"refusing to calibrate: the repeats are not independent samples ({'; '.join(why)}), "
        "so their agreement would make the noise floor a silent 0",
        details=[*across, *within],
    )


def independence_line(runs: Sequence[RunBundle]) -> str:
    """Why accepted repeats count as independent (recorded in the floor)."""
    calls = [c for run in runs for c in sampled_llm_calls(run)[0]]
    identities = [run.sample_identity for run in runs]
    shared_reconcile = any(
        reconcile_sampled(run) is False and run.llm_usage.get(RECONCILE_STAGE) for run in runs
    )
    tail = "; LLM reconciliation shared, not sampled (its variance is not in the floor)"
    tail = tail if shared_reconcile else ""
    if not calls:
        return "deterministic: no LLM call in the sampled stages of any repeat" + tail
    replayed = sum(c.cache_replayed or 0 for c in calls)
    if all(i is None for i in identities):
        text = "fresh LLM calls, none replayed from another run (no sample identities)"
    else:
        named = ", ".join(i or "none" for i in identities)
        text = f"LLM calls under distinct sample identities ({named})"
    if replayed:
        text += f"; {replayed} cached answer(s) reproduced under their own identity"
    return text + tail


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    position = q * (len(sorted_values) - 1)
    lower = int(position)
    upper = min(lower + 1, len(sorted_values) - 1)
    return sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * (position - lower)


def _max_spread(outcomes: Sequence[dict[str, bool | None]], ids: Sequence[str]) -> float | None:
    spreads = []
    for a, b in itertools.combinations(outcomes, 2):
        both = [q for q in ids if a.get(q) is not None and b.get(q) is not None]
        if both:
            diff = rate([a[q] for q in both]) - rate([b[q] for q in both])  # type: ignore[operator]
            spreads.append(round(abs(diff) * 100, PP_DIGITS))
    return max(spreads) if spreads else None


def _bootstrap_half_width(
    per_question: Sequence[list[bool]], *, resamples: int, seed: int, level: float
) -> float | None:
    n = len(per_question)
    if n == 0:
        return None
    # A question with one observed outcome draws it twice: it contributes 0 to every
    # difference, so only the unstable questions need simulating.
    unstable = [[int(o) for o in outs] for outs in per_question if len(set(outs)) > 1]
    if not unstable:
        return 0.0
    rng = random.Random(seed)
    choice = rng.choice
    diffs = sorted(
        abs(sum(choice(o) - choice(o) for o in unstable)) / n * 100 for _ in range(resamples)
    )
    return round(_quantile(diffs, level), PP_DIGITS)


def estimate_floor(
    outcomes: Sequence[dict[str, bool | None]],
    ids: Sequence[str],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = LEVEL,
) -> FloorEstimate:
    per_question = [
        [o[q] for o in outcomes if o.get(q) is not None]  # type: ignore[misc]
        for q in ids
    ]
    per_question = [outs for outs in per_question if outs]
    spread = _max_spread(outcomes, ids)
    half = _bootstrap_half_width(per_question, resamples=resamples, seed=seed, level=level)
    candidates = [v for v in (spread, half) if v is not None]
    return FloorEstimate(
        floor_pp=max(candidates) if candidates else None,
        spread_pp=spread,
        bootstrap_half_width_pp=half,
        rates=[rate([o.get(q) for q in ids]) for o in outcomes],
        questions=len(ids),
        unstable=sum(1 for outs in per_question if len(set(outs)) > 1),
    )


def _stability(
    outcomes: Sequence[dict[str, bool | None]], ids: Sequence[str], n_runs: int
) -> Stability:
    passes = {q: sum(1 for o in outcomes if o.get(q) is True) for q in ids}
    scored = {q: sum(1 for o in outcomes if o.get(q) is not None) for q in ids}
    return Stability(
        answerable=len(ids),
        always_pass=sum(1 for q in ids if passes[q] == n_runs),
        ever_pass=sum(1 for q in ids if passes[q] > 0),
        never_pass=sum(1 for q in ids if scored[q] > 0 and passes[q] == 0),
        unscored_in_some=sum(1 for q in ids if scored[q] < n_runs),
    )


def stability_line(stability: dict[str, Stability], n_runs: int) -> str:
    parts = []
    for tier, s in stability.items():
        flipping = s.ever_pass - s.always_pass
        text = (
            f"tier {tier}: {s.always_pass} of {s.answerable} answerable questions always pass, "
            f"{s.ever_pass} ever pass ({flipping} unstable across {n_runs} repeats)"
        )
        if s.unscored_in_some:
            text += f", {s.unscored_in_some} unscored in some repeat"
        parts.append(text)
    return "; ".join(parts)


def calibrate(
    runs: Sequence[RunBundle | str | Path],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> NoiseFloor:
    bundles = [r if isinstance(r, RunBundle) else load_run(r) for r in runs]
    check_repeats(bundles)
    outcomes = [{r.question_id: r.covered for r in run.rows} for run in bundles]
    reference = bundles[0]
    by_tier: dict[str, list] = defaultdict(list)
    for row in reference.rows:
        by_tier[row.tier].append(row)
    options = {"resamples": resamples, "seed": seed}
    tiers: dict[str, TierFloor] = {}
    stability: dict[str, Stability] = {}
    for tier in reference.tiers():
        rows = by_tier[tier]
        answerable = [r.question_id for r in rows if not r.abstention]
        abstaining = [r.question_id for r in rows if r.abstention]
        types: dict[str, list[str]] = defaultdict(list)
        for r in rows:
            if not r.abstention:
                types[r.question_type].append(r.question_id)
        tiers[tier] = TierFloor(
            coverage=estimate_floor(outcomes, answerable, **options),
            by_type={
                t: estimate_floor(outcomes, ids, **options) for t, ids in sorted(types.items())
            },
            abstention=estimate_floor(outcomes, abstaining, **options) if abstaining else None,
        )
        stability[tier] = _stability(outcomes, answerable, len(bundles))
    questions = {}
    for row in reference.rows:
        scored = [o[row.question_id] for o in outcomes if o.get(row.question_id) is not None]
        questions[row.question_id] = QuestionPassRate(
            tier=row.tier,
            question_type=row.question_type,
            abstention=row.abstention,
            passes=sum(1 for v in scored if v),
            scored=len(scored),
            pass_rate=rate(scored),
        )
    sampled = {reconcile_sampled(run) for run in bundles}
    return NoiseFloor(
        created_at=datetime.now(UTC).isoformat(),
        runs=[str(run.path) for run in bundles],
        pins=pin_values(reference, COMPARABILITY_PINS),
        configuration=pin_values(reference, CONFIGURATION_PINS),
        key=floor_key(reference),
        sample_identities=[run.sample_identity for run in bundles],
        reconcile_sampled=sampled.pop() if len(sampled) == 1 else None,
        independence=independence_line(bundles),
        resamples=resamples,
        seed=seed,
        tiers=tiers,
        questions=questions,
        stability=stability,
        stability_line=stability_line(stability, len(bundles)),
    )


# --- where floors live ---------------------------------------------------------------------


def floor_key_of(pins: dict[str, Any], configuration: dict[str, Any]) -> str:
    """Short sha256 of the canonical JSON of a configuration's comparability and
    configuration pin values: the name of its floor file."""
    canonical = json.dumps(
        {"pins": pins, "configuration": configuration},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:FLOOR_KEY_DIGITS]


def floor_key(run: RunBundle) -> str:
    return floor_key_of(pin_values(run, COMPARABILITY_PINS), pin_values(run, CONFIGURATION_PINS))


def floors_dir(runs_dir: str | Path) -> Path:
    return Path(runs_dir).expanduser() / NOISE_FLOORS_DIR


def floor_path_for(runs_dir: str | Path, run: RunBundle) -> Path:
    """`<runs_dir>/noise_floors/<key>.json`: where the floor of `run`'s configuration lives."""
    return floors_dir(runs_dir) / f"{floor_key(run)}.json"


def default_noise_floor_path(runs: Sequence[RunBundle | str | Path]) -> Path:
    """The floor file of the first run's configuration, in its runs directory (its parent)."""
    first = runs[0]
    run = first if isinstance(first, RunBundle) else load_run(first)
    return floor_path_for(run.path.parent, run)


def save_noise_floor(floor: NoiseFloor, path: str | Path) -> Path:
    """Write atomically (temp file + rename), so compare never reads half a floor."""
    path = Path(path).expanduser().resolve()
    write_text(path, floor.model_dump_json(indent=2) + "\n")
    return path


def load_noise_floor(path: str | Path) -> NoiseFloor:
    path = Path(path).expanduser()
    try:
        return NoiseFloor.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise NoiseFloorError(f"cannot read noise floor {path}: {exc.strerror or exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise NoiseFloorError(f"not a noise floor file: {path} ({where}: {first['msg']})") from None
