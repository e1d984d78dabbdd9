"""What a run builds from its configuration: the LLM layer, the reconciler, the retriever and
the reader. Preflight builds them to refuse a bad option before anything runs; the stages
build them to run. Errors are the domain's own (LLMConfigError, ReconcileError,
RetrieverLoadError, ValueError): each caller says them its own way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from eval_pipeline import providers
from eval_pipeline.config import (
    GraphConfig,
    ModelRole,
    ReconcileConfig,
    RepeatConfig,
    RetrievalConfig,
    ScoringConfig,
)
from eval_pipeline.graph.dialects import DIALECTS
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.llm import LLMLayer, LLMSettings
from eval_pipeline.llm.layer import layer_for
from eval_pipeline.providers.formation import ProviderRecord, record_for
from eval_pipeline.reconcile.registry import load_reconciler
from eval_pipeline.retrieve.protocol import (
    RetrievalEnv,
    Retriever,
    load_retriever,
    resolve_retriever_class,
)
from eval_pipeline.retrieve.reader import Reader, make_reader
from eval_pipeline.score.answer_judge import DEFAULT_JUDGE, AnswerJudge, load_judge

DEFAULT_RECONCILE_CONCURRENCY = 4  # offline reconcilers: the graph writer is the bottleneck


def graph_store(config: GraphConfig) -> GraphStore:
    """The client of the configured graph server; credentials only from the environment."""
    return GraphStore(
        backend=config.backend,
        uri=config.uri,
        database=config.database or DIALECTS[config.backend].default_database,
        user=os.environ.get("EVAL_GRAPH_USER") or None if config.uri else None,
        password=os.environ.get("EVAL_GRAPH_PASSWORD") or None if config.uri else None,
        http_url=config.http_url,
        batch_uri=config.batch_uri,
        lease_wait_s=config.wait_s,
        data_dir=config.data_dir,
        heap=config.heap,
    )


def llm_layer(
    roles: Mapping[str, ModelRole], *, sample_identity: str | None = None
) -> LLMLayer | None:
    """One LLM layer for the given model roles, or None when every one is offline."""
    extra = {"sample_identity": sample_identity} if sample_identity else {}
    return layer_for({name: (r.model, r.overrides()) for name, r in roles.items()}, **extra)


def role_pins(name: str, role: ModelRole) -> dict[str, Any] | None:
    """A model role's pins (for `local`: the weights' sha256, the server, sampling)."""
    if role.offline:
        return None
    settings = LLMSettings.from_specs({name: role.model}, role_overrides={name: role.overrides()})
    return settings.role(name).pins()


def answer_judge(config: ScoringConfig) -> AnswerJudge:
    """The configured answer judge; the built-in one decides by the verdict method the
    configuration chooses (`ScoringConfig.verdict_choice`: asked for, else the judge's
    default)."""
    options = dict(config.method_options)
    if config.method == DEFAULT_JUDGE:
        options.setdefault("verdict", config.verdict_choice().method)
    return load_judge(config.method, options)


def reconcile_layer(config: ReconcileConfig, repeat: RepeatConfig) -> LLMLayer | None:
    """The reconciler role's layer; a repeat that re-reconciles draws its own sample."""
    identity = repeat.sample_identity if repeat.reconcile else None
    return llm_layer({"reconciler": config.model}, sample_identity=identity)


def reconciler(config: ReconcileConfig, llm: LLMLayer | None) -> Any:
    return load_reconciler(config.reconciler, config.options, llm=llm)


def is_provider(config: ReconcileConfig) -> bool:
    """Does the configuration name a memory system that owns its storage (a provider)?"""
    return providers.is_provider_spec(config.reconciler)


def memory_provider(
    config: ReconcileConfig, state_root: Path, where: str
) -> tuple[providers.MemoryProvider, ProviderRecord]:
    """The configured provider, with its own storage under the state directory, and the
    record later stages reach it by."""
    env = providers.ProviderEnv(
        storage_dir=providers.storage_dir(
            state_root, where, config.reconciler, config.options, config.model.model
        ),
        model=config.model.model,
        timeout_s=config.model.timeout_s,
        concurrency=config.model.concurrency,
    )
    provider = providers.load_provider(config.reconciler, config.options, env)
    return provider, record_for(provider, config.reconciler, config.options)


def ingest_concurrency(config: ReconcileConfig, provider: providers.MemoryProvider) -> int:
    """Namespaces ingested at once: the option, else the model role's limit, else the
    provider's own."""
    return config.concurrency or config.model.concurrency or provider.concurrency or 1


def reconcile_concurrency(config: ReconcileConfig, reconciler: Any) -> int:
    if config.concurrency is not None:
        return config.concurrency
    return int(getattr(reconciler, "concurrency", DEFAULT_RECONCILE_CONCURRENCY))


def retrieval_roles(config: RetrievalConfig) -> dict[str, ModelRole]:
    return {"reader": config.reader, "retrieval_agent": config.agent}


def retrieval_layer(config: RetrievalConfig, repeat: RepeatConfig) -> LLMLayer | None:
    return llm_layer(retrieval_roles(config), sample_identity=repeat.sample_identity)


def prepare_graph_for_retrieval(
    config: RetrievalConfig, store: GraphStore, note: Callable[[str], None]
) -> dict[str, Any] | None:
    """The configured retriever's write step before retrieval reads (`prepare_graph`, a
    classmethod: `dense` and `hybrid` embed the searchable texts and build the vector
    index); None for a retriever without one. Runs before the graph's read fingerprint."""
    prepare = getattr(resolve_retriever_class(config.retriever), "prepare_graph", None)
    if not callable(prepare):
        return None
    return prepare(store, dict(config.options), note)


def check_graph_for(retriever: Retriever) -> None:
    """A retriever's own check that the graph can serve it (`check_graph`, optional: dense
    refuses a graph without its vector index), once before the first question; raises
    ValueError in one line."""
    check = getattr(retriever, "check_graph", None)
    if callable(check):
        check()


def retriever_and_reader(
    config: RetrievalConfig, env: RetrievalEnv, llm: LLMLayer | None
) -> tuple[Retriever, Reader]:
    options = dict(config.options)
    if config.retriever == "graph_agent":
        options.setdefault("max_steps", config.max_steps)
        options.setdefault("payload_cap_tokens", config.payload_cap_tokens)
    return load_retriever(config.retriever, env, options), reader(config, llm)


def reader(config: RetrievalConfig, llm: LLMLayer | None) -> Reader:
    return make_reader("offline" if config.reader.offline else "llm", llm, config.reader_prompt)
