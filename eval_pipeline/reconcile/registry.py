"""Find a reconciler by spec — a built-in (`none`, `extractive`, `llm`, `consolidating`), a
registered plug-in name, or an import path `package.module:ClassName` — and construct it with
its config as keyword arguments, through the plug-in registry (`eval_pipeline.plugins`).

Every way this can go wrong ends in one `ReconcilerLoadError` shaped as the registry's errors
are (`reconciler <spec>: <what failed>; <what to do>`), except `ReconcilerUnavailable` (a
reconciler that cannot run in this configuration, e.g. `llm` with an offline role).

A memory system is a reconciler that is namespaced (`namespaced = True`, or its ingest schema
says so): it must also have `extract` and `consolidate`, as `MemorySystem` subclasses do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from eval_pipeline import plugins
from eval_pipeline.reconcile.protocol import ReconcilerUnavailable

if TYPE_CHECKING:
    from eval_pipeline.llm import LLMLayer

KIND = "reconciler"
BUILTINS: Mapping[str, str] = plugins.KINDS[KIND].builtins  # name → "module:Class"
DEFAULT_RECONCILER = "extractive"


def load_reconciler(
    spec: str, config: Mapping[str, Any] | None = None, *, llm: LLMLayer | None = None
) -> Any:
    """A ready reconciler for `spec`; `llm` goes to a constructor that takes an `llm`
    parameter (the `llm` built-in does)."""
    plugin = plugins.find(KIND, spec)
    extra = {"llm": llm} if plugins.accepts_keyword(plugin.target, "llm") else {}
    return plugins.construct(
        KIND,
        plugin.spec,
        plugin.target,
        options=config,
        passthrough=(ReconcilerUnavailable,),
        **extra,
    )


def import_class(spec: str) -> type:
    """The reconciler class a spec names, checked, without constructing it."""
    return plugins.resolve(KIND, spec)


def class_problem(cls: type) -> str | None:
    """The registry's extra check of a reconciler class (see `plugins.kinds`): a provider
    implements the provider methods, anything else `reconcile()`."""
    from eval_pipeline.providers.base import PROVIDER_METHODS, is_provider

    if is_provider(cls):
        missing = sorted(getattr(cls, "__abstractmethods__", ()))
        missing += [m for m in PROVIDER_METHODS if not callable(getattr(cls, m, None))]
        return f"lacks {', '.join(f'{m}()' for m in missing)}" if missing else None
    if not callable(getattr(cls, "reconcile", None)):
        return "lacks reconcile()"
    return _memory_system_problem(cls)


def instance_problem(reconciler: Any) -> str | None:
    """`name` and `version` are strings (they go into the pins and onto every node written)."""
    from eval_pipeline.providers.base import is_provider

    for attribute in ("name", "version"):
        if not isinstance(getattr(reconciler, attribute, None), str):
            return (
                f"has no string attribute {attribute!r} (it goes into the pins and onto every "
                "node it writes)"
            )
    return None if is_provider(reconciler) else _memory_system_problem(reconciler)


def _memory_system_problem(target: Any) -> str | None:
    from eval_pipeline.reconcile.memory_system import IngestSchema

    schema = getattr(target, "schema", None)
    if schema is not None and not isinstance(schema, IngestSchema):
        return (
            f"declares a schema that is a {type(schema).__name__}, not an IngestSchema "
            "(eval_pipeline.memory_system)"
        )
    namespaced = bool(getattr(target, "namespaced", getattr(schema, "namespaced", False)))
    missing = [m for m in ("extract", "consolidate") if not callable(getattr(target, m, None))]
    if namespaced and missing:
        return f"is namespaced (a memory system) but lacks {', '.join(f'{m}()' for m in missing)}"
    return None
