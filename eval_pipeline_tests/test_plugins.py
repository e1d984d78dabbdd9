"""The plug-in registry: built-ins, entry points (a real distribution's metadata on sys.path),
EVAL_PIPELINE_PLUGINS, import paths and in-process names, for every kind; the one error shape;
a provider plug-in answering through the real LLM layer (cache, retries, key hygiene, pins)
and a judge plug-in scoring through it."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from eval_pipeline import plugins
from eval_pipeline.llm import (
    LLMCallFailed,
    LLMConfigError,
    LLMLayer,
    LLMSettings,
    RetryPolicy,
    RoleConfig,
    parse_provider_spec,
)
from eval_pipeline.llm.provider_plugins import ProviderLoadError
from eval_pipeline.plugins.__main__ import main as check_main
from eval_pipeline.reconcile import ReconcileError, ReconcilerLoadError, load_reconciler
from eval_pipeline.retrieve.protocol import (
    RetrievalEnv,
    RetrieverLoadError,
    load_retriever,
    resolve_retriever_class,
)
from eval_pipeline.score.answer_judge import JudgeLoadError, load_judge
from eval_pipeline.score.judges import (
    LongMemEvalJudge,
    judge_batch,
    judge_instruction,
    offline_judge_results,
    prompt_hash,
)
from eval_pipeline_tests import plugin_examples
from eval_pipeline_tests.plugin_examples import TableProvider, VerdictOnlyJudge
from eval_pipeline_tests.reconcile.plugins import EchoReconciler
from eval_pipeline_tests.retrieve.plugin_example import EchoRetriever

EX = "eval_pipeline_tests.plugin_examples"
ROOT = Path(__file__).resolve().parents[1]
DIST = "eval-pipeline-test-plugins 0.1"
ENTRY_POINTS = f"""\
[eval_pipeline.plugins]
reconciler.echo = eval_pipeline_tests.reconcile.plugins:EchoReconciler
reconciler.notes = notes_memory:NotesMemory
reconciler.broken = eval_pipeline_tests.reconcile.broken_plugin:Thing
reconciler.missing = {EX}:Nope
reconciler.twice = eval_pipeline_tests.reconcile.plugins:EchoReconciler
retriever.echo = eval_pipeline_tests.retrieve.plugin_example:EchoRetriever
judge.verdict-only = {EX}:VerdictOnlyJudge
provider.table = {EX}:TableProvider
not-a-kind-name = {EX}:TableProvider
"""
KEY = "tk-LEAKCANARY-plugin-provider-0123456789"


def _dist(site: Path, name: str, version: str, entry_points: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(entry_points)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(plugins.ENV_VAR, raising=False)
    monkeypatch.delenv("TABLE_TEST_KEY", raising=False)
    monkeypatch.delenv("CONFIDENT_API_KEY", raising=False)
    TableProvider.sent.clear()
    yield
    plugins.refresh()


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two distributions installed the way pip leaves them: *.dist-info with entry_points.txt."""
    site = tmp_path / "site"
    _dist(site, "eval-pipeline-test-plugins", "0.1", ENTRY_POINTS)
    other = "[eval_pipeline.plugins]\nreconciler.twice = eval_pipeline_tests.plugin_examples:X\n"
    _dist(site, "another-plugin-dist", "2.0", other)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "notes_memory"))
    return site


def _layer(tmp_path: Path, specs: dict[str, str], **settings) -> LLMLayer:
    return LLMLayer(
        LLMSettings.from_specs(
            specs,
            cache_path=tmp_path / "cache.sqlite3",
            retry=RetryPolicy(backoff_base_s=0.001, backoff_max_s=0.01),
            **settings,
        )
    )


def _golden(qid: str) -> dict:
    return {
        "name": qid,
        "input": "What colour was the bike?",
        "expected_output": "blue",
        "additional_metadata": {"tier": 1, "question_type": "multi-session", "abstention": False},
    }


SHAPE = re.compile(r"^(reconciler|retriever|judge|provider|plug-in) '[^']*': [^\n]+; [^\n]+$")


def test_every_builtin_is_in_the_one_registry():
    from eval_pipeline.llm.providers import OpenAIChatProvider
    from eval_pipeline.reconcile.consolidating import ConsolidatingReconciler
    from eval_pipeline.retrieve.fulltext import FulltextRetriever

    for kind in plugins.KIND_NAMES:
        for name in plugins.KINDS[kind].builtins:
            assert plugins.find(kind, name).origin == "built-in"
    assert plugins.resolve("reconciler", "consolidating") is ConsolidatingReconciler
    assert resolve_retriever_class("fulltext") is FulltextRetriever
    assert plugins.resolve("provider", "openai_compatible") is OpenAIChatProvider
    assert type(load_judge()) is LongMemEvalJudge
    assert set(plugins.available("provider")) == {
        "offline",
        "openai",
        "anthropic",
        "openai_compatible",
        "local",
    }


def test_the_builtin_judge_is_todays_longmemeval_judge():
    judge = load_judge("longmemeval")
    assert judge.prompt_hash() == prompt_hash()
    assert judge.unscored(True, "why") == offline_judge_results(True, "why")
    assert judge.unscored(False, "why") == offline_judge_results(False, "why")
    assert judge.pins() == {
        "name": "longmemeval",
        "version": 1,
        "verdict": "reference",  # LongMemEval's own prompt, unless a verdict method is chosen
        "prompt_hash": prompt_hash(),
        "reference_prompt_hash": prompt_hash(),
    }
    cascade = load_judge("longmemeval", {"verdict": "cascade"})
    assert cascade.prompt_hash() != prompt_hash() and cascade.pins()["verdict"] == "cascade"


def test_entry_points_name_a_plugin_of_each_kind(installed: Path):
    assert isinstance(load_reconciler("echo", {"label": "mine"}), EchoReconciler)
    assert resolve_retriever_class("echo") is EchoRetriever
    env = RetrievalEnv(store=None)  # type: ignore[arg-type]
    assert load_retriever("echo", env, {"prefix": "p"}).prefix == "p"
    assert isinstance(load_judge("verdict-only", {"gating": False}), VerdictOnlyJudge)
    assert parse_provider_spec("table:colours").provider == "table"
    # The example memory system, installed under a name instead of given by import path.
    assert load_reconciler("notes").pins()["schema"]["name"] == "notes-memory"
    origin = plugins.available("reconciler")["echo"]
    assert origin == f"entry point reconciler.echo ({DIST})"
    assert "not-a-kind-name" not in json.dumps(
        {k: plugins.available(k) for k in plugins.KIND_NAMES}
    )


def test_a_plugin_of_another_kind_is_refused_saying_which_it_is(installed: Path):
    with pytest.raises(ReconcilerLoadError) as info:
        load_reconciler("verdict-only")
    assert str(info.value).startswith(
        "reconciler 'verdict-only': unknown name, but there is a judge of that name; "
        "give it where a judge is expected"
    )
    with pytest.raises(JudgeLoadError, match="there is a retriever of that name"):
        load_judge("fulltext")
    with pytest.raises(ReconcilerLoadError, match="DeclaredRetriever is a retriever plug-in"):
        load_reconciler(f"{EX}:DeclaredRetriever")
    with pytest.raises(ProviderLoadError, match="VerdictOnlyJudge is a judge plug-in"):
        plugins.resolve("provider", f"{EX}:VerdictOnlyJudge")


@pytest.mark.parametrize(
    ("load", "error", "says"),
    [
        (
            lambda: load_reconciler("broken"),
            ReconcilerLoadError,
            f"reconciler 'broken': entry point reconciler.broken ({DIST}) = "
            "'eval_pipeline_tests.reconcile.broken_plugin:Thing': cannot import module "
            "'eval_pipeline_tests.reconcile.broken_plugin' (RuntimeError: boom while importing",
        ),
        (
            lambda: load_reconciler("missing"),
            ReconcilerLoadError,
            "has no attribute 'Nope'; fix the target of entry point reconciler.missing",
        ),
        (
            lambda: load_reconciler("twice"),
            ReconcilerLoadError,
            "give this name different classes; uninstall one, or name the class by its import",
        ),
        (
            lambda: load_reconciler("nothing-here"),
            ReconcilerLoadError,
            "a registered name (broken, echo, missing, notes, twice)",
        ),
        (
            lambda: load_reconciler(f"{EX}:NotAMemorySystem"),
            ReconcilerLoadError,
            "is namespaced (a memory system) but lacks extract(), consolidate()",
        ),
        (lambda: load_retriever("echo", None, {"bad": 1}), RetrieverLoadError, "['bad']"),
        (lambda: load_judge("verdict-only", {"gating": 1, "x": 2}), JudgeLoadError, "['gating'"),
        (lambda: load_judge(""), JudgeLoadError, "judge '': no spec given"),
        (lambda: load_judge("a b:c"), JudgeLoadError, "malformed import path"),
        (
            lambda: parse_provider_spec("tabel:colours"),
            ProviderLoadError,
            "registered name (table)",
        ),
    ],
)
def test_every_failure_is_one_line_of_one_shape(installed: Path, load, error, says):
    with pytest.raises(error) as info:
        load()
    message = str(info.value)
    assert says in message
    assert SHAPE.match(message), message
    assert isinstance(info.value, plugins.PluginLoadError)
    again = pickle.loads(pickle.dumps(info.value))  # errors cross process boundaries in runs
    assert type(again) is type(info.value) and str(again) == message


def test_the_error_classes_callers_catch_still_catch(installed: Path):
    with pytest.raises(ReconcileError):  # what the reconcile asset catches
        load_reconciler("broken")
    with pytest.raises(ValueError):  # what the retrieval asset catches beside its own
        load_retriever("nothing", None)
    with pytest.raises(LLMConfigError):  # what callers of model specs catch
        parse_provider_spec("nothing:m")


def test_the_variable_registers_by_import_path(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(
        plugins.ENV_VAR, f"provider.table={EX}:TableProvider, judge.mine={EX}:VerdictOnlyJudge"
    )
    assert parse_provider_spec("table:colours").model == "colours"
    assert plugins.available("judge")["mine"] == f"{plugins.ENV_VAR} entry judge.mine"
    assert isinstance(load_judge("mine"), VerdictOnlyJudge)
    monkeypatch.setenv(plugins.ENV_VAR, f"judge.mine {EX}:VerdictOnlyJudge")
    with pytest.raises(plugins.PluginLoadError, match="malformed EVAL_PIPELINE_PLUGINS entry"):
        load_judge("mine")
    monkeypatch.setenv(plugins.ENV_VAR, f"reconciler.extractive={EX}:NotAMemorySystem")
    with pytest.raises(plugins.PluginLoadError, match="is a built-in name"):
        load_reconciler("anything")
    assert load_reconciler("extractive").name == "extractive"  # built-ins are never looked up


def test_register_names_a_class_in_this_process():
    plugins.register("judge", "in-process", VerdictOnlyJudge)
    try:
        assert isinstance(load_judge("in-process"), VerdictOnlyJudge)
        with pytest.raises(plugins.PluginLoadError, match="built-in name"):
            plugins.register("judge", "longmemeval", VerdictOnlyJudge)
        with pytest.raises(plugins.PluginLoadError, match="not a valid plug-in name"):
            plugins.register("judge", "Upper", VerdictOnlyJudge)
    finally:
        plugins.unregister("judge", "in-process")


def test_a_provider_plugin_answers_through_the_real_layer(installed: Path, tmp_path: Path):
    layer = _layer(
        tmp_path,
        {"reader": "table:colours", "judge": "table:colours"},
        provider_concurrency={"table": 2},
    )
    try:
        reader = layer.role("reader")
        first = reader.complete_sync("What colour is the sky?")
        again = reader.complete_sync("What colour is the sky?")
        assert (first.text, first.cached, again.text, again.cached) == (
            "The sky is blue.",
            False,
            "The sky is blue.",
            True,
        )
        usage = layer.snapshot().roles["reader"]
        assert (usage.provider, usage.calls, usage.cache_hits, usage.provider_requests) == (
            "table",
            2,
            1,
            1,
        )
        assert usage.cost_usd is None  # not priced: unknown, never 0

        # The LongMemEval yes/no protocol, asked by a judge plug-in of the provider plug-in.
        pairs = [(_golden("q1"), ["ctx"], "It was blue"), (_golden("q2"), ["ctx"], "It was red")]
        judged = judge_batch(layer, pairs, answer_judge=load_judge("verdict-only"))
        assert [j["answer_judge"].score for j in judged] == [1.0, 0.0]
        assert [j["answer_judge"].gating for j in judged] == [True, True]
        systems = [m.content for sent in TableProvider.sent for m in sent if m.role == "system"]
        assert judge_instruction("multi-session", False) in systems
    finally:
        layer.close()

    pins = layer.settings.role("judge").pins()
    assert pins["provider"] == "table" and pins["endpoint"] is None
    assert pins["plugin"] == {"class": f"{EX}:TableProvider", "version": "1"}
    assert pins["structured_output"] == "prompt"
    assert layer.settings.role("judge").spec == "table:colours"
    with pytest.raises(ValidationError, match="provider 'tabel': unknown name"):
        LLMSettings(provider_concurrency={"tabel": 1})


def test_a_provider_plugin_key_comes_from_the_environment_and_is_never_shown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv(plugins.ENV_VAR, f"provider.keyed={EX}:KeyedTableProvider")
    with pytest.raises(LLMConfigError, match="TABLE_TEST_KEY is not set"):
        _layer(tmp_path, {"judge": "keyed:m"})  # at start, not on the first call
    monkeypatch.setenv("TABLE_TEST_KEY", KEY)
    layer = _layer(tmp_path, {"judge": "keyed:m"})
    try:
        judge = layer.role("judge")
        assert judge.complete_sync("hello").text == "my key is [REDACTED]"
        with pytest.raises(LLMCallFailed) as info:
            judge.complete_sync("please fail")
        assert info.value.kind == "client_error" and info.value.attempts == 1
        assert KEY not in str(info.value) and "denied for key" in str(info.value)
        shown = [
            repr(layer),
            repr(judge),
            json.dumps(layer.pins()),
            json.dumps(layer.snapshot().to_metadata()),
        ]
        assert not any(KEY in text for text in shown)
        assert layer.settings.role("judge").pins()["structured_output"] == "json_object"
    finally:
        layer.close()
    overridden = RoleConfig(provider="keyed", model="m", api_key_env="OTHER_TABLE_KEY")
    assert overridden.key_env_name == "OTHER_TABLE_KEY"


def test_a_provider_plugin_failure_is_counted_and_retried(tmp_path: Path):
    plugins.register("provider", "flaky", plugin_examples.FlakyProvider)
    try:
        layer = _layer(tmp_path, {"reader": "flaky:colours"})
        try:
            assert layer.role("reader").complete_sync("the sky?").text == "The sky is blue."
            usage = layer.snapshot().roles["reader"]
            assert (usage.retries, usage.provider_requests, usage.failures) == (1, 2, 0)
        finally:
            layer.close()
    finally:
        plugins.unregister("provider", "flaky")


def test_bad_provider_declarations_are_refused_without_echo():
    with pytest.raises(ProviderLoadError) as info:
        plugins.resolve("provider", f"{EX}:KeyInDeclaration")
    assert "not the NAME of an environment variable" in str(info.value)
    assert "DECLAREDKEY" not in str(info.value)
    with pytest.raises(ValidationError, match="an import path cannot name a provider"):
        RoleConfig(provider=f"{EX}:TableProvider", model="m")


def test_the_check_command_lists_and_checks(installed: Path, capsys: pytest.CaptureFixture):
    assert check_main([]) == 0
    listing = capsys.readouterr()
    assert f"provider\ttable\tentry point provider.table ({DIST})" in listing.out
    assert "reconciler\textractive\tbuilt-in" in listing.out
    assert "not-a-kind-name" in listing.err  # an entry point the registry ignores, said so
    assert check_main(["reconciler", "echo"]) == 0
    assert "eval_pipeline_tests.reconcile.plugins:EchoReconciler" in capsys.readouterr().out
    assert check_main(["reconciler", "broken"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: reconciler 'broken': ") and err.count("\n") == 1


def test_the_variable_reaches_a_process_and_the_check_runs_there(tmp_path: Path):
    env = {
        **os.environ,
        plugins.ENV_VAR: f"provider.table={EX}:TableProvider",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    res = subprocess.run(
        [sys.executable, "-m", "eval_pipeline.plugins", "provider", "table"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == (
        f"provider 'table': {EX}:TableProvider ({plugins.ENV_VAR} entry provider.table)"
    )
