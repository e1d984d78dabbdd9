"""The committed tier-2 corpus: it validates and meets the corpus-wide rules."""

from __future__ import annotations

from collections import Counter

import pytest

from eval_pipeline.tier2.convert import asked_at, haystack_order
from eval_pipeline.tier2.load import corpus_issues, load_scenarios, load_universe
from eval_pipeline.tier2.schema import DIFFICULTIES, USE_CASES, question_must_cite


@pytest.fixture(scope="module")
def universe():
    return load_universe()


@pytest.fixture(scope="module")
def scenarios(universe):
    return load_scenarios(universe=universe)


def test_every_committed_scenario_validates(scenarios):
    assert corpus_issues(scenarios) == []


def test_at_least_30_scenarios_and_3_adversarial(scenarios):
    assert len(scenarios) >= 30
    assert sum(s.difficulty == "adversarial" for s in scenarios) >= 3


def test_every_use_case_at_every_difficulty(scenarios):
    cells = Counter((s.use_case, s.difficulty) for s in scenarios)
    assert all(cells[(uc, d)] for uc in USE_CASES for d in DIFFICULTIES), cells


def test_light_subset_has_exactly_one_per_use_case(scenarios):
    light = load_scenarios(light_only=True)
    assert sorted(s.use_case for s in light) == sorted(USE_CASES)
    assert {s.id for s in light} == {s.id for s in scenarios if s.light}
    assert corpus_issues(light, light_only=True) == []


def test_every_cited_id_exists_in_the_universe(scenarios, universe):
    for s in scenarios:
        for q in s.questions:
            for eid in question_must_cite(s, q) + list(s.must_not_cite):
                assert eid in universe, (s.id, eid)
        assert all(e in universe for e in s.haystack_ids), s.id


def test_questions_are_asked_after_their_events(scenarios, universe):
    for s in scenarios:
        latest = max(universe[e].timestamp for e in s.haystack_ids)
        for q in s.questions:
            assert asked_at(s, q, universe) > latest, s.id


def test_adversarial_kinds_are_all_exercised(scenarios, universe):
    kinds = Counter(k for s in scenarios for k in s.adversarial)
    assert set(kinds) == {"conflicting_facts", "out_of_order", "near_duplicate"}
    for s in scenarios:
        if "out_of_order" in s.adversarial:
            times = [universe[e].timestamp for e in haystack_order(s, universe)]
            assert times != sorted(times), s.id


def test_combo_scenarios_list_dimensions(scenarios):
    for s in scenarios:
        if s.use_case == "COMBO":
            assert len(set(s.dimensions)) >= 2, s.id
        else:
            assert s.dimensions == [], s.id


def test_universe_events_are_all_used_and_on_whole_minutes(universe, scenarios):
    used = {e for s in scenarios for e in s.haystack_ids}
    assert set(universe.events) == used  # no dead events in the universe
    for event in universe.events.values():
        assert event.timestamp.second == 0 and event.timestamp.tzinfo is None
