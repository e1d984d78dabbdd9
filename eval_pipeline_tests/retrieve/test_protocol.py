"""Choosing a retriever: built-in names, plug-ins by import path, clear errors."""

from __future__ import annotations

import pytest

from eval_pipeline.retrieve.protocol import (
    RetrievalEnv,
    RetrievalOutput,
    RetrieverLoadError,
    as_output,
    load_retriever,
    resolve_retriever_class,
)
from eval_pipeline.retrieve.results import RetrievedItem

PLUGIN = "eval_pipeline_tests.retrieve.plugin_example"


class _NoStore:
    def read(self, query, params=None, *, timeout_s=30, max_rows=10_000):
        raise AssertionError("not used")


def test_builtin_names_resolve():
    from eval_pipeline.retrieve.fulltext import FulltextRetriever
    from eval_pipeline.retrieve.graph_agent import GraphAgentRetriever

    assert resolve_retriever_class("fulltext") is FulltextRetriever
    assert resolve_retriever_class("graph_agent") is GraphAgentRetriever


def test_plugin_by_import_path_gets_env_and_options():
    env = RetrievalEnv(store=_NoStore())
    retriever = load_retriever(f"{PLUGIN}:EchoRetriever", env, {"prefix": "hi"})
    assert retriever.name == "echo" and retriever.env is env
    assert retriever.pins() == {"retriever": "echo", "prefix": "hi"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bm25", "retriever 'bm25': unknown name"),
        ("no_such_package.mod:Thing", "cannot import module 'no_such_package.mod'"),
        (f"{PLUGIN}:Missing", "has no attribute 'Missing'"),
        (f"{PLUGIN}:not_a_class", "is an int, not a class"),
        (f"{PLUGIN}:NotARetriever", "NotARetriever lacks retrieve"),
        (f"{PLUGIN}:", "malformed import path"),
    ],
)
def test_bad_specs_fail_with_a_clear_message(spec: str, message: str):
    with pytest.raises(RetrieverLoadError, match=message.replace("(", r"\(")):
        resolve_retriever_class(spec)


def test_unknown_option_is_a_load_error():
    with pytest.raises(RetrieverLoadError, match="EchoRetriever"):
        load_retriever(f"{PLUGIN}:EchoRetriever", RetrievalEnv(store=_NoStore()), {"bad": 1})


def test_graph_agent_refuses_offline():
    with pytest.raises(RetrieverLoadError, match="retrieval_agent.*offline"):
        load_retriever("graph_agent", RetrievalEnv(store=_NoStore(), llm=None))


def test_as_output_accepts_items_or_output_only():
    item = RetrievedItem(text="x", turn_ids=["s#0"], session_ids=["s"])
    assert as_output([item]).items == [item]
    out = RetrievalOutput(items=[item], context=["[when] x"])
    assert as_output(out) is out
    with pytest.raises(TypeError):
        as_output("x")  # type: ignore[arg-type]
