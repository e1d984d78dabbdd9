"""Deterministic stratified sampling of questions by (question_type, abstention).

Quotas are proportional to stratum size with a per-stratum floor, and strata of equal size
always get equal quotas (so the sample does not depend on the order strata are listed in).
Within a stratum, questions are ranked by a seeded hash of their id: the same spec on the
same input selects the same questions, and adding a question elsewhere does not reshuffle.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from fractions import Fraction

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.corpus.errors import CorpusError

Stratum = tuple[str, bool]


class SampleSpec(BaseModel):
    """How a batch is drawn from the upstream file. Part of every run's pins."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sample: int | None = Field(default=None, ge=1)  # None: every question
    seed: int = 0
    # Minimum questions per stratum (if it has them). None: 1, or 0 for a sample smaller than
    # the number of strata (a 4-question sample of 10 strata is drawn, not refused); the
    # effective spec, which is the pin, records what was used.
    floor: int | None = Field(default=None, ge=0)
    max_sessions_per_question: int | None = Field(default=None, ge=1)  # None: full haystacks

    @property
    def subsampled(self) -> bool:
        return self.max_sessions_per_question is not None


def resolved_floor(spec: SampleSpec, strata: int) -> int:
    if spec.floor is not None:
        return spec.floor
    return 0 if spec.sample is not None and spec.sample < strata else 1


def effective_spec(spec: SampleSpec, available: int, strata: int | None = None) -> SampleSpec:
    """The spec as it is drawn from `available` questions: it is the pin.

    A spec that takes every question (no `sample`, or one of at least what the file holds)
    is recorded as every question, whatever the seed and floor (neither changes that draw):
    asking 1000 of 31, 31 of 31 and nothing at all select the same questions, so they pin the
    same. Any other spec is kept as asked (it reproduces its own selection).
    """
    if spec.sample is None or spec.sample >= available:
        return SampleSpec(
            floor=None if strata is None else 1,
            max_sessions_per_question=spec.max_sessions_per_question,
        )
    if strata is not None and spec.floor is None:
        spec = spec.model_copy(update={"floor": resolved_floor(spec, strata)})
    return spec


def sample_note(requested: int | None, available: int, selected: int) -> str | None:
    """One line when the draw is not what `--sample` asked for, else None."""
    if requested is None:
        return None
    if requested > available:
        return f"--sample {requested} capped to {available} questions (all of them)"
    if selected != requested:
        return (
            f"--sample {requested} drew {selected} questions: strata of equal size keep "
            "equal quotas"
        )
    return None


def stratum_key(stratum: Stratum) -> str:
    qtype, abstention = stratum
    return f"{qtype}/{'abstention' if abstention else 'answerable'}"


def allocate_quotas(sizes: dict[Stratum, int], total: int, floor: int) -> dict[Stratum, int]:
    """Quota per stratum summing to at most `total` (exactly, unless ties forbid it)."""
    available = sum(sizes.values())
    if total >= available:
        return dict(sizes)
    base = {s: min(floor, n) for s, n in sizes.items()}
    if sum(base.values()) > total:
        raise CorpusError(
            f"sample {total} is smaller than the per-stratum floor needs "
            f"({sum(base.values())} for {len(sizes)} strata with floor {floor})",
            field="sample",
        )
    # Floors first; what is left is shared in proportion to what each stratum has beyond
    # its floor, never exceeding its size.
    spare = {s: n - base[s] for s, n in sizes.items()}
    rest, spare_total = total - sum(base.values()), sum(spare.values())
    share = {s: base[s] + Fraction(rest * spare[s], spare_total) for s in sizes}
    quota = {s: int(share[s]) for s in sizes}
    # Hand out what is left by largest remainder, one size-group at a time, so that equal
    # strata rise together; a group that does not fit whole is skipped.
    groups: dict[int, list[Stratum]] = defaultdict(list)
    for s, n in sizes.items():
        groups[n].append(s)
    while (left := total - sum(quota.values())) > 0:
        candidates = []
        for n, members in groups.items():
            open_members = [s for s in members if quota[s] < n]
            if open_members and len(open_members) <= left:
                deficit = share[open_members[0]] - quota[open_members[0]]
                candidates.append((deficit, n, open_members))
        if not candidates:
            break
        _, _, members = max(candidates, key=lambda c: (c[0], c[1]))
        for s in members:
            quota[s] += 1
    return quota


def _rank(seed: int, question_id: str) -> bytes:
    return hashlib.sha256(f"{seed}\x00{question_id}".encode()).digest()


def select_questions(
    questions: Iterable[tuple[str, Stratum]], spec: SampleSpec
) -> tuple[set[str], dict[Stratum, tuple[int, int]]]:
    """Return the selected question ids and, per stratum, (available, selected)."""
    by_stratum: dict[Stratum, list[str]] = defaultdict(list)
    for qid, stratum in questions:
        by_stratum[stratum].append(qid)
    sizes = {s: len(ids) for s, ids in by_stratum.items()}
    total = spec.sample if spec.sample is not None else sum(sizes.values())
    quotas = allocate_quotas(sizes, total, resolved_floor(spec, len(sizes)))
    selected: set[str] = set()
    for s, ids in by_stratum.items():
        ranked = sorted(ids, key=lambda q: _rank(spec.seed, q))
        selected.update(ranked[: quotas[s]])
    counts = {s: (sizes[s], quotas[s]) for s in sizes}
    return selected, counts
