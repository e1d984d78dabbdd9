"""Calibration: how far apart two runs of ONE configuration land by chance (the noise floor).

Producing repeats
-----------------
Repeats are runs of the same configuration over the same question set: every comparability
pin and every configuration pin (reconciler, retriever, top_k, graph backend) equal. The
intended way is `eval-pipeline run --repeat N`, which builds and reconciles the graph once and
repeats only retrieval and scoring N times (the stages whose LLM calls are non-deterministic),
writing N bundles into the runs directory. Until that option exists, running
`eval-pipeline run` N times with the same options gives the same kind of repeats (the graph is
rebuilt, which is deterministic for the offline reconciler). Then:

    eval-pipeline calibrate RUN RUN [RUN ...] [--out FILE]

writes `noise_floor.json` (default: `<runs_dir>/noise_floor.json`), which
`eval-pipeline compare --noise-floor FILE` and the `run_comparison` asset use.

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

import itertools
import os
import random
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eval_pipeline.runs.load import RunBundle, load_run
from eval_pipeline.runs.pins import (
    COMPARABILITY_PINS,
    CONFIGURATION_PINS,
    PinDifference,
    differing_pins,
    pin_values,
)
from eval_pipeline.score.stats import rate

NOISE_FLOOR_FILE = "noise_floor.json"
SCHEMA_VERSION = 1
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
    """The runs are not repeats of one configuration over one question set."""

    def __init__(self, message: str, differences: Sequence[tuple[str, PinDifference]] = ()):
        self.differences = list(differences)
        lines = [message]
        lines += [f"  {run}: {diff.describe('first run', 'this run')}" for run, diff in differences]
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
    return NoiseFloor(
        created_at=datetime.now(UTC).isoformat(),
        runs=[str(run.path) for run in bundles],
        pins=pin_values(reference, COMPARABILITY_PINS),
        configuration=pin_values(reference, CONFIGURATION_PINS),
        resamples=resamples,
        seed=seed,
        tiers=tiers,
        questions=questions,
        stability=stability,
        stability_line=stability_line(stability, len(bundles)),
    )


def default_noise_floor_path(runs: Sequence[RunBundle | str | Path]) -> Path:
    """`<runs_dir>/noise_floor.json`, the runs directory being the first run's parent."""
    first = runs[0]
    path = first.path if isinstance(first, RunBundle) else Path(first).expanduser().resolve()
    return path.parent / NOISE_FLOOR_FILE


def save_noise_floor(floor: NoiseFloor, path: str | Path) -> Path:
    """Write atomically (temp file + rename), so compare never reads half a floor."""
    path = Path(path).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(floor.model_dump_json(indent=2))
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
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
