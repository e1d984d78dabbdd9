"""The reconciler protocol: one session in, one `SessionMemory` out, no graph access.

A plug-in (`package.module:ClassName`, or a name registered as in `docs/plugins.md`) needs only:

    class MyReconciler:
        name = "my-memory"          # short, stable; written on every node it produces
        version = "3"               # bump when its output changes for the same input
        def __init__(self, **config): ...          # the plug-in config, as keyword arguments
        async def reconcile(self, session: SessionInput) -> SessionMemory: ...
        # or a plain `def reconcile(...)`: it is then run in a worker thread

and optionally `pins() -> dict`, `usage() -> dict | None` (LLM accounting) and
`async aclose()`. `BaseReconciler` provides the optional parts. A plain `def reconcile` that
is CPU-bound (pure Python, no I/O) may declare `cpu_bound = True`: the runner then runs it in
worker processes (`reconcile.processes`, `reconcile/processes.py`), so it must pickle and
keep no state between sessions that its output depends on. A constructor with an explicit
`llm` parameter (`def __init__(self, llm=None, **config)`) is given the run's LLM layer.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from eval_pipeline.plugins.errors import PluginLoadError
from eval_pipeline.reconcile.models import SessionInput, SessionMemory


class ReconcileError(RuntimeError):
    """Base of this stage's own errors; the message is meant to be shown as is."""


class ReconcilerLoadError(PluginLoadError, ReconcileError):
    """A reconciler could not be found, imported, or constructed from its config (the plug-in
    registry's error for this kind: `except ReconcileError` and `except PluginLoadError` both
    catch it)."""


class ReconcilerUnavailable(ReconcileError):
    """A reconciler cannot run in this configuration (e.g. `llm` with an offline role)."""


@runtime_checkable
class Reconciler(Protocol):
    name: str
    version: str

    def reconcile(self, session: SessionInput) -> Any:
        """Return a SessionMemory, or an awaitable of one."""
        ...


class BaseReconciler:
    """Convenience base: pins from `name`, `version` and `config`; no usage; nothing to close."""

    name: str = "base"
    version: str = "0"
    cpu_bound: bool = False  # True: a sync `reconcile` run in worker processes

    def __init__(self, **config: Any) -> None:
        self.config: dict[str, Any] = dict(config)

    def pins(self) -> dict[str, Any]:
        return reconciler_pins(self)

    def usage(self) -> dict[str, Any] | None:
        return None

    async def aclose(self) -> None:
        return None

    async def reconcile(self, session: SessionInput) -> SessionMemory:  # pragma: no cover
        raise NotImplementedError


def reconciler_pins(reconciler: object) -> dict[str, Any]:
    """Name, version, config and implementing class: what decides a reconciler's output."""
    cls = type(reconciler)
    config = getattr(reconciler, "config", None)
    if hasattr(config, "model_dump"):
        config = config.model_dump(mode="json")
    pins = {
        "name": str(getattr(reconciler, "name", cls.__name__)),
        "version": str(getattr(reconciler, "version", "unknown")),
        "config": config if config is not None else {},
        "class": f"{cls.__module__}:{cls.__qualname__}",
    }
    # The ingest schema it declares (`memory_system.IngestSchema`): its version is part of
    # the pins key every session records, so memory under another schema is redone.
    schema = getattr(reconciler, "schema", None)
    if callable(getattr(schema, "pins", None)):
        pins["schema"] = schema.pins()
    return pins


def pins_of(reconciler: object) -> dict[str, Any]:
    """The reconciler's own `pins()` when it has one, else the generic pins."""
    own = getattr(reconciler, "pins", None)
    if callable(own):
        return dict(own())
    return reconciler_pins(reconciler)
