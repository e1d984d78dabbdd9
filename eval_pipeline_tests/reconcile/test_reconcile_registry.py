"""Loading reconcilers: built-ins, plug-ins by import path, and clear errors when it fails."""

from __future__ import annotations

import pytest

from eval_pipeline.llm import LLMLayer
from eval_pipeline.reconcile import (
    ReconcilerLoadError,
    ReconcilerUnavailable,
    load_reconciler,
    pins_of,
)
from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.reconcile.memory_system import SESSION_SCHEMA
from eval_pipeline.reconcile.none import NoneReconciler

PLUGINS = "eval_pipeline_tests.reconcile.plugins"


def test_builtins_load_with_their_pins():
    extractive = load_reconciler("extractive", {"summary_sentences": 2})
    assert isinstance(extractive, ExtractiveReconciler)
    assert pins_of(extractive) == {
        "name": "extractive",
        "version": "1",
        "config": {"max_chunk_chars": 800, "summary_sentences": 2},
        "class": "eval_pipeline.reconcile.extractive:ExtractiveReconciler",
        "schema": SESSION_SCHEMA.pins(),  # the ingest schema it declares, version and all
    }
    assert pins_of(extractive)["schema"]["version"] == "2"
    assert isinstance(load_reconciler("none"), NoneReconciler)


def test_a_plugin_loads_by_import_path_with_its_config():
    plugin = load_reconciler(f"{PLUGINS}:EchoReconciler", {"label": "mine"})
    assert plugin.name == "echo" and plugin.version == "7"
    assert pins_of(plugin) == {
        "name": "echo",
        "version": "7",
        "config": {"label": "mine"},
        "class": f"{PLUGINS}:EchoReconciler",
    }


@pytest.mark.parametrize(
    ("spec", "config", "message"),
    [
        ("magic", None, "reconciler 'magic': unknown name.*none, extractive, llm"),
        ("not a path:Thing", None, "malformed import path"),
        ("no_such_package.memory:Thing", None, "cannot import module 'no_such_package.memory'"),
        (
            "eval_pipeline_tests.reconcile.broken_plugin:Thing",
            None,
            "cannot import module.*RuntimeError: boom while importing",
        ),
        (f"{PLUGINS}:Missing", None, "has no attribute 'Missing'"),
        (f"{PLUGINS}:not_a_class", None, "is a function, not a class"),
        (f"{PLUGINS}:NoReconcileMethod", None, "NoReconcileMethod lacks reconcile\\(\\)"),
        (f"{PLUGINS}:NoVersion", None, "string attribute 'version'"),
        (f"{PLUGINS}:EchoReconciler", {"colour": "red"}, "could not construct.*'colour'"),
        ("extractive", {"max_chunk_chars": "many"}, "reconciler 'extractive': bad config"),
        ("none", {"anything": 1}, "reconciler 'none': could not construct"),
    ],
)
def test_a_bad_spec_or_config_fails_with_a_clear_message(spec, config, message):
    with pytest.raises(ReconcilerLoadError, match=message):
        load_reconciler(spec, config)


def test_the_llm_reconciler_refuses_an_offline_role():
    with pytest.raises(ReconcilerUnavailable, match="needs a model.*offline.*extractive"):
        load_reconciler("llm")
    layer = LLMLayer()
    try:
        with pytest.raises(ReconcilerUnavailable, match="offline"):
            load_reconciler("llm", llm=layer)
    finally:
        layer.close()
