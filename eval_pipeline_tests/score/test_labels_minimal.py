"""A labels file a user can write: id, question, reference, response and label are enough.
The optional fields (tier, question_type, abstention, why, hard_case) left out are unknown,
counted as "unknown" in the composition and the agreement groups; the committed set keeps its
composition and its strictness; a misspelled field names the known ones."""

from __future__ import annotations

import json

import pytest

from eval_pipeline.corpus.judge_labels import (
    UNKNOWN,
    JudgeLabelError,
    as_golden,
    invariant_items,
    load_labels,
)
from eval_pipeline.score.agreement import VerdictRecord, compute_agreement
from eval_pipeline.score.judges import TYPE_RULES, judge_instruction

# Written for this test (not items of the committed set).
MINIMAL = [
    {
        "id": "u-01",
        "question": "Which colour did I paint the garden shed?",
        "reference": "Sage green",
        "response": "You painted it sage green.",
        "label": "yes",
    },
    {
        "id": "u-02",
        "question": "How many pages is the novel I am drafting?",
        "reference": "212",
        "response": "Your draft is about 150 pages.",
        "label": "no",
    },
    {
        "id": "u-03",
        "question": "What is the name of my landlord's parrot?",
        "reference": "Biscuit",
        "response": "The parrot is called Biscuit.",
        "label": "yes",
    },
]
# one item that gives some of the optional fields: tier inferred from its question type
PARTLY = {
    "id": "u-04",
    "question_type": "tier2-infra",
    "question": "Which port does the staging proxy listen on?",
    "reference": "8443",
    "response": "It listens on 8080.",
    "label": "no",
    "hard_case": "baseline_wrong",
}


def _write(tmp_path, rows, name="mine.jsonl"):
    path = tmp_path / name
    path.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", "utf-8"
    )
    return path


def test_a_five_field_file_loads_with_unknowns(tmp_path):
    s = load_labels(_write(tmp_path, MINIMAL))
    assert [i.id for i in s.items] == ["u-01", "u-02", "u-03"]
    item = s.items[0]
    assert (item.tier, item.question_type, item.abstention, item.why, item.hard_case) == (
        None,
        None,
        None,
        None,
        None,
    )
    # not an invariant item (no tier 2, no golden)
    assert invariant_items(s).items == []
    # the judge sees a usable golden: the default rule, answerable, tier 1; same keys as ever
    golden = as_golden(item)
    assert golden == {
        "name": "u-01",
        "input": item.question,
        "expected_output": item.reference,
        "additional_metadata": {"tier": 1, "question_type": UNKNOWN, "abstention": False},
    }
    meta = golden["additional_metadata"]
    assert UNKNOWN not in TYPE_RULES
    assert judge_instruction(meta["question_type"], meta["abstention"], meta["tier"]) == (
        judge_instruction("default", False, 1)
    )


def test_missing_fields_are_unknown_in_the_composition(tmp_path):
    s = load_labels(_write(tmp_path, [*MINIMAL, PARTLY]))
    assert s.by_id()["u-04"].tier == 2  # inferred from tier2-infra
    comp = s.composition()
    assert comp["items"] == 4
    assert comp["by_tier"] == {"2": 1, UNKNOWN: 3}
    assert comp["by_question_type"] == {"tier2-infra": 1, UNKNOWN: 3}
    assert comp["by_abstention"] == {UNKNOWN: 4}
    assert comp["by_hard_case"] == {"baseline_wrong": 1, UNKNOWN: 3}
    assert comp["by_label"] == {"no": 2, "yes": 2}
    assert comp["by_type_and_label"] == {
        "tier2-infra/no": 1,
        f"{UNKNOWN}/no": 1,
        f"{UNKNOWN}/yes": 2,
    }


def test_missing_fields_are_unknown_in_the_agreement_groups(tmp_path):
    s = load_labels(_write(tmp_path, [*MINIMAL, PARTLY]))
    verdicts = {"u-01": "yes", "u-02": "yes", "u-03": None, "u-04": "no"}
    records = [VerdictRecord(id=i.id, label=i.label, verdict=verdicts[i.id]) for i in s.items]
    result = compute_agreement(s, records, judge_model="x", prompt_hash="y")
    assert (result.n_items, result.n_judged, result.n_unscored) == (4, 3, 1)
    assert set(result.by_question_type) == {"tier2-infra", UNKNOWN}
    assert set(result.by_hard_case) == {"baseline_wrong", UNKNOWN}
    assert set(result.by_tier) == {"2", UNKNOWN}
    assert set(result.by_abstention) == {UNKNOWN}
    unknown = result.by_question_type[UNKNOWN]
    assert unknown.model_dump() == result.by_tier[UNKNOWN].model_dump()
    assert unknown.model_dump() == result.by_hard_case[UNKNOWN].model_dump()
    assert result.by_abstention[UNKNOWN].model_dump() == result.confusion.model_dump()


@pytest.mark.parametrize("field", ["label", "response"])
def test_a_file_missing_a_required_field_is_refused_in_one_line(tmp_path, field):
    rows = [MINIMAL[0], {k: v for k, v in MINIMAL[1].items() if k != field}]
    with pytest.raises(JudgeLabelError) as err:
        load_labels(_write(tmp_path, rows))
    lines = [str(i) for i in err.value.issues]
    assert lines == [f"{tmp_path / 'mine.jsonl'}:2: item 'u-02': field {field!r}: missing"]


def test_a_misspelled_field_is_refused_naming_the_known_fields(tmp_path):
    row = {**MINIMAL[0], "questiontype": "multi-session"}
    with pytest.raises(JudgeLabelError) as err:
        load_labels(_write(tmp_path, [row]))
    [line] = [str(i) for i in err.value.issues]
    assert "\n" not in line
    assert line.startswith(f"{tmp_path / 'mine.jsonl'}:1: item 'u-01': field 'questiontype': ")
    assert "unknown field" in line and "did you mean 'question_type'?" in line
    for known in ("id", "question", "reference", "response", "label", "tier", "hard_case"):
        assert f" {known}," in line or line.endswith(f" {known})")


def test_given_fields_keep_their_rules(tmp_path):
    rows = [
        {**MINIMAL[0], "question_type": "weird"},  # no tier: no tier's type
        {**MINIMAL[1], "tier": 1, "question_type": "tier2-bug"},  # not a tier-1 type
        {**MINIMAL[2], "hard_case": "outdated_value"},  # forces 'no'
        {**PARTLY, "why": " "},  # given, so not blank
        {**PARTLY, "id": "u-05", "tier": 1},  # tier given: tier2-infra does not fit it
    ]
    with pytest.raises(JudgeLabelError) as err:
        load_labels(_write(tmp_path, rows))
    lines = [str(i) for i in err.value.issues]
    assert len(lines) == 5, lines
    assert "item 'u-01': field 'question_type': 'weird' is not a known question type" in lines[0]
    assert "item 'u-02': field 'question_type': 'tier2-bug' is not a tier-1 type" in lines[1]
    assert "item 'u-03': field 'label': hard case 'outdated_value' is always 'no'" in lines[2]
    assert "item 'u-04': field 'why': Value error, must not be empty" in lines[3]
    assert "item 'u-05': field 'question_type': 'tier2-infra' is not a tier-1 type" in lines[4]


def test_cross_field_rules_needing_a_missing_field_are_skipped(tmp_path):
    rows = [
        # an abstention tag without abstention: the abstention rules need it, skipped
        {**MINIMAL[0], "hard_case": "abstention_refusal"},
        # a preference tag without a question type: the preference rules need it, skipped
        {**MINIMAL[2], "hard_case": "preference_met"},
        # a golden without tier or abstention: tier 2 inferred, the _abs rule skipped
        {**MINIMAL[1], "id": "u-06", "golden": "t2-bug-x-q1_abs"},
    ]
    s = load_labels(_write(tmp_path, rows))
    assert s.by_id()["u-06"].tier == 2
    assert [i.id for i in invariant_items(s).items] == ["u-06"]


def test_the_committed_set_loads_with_the_same_composition():
    s = load_labels()
    assert len(s) == 174
    comp = s.composition()
    assert UNKNOWN not in json.dumps(comp)
    assert comp["by_tier"] == {"1": 130, "2": 44}
    assert comp["by_abstention"] == {"abstention": 22, "answerable": 152}
    assert comp["by_label"] == {"no": 86, "yes": 88}
    assert sum(comp["by_hard_case"].values()) == 174
    for item in s.items:  # every field still given in the committed set
        assert None not in (item.tier, item.question_type, item.abstention, item.why)
        assert item.hard_case is not None
        assert as_golden(item)["additional_metadata"] == {
            "tier": item.tier,
            "question_type": item.question_type,
            "abstention": item.abstention,
        }


def test_judge_check_runs_on_a_minimal_file(tmp_path, monkeypatch):
    """run_judge_check on a five-field file: every item judged with the default rule, no
    invariant check (no item names a golden), groups keyed "unknown"."""
    from eval_pipeline.score.agreement import AgreementStore, read_agreement
    from eval_pipeline.score.judge_check import run_judge_check
    from eval_pipeline_tests.wire_server import RecordedRequest, ScriptedReply, WireServer

    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-labels-minimal-test")
    monkeypatch.delenv("CONFIDENT_API_KEY", raising=False)
    by_response = {r["response"]: r["label"] for r in MINIMAL}
    systems: list[str] = []

    def responder(request: RecordedRequest) -> ScriptedReply:
        systems.append(
            " ".join(str(m.get("content", "")) for m in request.messages if m["role"] == "system")
        )
        response = request.last_user_text.split("Assistant's response: ", 1)[-1].strip()
        verdict = by_response[response]
        return ScriptedReply(text=json.dumps({"verdict": verdict, "reason": "scripted"}))

    path = _write(tmp_path, MINIMAL)
    with WireServer(responder=responder) as server:
        outcome = run_judge_check(
            f"openai_compatible:judge-model@{server.openai_base_url}",
            labels=path,
            methods=["reference"],
            with_probes=False,
            out_dir=tmp_path / "check",
            store=AgreementStore(tmp_path / "store"),
            progress_stream=None,
        )
    assert outcome.invariant is None
    result = read_agreement(outcome.answer.agreement)
    assert (result.n_items, result.n_judged, result.accuracy.estimate) == (3, 3, 1.0)
    assert set(result.by_question_type) == {UNKNOWN} == set(result.by_tier)
    assert len(systems) == 3
    assert all(TYPE_RULES["default"] in s for s in systems)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('"reference": NaN', "NaN is not a JSON value"),
        ('"response": "a \\ud800 b"', "response holds a lone surrogate (U+D800"),
        ('"why": ' + "[" * 50_000 + "]" * 50_000, "nested deeper than 32 levels"),
    ],
)
def test_a_label_line_judge_check_cannot_use_is_one_issue_not_a_traceback(tmp_path, line, says):
    """Issue 28, finding 7: judge-check on these printed a 29-46 line traceback."""
    good = json.dumps(MINIMAL[0])
    bad = good[:-1] + ", " + line + "}"
    path = tmp_path / "mine.jsonl"
    path.write_text(good.replace("u-01", "u-00") + "\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(JudgeLabelError) as err:
        load_labels(path)
    [issue] = [str(i) for i in err.value.issues]
    assert issue.startswith(f"{path}:2: ") and says in issue
