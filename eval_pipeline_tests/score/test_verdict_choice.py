"""A judge model decides when one is given (`score.verdict_choice`): with `--judge MODEL` and
no `--judge-verdict`, the answer verdicts follow LongMemEval's reference prompt; with no model,
the rules (`match`); a method asked for is always the one used. Read as the CLI reads it,
built as a run builds it, and counted where the judge's calls are counted: the LLM layer,
through the real openai SDK against a scripted server on loopback (no provider is reached)."""

from __future__ import annotations

import argparse
import json
from typing import Any

import dagster as dg
import pytest
from dagster._core.storage.dagster_run import DagsterRun, DagsterRunStatus

from eval_pipeline import build
from eval_pipeline.assets.tags import CHAIN_JOB_NAME
from eval_pipeline.cli import build_parser
from eval_pipeline.config import ModelRole, RunConfig, ScoringConfig
from eval_pipeline.ops.resume import ResumeError, resumed_config
from eval_pipeline.run_cli import UsageError, flag_of, run_config_from_args
from eval_pipeline.score import panel
from eval_pipeline.score.judges import judge_batch
from eval_pipeline.score.verdict_choice import choose_verdict
from eval_pipeline_tests.score.test_judges import _answers, _golden
from eval_pipeline_tests.wire_server import WireServer

SMALL = "local:smollm2-135m-instruct"


def parse(*argv: str) -> RunConfig:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return run_config_from_args(sub.choices["run"].parse_args(list(argv)))[0]


@pytest.mark.parametrize(
    ("argv", "method", "chosen"),
    [
        ((), "match", "default"),
        (("--judge", "local"), "reference", "default"),
        (("--judge", SMALL, "--judge-verdict", "match"), "match", "asked"),
        (("--judge", "offline", "--judge-verdict", "match"), "match", "asked"),
        (("--judge", SMALL, "--judge-verdict", "cascade"), "cascade", "asked"),
    ],
)
def test_the_verdict_method_is_the_one_asked_else_the_judges_default(argv, method, chosen):
    run = parse(*argv)
    assert run.scoring.verdict == (None if chosen == "default" else method)  # as given
    choice = run.scoring.verdict_choice()
    assert (choice.method, choice.chosen) == (method, chosen)
    # What a run builds judges by exactly that method.
    assert build.answer_judge(run.scoring).verdict == method


def test_the_choice_says_which_method_and_why():
    assert choose_verdict(None, with_model=True).describe() == (
        "reference (LongMemEval's prompt; the default with a judge model)"
    )
    assert choose_verdict(None, with_model=False).describe() == (
        "match (the rules, no model; the default with no judge model)"
    )
    assert choose_verdict("match", with_model=True).record() == {
        "method": "match",
        "chosen": "asked",
        "text": "match (the rules, no model; asked for)",
    }
    with pytest.raises(UsageError, match="^option --judge-verdict: unknown judge verdict method"):
        parse("--judge", SMALL, "--judge-verdict", "nope")


def test_a_bare_panel_model_takes_the_runs_choice():
    # No --judge-verdict: a bare MODEL member is a judge model, so LongMemEval's prompt.
    members = panel.parse_panel(["match", SMALL], None)
    assert [m.key for m in members] == ["match", f"reference={SMALL}"]
    assert parse("--judge-panel", f"match,{SMALL}").scoring.judge_panel == ["match", SMALL]
    # Asked for, it is obeyed: a method that needs no model is refused with a model.
    with pytest.raises(panel.PanelError, match="method match needs no model"):
        panel.parse_panel(["reference=" + SMALL, SMALL], "match")
    # `offline` alone is no model: the default with none, `match` (repeated here).
    with pytest.raises(panel.PanelError, match="repeats"):
        panel.parse_panel(["match", "offline"], None)


def _verdict_calls(server: WireServer) -> int:
    """Requests for the answer verdict (its JSON schema is `JudgeVerdict`), not deepeval's."""
    return sum(
        '"JudgeVerdict"' in " ".join(str(m.get("content", "")) for m in r.messages)
        for r in server.requests
    )


def _judge_three(tmp_path, monkeypatch, asked: str | None) -> tuple[list, Any, int]:
    """Three questions judged as a run judges them, by a scripted model, under `asked`:
    their results, the layer's judge usage and the requests for a verdict."""
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path / str(asked)))  # a cache of its own
    goldens = [_golden("q1"), _golden("q2"), _golden("q3_abs", abstention=True)]
    answers = ["It was blue.", "It was red.", "You never told me."]
    with WireServer(responder=_answers) as server:
        model = f"openai_compatible:judge-model@{server.openai_base_url}"
        scoring = ScoringConfig(judge=ModelRole(model=model), verdict=asked)
        layer = build.llm_layer({"judge": scoring.judge})
        assert layer is not None
        try:
            judged = judge_batch(
                layer,
                [(g, ["I bought a blue bike"], a) for g, a in zip(goldens, answers, strict=True)],
                answer_judge=build.answer_judge(scoring),
            )
            usage = layer.snapshot().roles["judge"]
        finally:
            layer.close()
        return judged, usage, _verdict_calls(server)


def test_a_judge_model_is_asked_for_the_verdict_unless_told_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv("CONFIDENT_API_KEY", raising=False)
    default, d_usage, d_verdicts = _judge_three(tmp_path, monkeypatch, None)
    asked, a_usage, a_verdicts = _judge_three(tmp_path, monkeypatch, "match")
    # The default asks the model for every verdict; `match`, asked for, never does.
    assert (d_verdicts, a_verdicts) == (3, 0)
    # The layer's count of judge calls says the same: three more (deepeval's metrics ask the
    # same either way; which of their identical calls the cache answers depends on timing).
    assert d_usage.calls - a_usage.calls == 3
    assert d_usage.failures == a_usage.failures == 0
    assert [j["answer_judge"].reason for j in default] == ["compared"] * 3  # the model's
    assert all(j["answer_judge"].reason != "compared" for j in asked)  # the rules'
    # The scripted model says yes only to "blue" (the abstention's refusal too is a no to
    # it); the rules agree on the two plain answers.
    assert [j["answer_judge"].score for j in default] == [1.0, 0.0, 0.0]
    assert [j["answer_judge"].score for j in asked][:2] == [1.0, 0.0]


def _chain_run(instance: dg.DagsterInstance, scoring: dict) -> str:
    """An interrupted eval_chain run in `instance`, with `scoring` as its options."""
    run = RunConfig.model_validate({"scoring": scoring})
    record = DagsterRun(
        job_name=CHAIN_JOB_NAME,
        run_config={"resources": run.resources_config()},
        status=DagsterRunStatus.CANCELED,
    )
    instance.add_run(record)
    return record.run_id


def test_resume_reads_an_unset_verdict_as_the_judges_default(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    chain = _chain_run(instance, {"judge": {"model": SMALL}})

    def given(verdict: str) -> dict:
        return {"paths": {"state_dir": str(tmp_path)}, "scoring": {"verdict": verdict}}

    # Asking for the method the default chose is no change; the chain keeps its option.
    kept = resumed_config(instance, chain, given("reference"), flag_of)
    assert kept.scoring.verdict is None and kept.scoring.verdict_choice().method == "reference"
    with pytest.raises(ResumeError) as err:
        resumed_config(instance, chain, given("match"), flag_of)
    assert "option --judge-verdict is 'reference (default)' in that chain, not 'match'" in str(
        err.value
    )


def test_the_manifest_and_summary_record_the_choice():
    from eval_pipeline.assets.manifest import verdict_record

    scoring = ScoringConfig(judge=ModelRole(model=SMALL))
    judge = build.answer_judge(scoring)
    record = verdict_record(scoring, judge, judged=True)
    assert record == choose_verdict(None, with_model=True).record()
    assert verdict_record(scoring, judge, judged=False) is None  # nothing was judged
    # The judge's own options naming another method: that one was asked for, and decided.
    optioned = ScoringConfig(judge=ModelRole(model=SMALL), method_options={"verdict": "hybrid"})
    assert verdict_record(optioned, build.answer_judge(optioned), judged=True)["chosen"] == "asked"
    json.dumps(record)  # plain JSON for manifest.json and summary.json
