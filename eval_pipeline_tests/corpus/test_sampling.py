"""Stratified sampling: floors, equal strata, proportionality, determinism."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.sampling import (
    SampleSpec,
    allocate_quotas,
    effective_spec,
    select_questions,
)

# The real LongMemEval_S strata: (type, abstention) → count (30 abstention of 500).
S_STRATA = {
    ("single-session-user", False): 64,
    ("single-session-user", True): 6,
    ("single-session-assistant", False): 50,
    ("single-session-assistant", True): 6,
    ("single-session-preference", False): 30,
    ("multi-session", False): 121,
    ("multi-session", True): 12,
    ("knowledge-update", False): 72,
    ("knowledge-update", True): 6,
    ("temporal-reasoning", False): 127,
    ("temporal-reasoning", True): 6,
}


def _questions(strata):
    # Abstention questions sit at the end of each type block, as upstream orders them.
    return [
        (f"{t}{'_abs' if a else ''}_{i}", (t, a)) for (t, a), n in strata.items() for i in range(n)
    ]


def test_small_sample_still_reaches_every_abstention_stratum():
    quotas = allocate_quotas(S_STRATA, 50, floor=1)
    assert sum(quotas.values()) == 50
    assert all(q >= 1 for q in quotas.values())
    assert quotas[("multi-session", False)] > quotas[("single-session-preference", False)]


def test_equal_strata_get_equal_quotas():
    for total in range(11, 200, 7):
        quotas = allocate_quotas(S_STRATA, total, floor=1)
        equal_six = {quotas[s] for s, n in S_STRATA.items() if n == 6}
        assert len(equal_six) == 1, (total, quotas)
        assert sum(quotas.values()) <= total


def test_proportional_for_large_samples():
    quotas = allocate_quotas(S_STRATA, 250, floor=1)
    for s, n in S_STRATA.items():
        assert abs(quotas[s] - n / 2) <= 1.5, (s, quotas[s])


def test_whole_set_when_sample_is_large_or_absent():
    qs = _questions(S_STRATA)
    selected, counts = select_questions(qs, SampleSpec())
    assert len(selected) == 500
    selected, _ = select_questions(qs, SampleSpec(sample=10_000))
    assert len(selected) == 500


def test_selection_is_seeded_and_stable_under_reordering():
    qs = _questions(S_STRATA)
    a, _ = select_questions(qs, SampleSpec(sample=40, seed=3))
    b, _ = select_questions(list(reversed(qs)), SampleSpec(sample=40, seed=3))
    c, _ = select_questions(qs, SampleSpec(sample=40, seed=4))
    assert a == b and a != c and len(a) == 40
    assert sum("_abs_" in q for q in a) >= 5  # every abstention stratum reached


def test_floor_larger_than_sample_is_a_clear_error():
    import pytest

    from eval_pipeline.corpus.errors import CorpusError

    with pytest.raises(CorpusError, match="floor"):
        allocate_quotas(S_STRATA, 5, floor=1)


@given(
    sizes=st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=12),
    frac=st.floats(min_value=0.05, max_value=1.0),
)
def test_quota_invariants(sizes, frac):
    strata = {(f"t{i}", False): n for i, n in enumerate(sizes)}
    total = max(len(sizes), int(sum(sizes) * frac))
    quotas = allocate_quotas(strata, total, floor=1)
    assert sum(quotas.values()) <= total
    assert all(1 <= quotas[s] <= n for s, n in strata.items())
    by_size: dict[int, set[int]] = {}
    for s, n in strata.items():
        by_size.setdefault(n, set()).add(quotas[s])
    assert all(len(v) == 1 for v in by_size.values())


def test_a_sample_smaller_than_the_strata_is_drawn_with_no_floor_unless_one_is_asked():
    # Ten strata of unequal size, as in the LongMemEval files.
    questions = [(f"q{s}-{i}", (f"type{s}", False)) for s in range(10) for i in range(s + 1)]
    small = effective_spec(SampleSpec(sample=4), len(questions), strata=10)
    assert small.floor == 0  # the pin records the floor used
    selected, _ = select_questions(questions, small)
    assert len(selected) == 4
    assert effective_spec(SampleSpec(sample=12), len(questions), strata=10).floor == 1
    with pytest.raises(CorpusError, match="floor"):  # asked for: still refused
        select_questions(questions, SampleSpec(sample=4, floor=1))
