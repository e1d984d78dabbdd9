"""The judge's labelled set and bias probes: the shipped files validate and have the promised
composition, and the loader names the file, line, item and field of every problem."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from eval_pipeline.corpus.judge_labels import (
    HARD_CASES,
    PROBES,
    TIER1_TYPES,
    TIER2_TYPES,
    JudgeLabelError,
    as_golden,
    load_labels,
    load_probes,
)
from eval_pipeline.score.judges import judge_instruction


@pytest.fixture(scope="module")
def labels():
    return load_labels()


@pytest.fixture(scope="module")
def probes():
    return load_probes()


def test_shipped_label_set_has_the_promised_composition(labels):
    items = labels.items
    assert len(items) >= 150
    answerable = Counter(i.question_type for i in items if not i.abstention)
    for qtype in TIER1_TYPES:
        assert answerable[qtype] >= 15, qtype
    for qtype in TIER2_TYPES:
        assert answerable[qtype] >= 5, qtype
    tiers = Counter(i.tier for i in items)
    assert tiers[1] >= 120 and tiers[2] >= 40
    abstention = [i for i in items if i.abstention]
    assert len(abstention) >= 20
    assert {i.tier for i in abstention} == {1, 2}
    assert Counter(i.label for i in abstention) == Counter(
        {"yes": len(abstention) // 2, "no": len(abstention) // 2}
    )
    # abstention spread over the tier-1 types that have it upstream
    assert {i.question_type for i in abstention if i.tier == 1} >= {
        "single-session-user",
        "multi-session",
        "knowledge-update",
        "temporal-reasoning",
    }
    # every hard case is used, at least three times
    cases = Counter(i.hard_case for i in items)
    assert set(cases) == set(HARD_CASES)
    assert min(cases.values()) >= 3
    # label balance, overall and per tier
    yes = sum(i.label == "yes" for i in items)
    assert 0.45 <= yes / len(items) <= 0.55
    for tier in (1, 2):
        of_tier = [i for i in items if i.tier == tier]
        assert 0.4 <= sum(i.label == "yes" for i in of_tier) / len(of_tier) <= 0.6


def test_hard_cases_whose_label_depends_on_the_item_have_both_labels(labels):
    def labels_of(case, **where):
        return {
            i.label
            for i in labels.items
            if i.hard_case == case and all(getattr(i, k) == v for k, v in where.items())
        }

    assert labels_of("format_variant") == {"yes", "no"}
    # the judge's own rule: off by one counts for temporal-reasoning counts of days/weeks/months
    assert labels_of("temporal_off_by_one", question_type="temporal-reasoning") == {"yes", "no"}
    # tier 2 is judged with the default rule, which has no off-by-one allowance
    assert labels_of("temporal_off_by_one", tier=2) == {"no"}
    assert labels_of("preference_met") == {"yes"} and labels_of("preference_not_met") == {"no"}
    assert labels_of("abstention_refusal") == {"yes"}
    assert labels_of("abstention_invented") == {"no"}
    assert labels_of("outdated_value") == {"no"} and labels_of("updated_and_outdated") == {"yes"}


def test_composition_counts_match_the_items(labels):
    comp = labels.composition()
    assert comp["items"] == len(labels)
    assert sum(comp["by_question_type"].values()) == len(labels)
    assert sum(comp["by_hard_case"].values()) == len(labels)
    assert comp["by_label"]["yes"] + comp["by_label"]["no"] == len(labels)
    assert len(labels.sha256) == 64


def test_items_map_onto_the_scoring_judges_golden_shape(labels):
    for item in labels.items:
        golden = as_golden(item)
        meta = golden["additional_metadata"]
        assert golden["input"] == item.question
        assert golden["expected_output"] == item.reference
        # the instruction scoring would use exists for every item (tier-2 types: default rule)
        assert judge_instruction(meta["question_type"], meta["abstention"], meta["tier"])
    tier2 = next(i for i in labels.items if i.golden)
    assert as_golden(tier2)["name"] == tier2.golden


def test_shipped_probes_cover_every_kind(probes, labels):
    kinds = Counter(p.probe for p in probes.pairs)
    assert set(kinds) == set(PROBES)
    assert min(kinds.values()) >= 10
    assert {p.tier for p in probes.pairs} == {1, 2}
    for kind in ("terse_vs_padded", "hedged_vs_confident"):
        # mostly correct answers, and a few wrong ones (does the change make a wrong one pass?)
        assert {p.label for p in probes.pairs if p.probe == kind} == {"yes", "no"}
    for p in probes.pairs:
        if p.probe == "terse_vs_padded":
            assert p.a.response.rstrip(".") in p.b.response and len(p.b.response) > 2 * len(
                p.a.response
            )
    assert len(probes.sha256) == 64


# --------------------------------------------------------------------------------------------
# the loader's errors

GOOD = {
    "id": "my-01",
    "tier": 1,
    "question_type": "multi-session",
    "abstention": False,
    "question": "How many cats?",
    "reference": "2",
    "response": "Two cats.",
    "label": "yes",
    "why": "same number",
    "hard_case": "format_variant",
}


def _write(tmp_path, rows, name="labels.jsonl"):
    path = tmp_path / name
    path.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", "utf-8"
    )
    return path


def test_any_file_in_the_format_is_accepted(tmp_path):
    other = {**GOOD, "id": "my-02", "tier": 2, "question_type": "tier2-bug", "label": "no"}
    other.update(hard_case="baseline_wrong", golden="t2-bug-x-q1")
    s = load_labels(_write(tmp_path, [GOOD, "", other]))
    assert [i.id for i in s.items] == ["my-01", "my-02"] and s.items[1].golden == "t2-bug-x-q1"


def test_every_problem_is_one_line_naming_item_and_field(tmp_path):
    rows = [
        GOOD,
        "{not json",
        {**GOOD, "id": "b-1", "label": "maybe"},
        {**GOOD, "id": "b-2", "extra": 1},
        {k: v for k, v in GOOD.items() if k != "label"} | {"id": "b-3"},  # why may go, not label
        {**GOOD, "id": "b-4", "question_type": "tier2-pref"},
        {**GOOD, "id": "b-5", "hard_case": "outdated_value"},  # forced 'no'
        {**GOOD, "id": "b-6", "hard_case": "abstention_refusal"},  # abstention false
        {**GOOD, "id": "b-7", "abstention": True},  # abstention needs its own tags
        {**GOOD, "id": "b-8", "hard_case": "preference_met"},
        {**GOOD, "id": "b-9", "golden": "t2-x-q1"},  # tier 1 with a golden
        {**GOOD, "id": "bad id!"},
        {**GOOD, "hard_case": "baseline_correct"},  # duplicate of my-01
        "[1, 2]",
    ]
    with pytest.raises(JudgeLabelError) as err:
        load_labels(_write(tmp_path, rows))
    lines = [str(i) for i in err.value.issues]
    assert all("\n" not in line for line in lines)
    expected = [
        "labels.jsonl:2: invalid JSON",
        "labels.jsonl:3: item 'b-1': field 'label':",
        "labels.jsonl:4: item 'b-2': field 'extra': unknown field",
        "labels.jsonl:5: item 'b-3': field 'label': missing",
        "labels.jsonl:6: item 'b-4': field 'question_type': 'tier2-pref' is not a tier-1 type",
        "labels.jsonl:7: item 'b-5': field 'label': hard case 'outdated_value' is always 'no'",
        "labels.jsonl:8: item 'b-6': field 'abstention'",
        "labels.jsonl:9: item 'b-7': field 'hard_case'",
        "labels.jsonl:10: item 'b-8': field 'hard_case'",
        "labels.jsonl:11: item 'b-9': field 'golden'",
        "labels.jsonl:12: item 'bad id!': field 'id'",
        "labels.jsonl:13: item 'my-01': field 'id': duplicate: also on line 1",
        "labels.jsonl:14: a line must be a JSON object",
    ]
    for want in expected:
        assert any(line.endswith(want) or want in line for line in lines), (want, lines)
    assert len(lines) == len(expected)


def test_empty_and_unreadable_files_are_refused(tmp_path):
    with pytest.raises(JudgeLabelError, match="holds no item"):
        load_labels(_write(tmp_path, [""]))
    with pytest.raises(JudgeLabelError, match="cannot read"):
        load_labels(tmp_path / "nope.jsonl")


def test_probe_rules(tmp_path):
    base = {k: GOOD[k] for k in ("tier", "question_type", "abstention", "question", "reference")}
    ok = {
        "id": "p-1",
        "probe": "response_order",
        **base,
        "label": "yes",
        "why": "w",
        "a": {"response": "Two."},
        "b": {"response": "Two.", "order": "response_first"},
    }
    assert len(load_probes(_write(tmp_path, [ok], "probes.jsonl"))) == 1
    bad = [
        {**ok, "id": "p-2", "b": {"response": "Three.", "order": "response_first"}},
        {**ok, "id": "p-3", "probe": "terse_vs_padded", "b": {"response": "Two."}},
        {
            **ok,
            "id": "p-4",
            "probe": "hedged_vs_confident",
            "b": {"response": "Maybe two.", "order": "response_first"},
        },
        {**ok, "id": "p-5", "probe": "louder"},
    ]
    with pytest.raises(JudgeLabelError) as err:
        load_probes(_write(tmp_path, bad, "probes.jsonl"))
    lines = [str(i) for i in err.value.issues]
    assert any("item 'p-2': field 'b.response'" in x for x in lines)
    assert any("item 'p-3': field 'b.response'" in x for x in lines)
    assert any("item 'p-4': field 'b.order'" in x for x in lines)  # order kept as scoring's
    assert any("item 'p-5': field 'probe'" in x for x in lines)


def test_invariant_label_rules(tmp_path):
    t2 = {**GOOD, "tier": 2, "question_type": "tier2-bug", "golden": "t2-bug-x-q1"}
    t2.update(hard_case="buried_among_wrong_facts")
    ok = {**t2, "id": "i-1", "invariant_label": "no", "invariant_why": "an unsupported claim"}
    s = load_labels(_write(tmp_path, [ok, {**t2, "id": "i-0"}]))
    assert [i.expected_invariant for i in s.items] == ["no", "yes"]
    bad = [
        {**ok, "id": "i-2", "golden": None},  # needs a golden
        {**ok, "id": "i-3", "invariant_label": "yes"},  # same as label: leave it out
        {**ok, "id": "i-4", "invariant_why": " "},
        {**t2, "id": "i-5", "invariant_why": "why"},  # a why without the label
    ]
    with pytest.raises(JudgeLabelError) as err:
        load_labels(_write(tmp_path, bad))
    lines = [str(i) for i in err.value.issues]
    assert any("item 'i-2': field 'invariant_label': only items that name" in x for x in lines)
    assert any("item 'i-3': field 'invariant_label': give it only where" in x for x in lines)
    assert any("item 'i-4': field 'invariant_why': missing" in x for x in lines)
    assert any("item 'i-5': field 'invariant_why': only with invariant_label" in x for x in lines)
    assert len(lines) == 4
