"""The four kinds of plug-in: their built-ins, the interface a plug-in must have, and the error
class their consumers catch.

Everything here is a `module:Attr` string imported on first use, so naming a kind never imports
its consumer (the registry sits below every stage; the stages import it, not the reverse), and
`fulltext` never imports the graph agent's dependencies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

PluginKind = Literal["reconciler", "retriever", "judge", "provider"]
KIND_NAMES: tuple[str, ...] = get_args(PluginKind)


@dataclass(frozen=True)
class KindInfo:
    kind: PluginKind
    builtins: Mapping[str, str]  # name → "module:Attr"
    methods: tuple[str, ...]  # callables the class must have
    attributes: tuple[str, ...]  # attributes the class must have
    interface: str  # one sentence: what a plug-in of this kind is, and where it is described
    error: str  # "module:Class" of the kind's PluginLoadError subclass
    # Optional checks beyond methods and attributes: "module:function" taking the class (or
    # the constructed instance) and returning a problem, or None when it is fine.
    class_check: str | None = None
    instance_check: str | None = None
    # Exceptions of the plug-in chained onto the load error. Not for providers: an SDK's
    # exception may carry request headers, and with them a key.
    chain_cause: bool = True
    # Specs of this kind are names only (a model spec's provider stands before ':MODEL', so
    # an import path cannot be one); an import path still resolves, for checking a class.
    names_only: bool = False


KINDS: dict[str, KindInfo] = {
    "reconciler": KindInfo(
        kind="reconciler",
        builtins={
            "none": "eval_pipeline.reconcile.none:NoneReconciler",
            "extractive": "eval_pipeline.reconcile.extractive:ExtractiveReconciler",
            "llm": "eval_pipeline.reconcile.llm_reconciler:LLMReconciler",
            "consolidating": "eval_pipeline.reconcile.consolidating:ConsolidatingReconciler",
            "mem0": "eval_pipeline.providers.mem0:Mem0Provider",
            "mem0-platform": "eval_pipeline.providers.mem0_platform:Mem0PlatformProvider",
        },
        # reconcile() for a reconciler, ingest/search/reset/memories for a provider: checked
        # by class_check, which knows which of the two a class is.
        methods=(),
        attributes=(),
        interface=(
            "a reconciler is a class built as cls(**config) with string attributes `name` and "
            "`version` and reconcile(session) -> SessionMemory (eval_pipeline.reconcile.protocol);"
            " a memory system subclasses eval_pipeline.memory_system.MemorySystem; a system "
            "that owns its storage subclasses eval_pipeline.providers.MemoryProvider"
        ),
        error="eval_pipeline.reconcile.protocol:ReconcilerLoadError",
        class_check="eval_pipeline.reconcile.registry:class_problem",
        instance_check="eval_pipeline.reconcile.registry:instance_problem",
    ),
    "retriever": KindInfo(
        kind="retriever",
        builtins={
            "fulltext": "eval_pipeline.retrieve.fulltext:FulltextRetriever",
            "dense": "eval_pipeline.retrieve.dense:DenseRetriever",
            "hybrid": "eval_pipeline.retrieve.dense:HybridRetriever",
            "graph_agent": "eval_pipeline.retrieve.graph_agent:GraphAgentRetriever",
        },
        methods=("retrieve", "pins"),
        attributes=("name",),
        interface=(
            "a retriever is a class built as cls(env, **options) with `name`, "
            "retrieve(request, trace) and pins() (eval_pipeline.retrieve.protocol)"
        ),
        error="eval_pipeline.retrieve.protocol:RetrieverLoadError",
    ),
    "judge": KindInfo(
        kind="judge",
        builtins={"longmemeval": "eval_pipeline.score.judges:LongMemEvalJudge"},
        methods=("judge_question", "unscored", "prompt_hash", "pins"),
        attributes=("name",),
        interface=(
            "an answer judge is a class built as cls(**options) with `name`, async "
            "judge_question(role, golden, retrieval_context, answer), unscored(abstention, "
            "reason), prompt_hash() and pins() (eval_pipeline.score.answer_judge)"
        ),
        error="eval_pipeline.score.answer_judge:JudgeLoadError",
    ),
    "provider": KindInfo(
        kind="provider",
        builtins={
            "offline": "eval_pipeline.llm.providers:OfflineProvider",
            "openai": "eval_pipeline.llm.providers:OpenAIChatProvider",
            "anthropic": "eval_pipeline.llm.providers:AnthropicMessagesProvider",
            "openai_compatible": "eval_pipeline.llm.providers:OpenAIChatProvider",
            "local": "eval_pipeline.llm.providers:LocalChatProvider",
        },
        methods=("send", "aclose"),
        attributes=(),
        interface=(
            "a model provider is a class built as cls(config, api_key) with async send(messages,"
            " *, schema, timeout_s, mode) -> ProviderReply and async aclose() "
            "(eval_pipeline.llm.provider_plugins)"
        ),
        error="eval_pipeline.llm.provider_plugins:ProviderLoadError",
        class_check="eval_pipeline.llm.provider_plugins:class_problem",
        chain_cause=False,
        names_only=True,
    ),
}
