"""The judge panel (`--judge-panel`): members checked as they are read and before a run, one
line naming the option and the member; each member judges every answer (offline with
`match`, a second member through the real openai SDK against a local scripted server), the
gate decides each member's coverage, and the summary and records carry it."""

from __future__ import annotations

import argparse
import json

import pytest

from eval_pipeline.cli import build_parser
from eval_pipeline.config import ScoringConfig
from eval_pipeline.llm import LLMLayer, LLMSettings, RetryPolicy
from eval_pipeline.preflight import PreflightError, check_judge_panel
from eval_pipeline.run_cli import UsageError, config_tree, run_config_from_args
from eval_pipeline.runs.records import ResultRow, Summary
from eval_pipeline.runs.records.base import for_writing
from eval_pipeline.score import panel
from eval_pipeline.score.judges import offline_judge_results
from eval_pipeline.score.scorer import score_question
from eval_pipeline.score.summary import summarize, summary_markdown
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline_tests.score.test_judges import _golden, _retrieval
from eval_pipeline_tests.wire_server import RecordedRequest, ScriptedReply, WireServer

SMALL = "local:smollm2-135m-instruct"


def run_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def parse(*argv: str):
    return run_config_from_args(run_parser().parse_args(list(argv)))[0]


# --- members, as read -----------------------------------------------------------------------


def test_the_flag_splits_on_commas_and_a_config_file_gives_a_list(tmp_path):
    run = parse("--judge-panel", f"match, reference={SMALL}")
    assert run.scoring.judge_panel == ["match", f"reference={SMALL}"]
    tree, _ = config_tree({"judge_panel": ["match", f"cascade={SMALL}"]}, tmp_path / "c.yaml")
    assert tree == {"scoring": {"judge_panel": ["match", f"cascade={SMALL}"]}}
    assert parse().scoring.judge_panel == []  # no panel by default


def test_member_keys_are_canonical():
    members = panel.parse_panel(["match", f"reference={SMALL}", "openai:gpt-4o-mini"], "hybrid")
    assert [m.key for m in members] == ["match", f"reference={SMALL}", "hybrid=openai:gpt-4o-mini"]
    assert panel.models(members) == [SMALL, "openai:gpt-4o-mini"]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("match", "needs at least 2 members, got 1 (match)"),
        ("match,match", "member 'match' repeats 'match'"),
        ("matsh,match", "member 'matsh': neither a verdict method"),
        ("cascade,match", "member 'cascade': method cascade needs a judge model"),
        (f"nope={SMALL},match", "member 'nope=local:smollm2-135m-instruct': unknown verdict"),
        ("match=openai:gpt-4o-mini,cascade=openai:x", "method match needs no model"),
        ("match,reference=openai", "member 'reference=openai': provider 'openai' needs a model"),
        ("match,,reasoned=openai:x", "an empty member"),
        (f"match,reference={SMALL},cascade={SMALL},reference={SMALL}", "repeats"),
    ],
)
def test_a_bad_panel_is_one_line_naming_the_option_and_the_member(value, says):
    with pytest.raises(UsageError) as err:
        parse("--judge-panel", value)
    text = str(err.value)
    assert text.startswith("option --judge-panel: ") and says in text, text
    assert "\n" not in text


def test_a_bare_model_takes_the_runs_verdict_method():
    with pytest.raises(ValueError, match="repeats"):
        ScoringConfig(verdict="reference", judge_panel=[f"reference={SMALL}", SMALL])
    ScoringConfig(verdict="cascade", judge_panel=[f"reference={SMALL}", SMALL])  # two members


def test_preflight_checks_each_members_model_without_calling_it(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(PreflightError) as err:
        check_judge_panel(["match", "reference=openai:gpt-4o-mini"], "cascade")
    assert str(err.value) == (
        "--judge-panel member reference=openai:gpt-4o-mini: environment variable "
        "OPENAI_API_KEY is not set; API keys are read only from the environment"
    )
    check_judge_panel(["match", "reference=openai_compatible:m@http://127.0.0.1:9/v1"], "x")
    with pytest.raises(PreflightError, match="^--judge-panel: needs at least 2"):
        check_judge_panel(["match"], "cascade")


# --- judging --------------------------------------------------------------------------------


def _contrary(request: RecordedRequest) -> ScriptedReply:
    """A scripted judge that says yes only to answers naming a bike: it disagrees with the
    rules on 'It was blue.' (no bike) and on 'a red bike'."""
    response = request.last_user_text.split("response:")[-1]
    verdict = "yes" if "bike" in response else "no"
    return ScriptedReply(text=json.dumps({"verdict": verdict, "reason": "scripted"}))


def _layer(server: WireServer, tmp_path, model: str) -> LLMLayer:
    settings = LLMSettings.from_specs(
        {"judge": model},
        role_overrides={"judge": {"max_retries": 0}},
        cache_path=str(tmp_path / "cache.sqlite3"),
        retry=RetryPolicy(backoff_base_s=0.001, backoff_max_s=0.01),
    )
    return LLMLayer(settings)


def test_each_member_judges_and_the_gate_decides_its_coverage(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-panel")
    goldens = [_golden("q1"), _golden("q2"), _golden("q3"), _golden("q4_abs", abstention=True)]
    answers = ["It was blue.", "a red bike", "It was blue, the blue bike.", "I don't know."]
    tok = PayloadTokenizer()
    rows = [
        score_question(
            g, _retrieval(g["name"], a), tok, judged=offline_judge_results(g["name"].endswith("s"))
        )
        for g, a in zip(goldens, answers, strict=True)
    ]
    items = [(g, a) for g, a in zip(goldens, answers, strict=True)]
    items[2] = None  # retrieval not measured: never judged, never 0
    with WireServer(responder=_contrary) as server:
        model = f"openai_compatible:judge-model@{server.openai_base_url}"
        members = panel.parse_panel(["match", f"reference={model}"], "cascade")
        layer = _layer(server, tmp_path, model)
        try:
            results = panel.judge_panel(members, items, {model: layer}, {model: 2})
        finally:
            layer.close()
        calls = server.request_count
    assert calls == 3  # the model member only; the unmeasured question was not sent
    ref = f"reference={model}"
    out = [{**r, **panel.panel_fields(r, res)} for r, res in zip(rows, results, strict=True)]
    assert [o["judge_panel"]["match"] for o in out] == [1.0, 0.0, None, 1.0]
    assert [o["judge_panel"][ref] for o in out] == [0.0, 1.0, None, 0.0]
    # The gate with each member's verdict in place of the main one (evidence was retrieved).
    assert [o["panel_covered"]["match"] for o in out] == [True, False, None, True]
    assert [o["panel_covered"][ref] for o in out] == [False, True, None, False]
    assert [o["panel_split"] for o in out] == [True, True, None, True]
    # The main judge (none here) is untouched: its coverage is its own.
    assert all(o["metrics"]["answer_judge"]["score"] is None for o in out)
    for o in out:
        for_writing(ResultRow, o, "results.jsonl")  # the record takes the panel fields

    summary = summarize(out)
    for_writing(Summary, summary, "summary.json")
    tier = summary["tiers"]["1"]["judge_panel"]
    assert tier["members"]["match"]["coverage"]["rate"] == 0.5  # q1 yes, q2 no, q3 unscored
    assert tier["members"]["match"]["coverage"]["n_unscored"] == 1
    assert tier["members"]["match"]["unjudged"] == 1
    assert tier["members"]["match"]["abstention_coverage"]["rate"] == 1.0
    assert tier["members"][ref]["coverage_by_type"]["multi-session"]["rate"] == 0.5
    assert tier["split"] == {"questions": 3, "question_ids": ["q1", "q2", "q4_abs"]}
    assert summary["judge_panel"] == {
        "members": ["match", ref],
        "split": {"questions": 3, "question_ids": ["q1", "q2", "q4_abs"]},
    }
    md = summary_markdown(summary)
    assert "| judge panel member |" in md and "panel splits on 3 question(s)" in md


def test_a_member_whose_judge_fails_is_null_not_zero(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-panel")
    goldens = [_golden("q1")]
    rows = [
        score_question(
            goldens[0],
            _retrieval("q1", "It was blue."),
            PayloadTokenizer(),
            judged=offline_judge_results(False),
        )
    ]
    with WireServer(responder=lambda r: ScriptedReply(status=500, text="down")) as server:
        model = f"openai_compatible:judge-model@{server.openai_base_url}"
        members = panel.parse_panel(["match", f"reasoned={model}"], "cascade")
        layer = _layer(server, tmp_path, model)
        try:
            results = panel.judge_panel(members, [(goldens[0], "It was blue.")], {model: layer})
        finally:
            layer.close()
    fields = panel.panel_fields(rows[0], results[0])
    assert fields["judge_panel"] == {"match": 1.0, f"reasoned={model}": None}
    assert fields["panel_covered"] == {"match": True, f"reasoned={model}": None}
    assert fields["panel_split"] is None  # one member judged: nothing to disagree with


def test_no_panel_adds_nothing_to_rows_or_summary():
    goldens = [_golden("q1")]
    row = score_question(
        goldens[0],
        _retrieval("q1", "blue"),
        PayloadTokenizer(),
        judged=offline_judge_results(False),
    )
    summary = summarize([row])
    assert "judge_panel" not in summary and "judge_panel" not in summary["tiers"]["1"]
    assert "judge_panel" not in row
