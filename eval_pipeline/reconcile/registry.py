"""Find a reconciler by name: a built-in (`none`, `extractive`, `llm`, `consolidating`) or a
plug-in given by import path (`package.module:ClassName`), constructed with its config as
keyword arguments.

Every way this can go wrong ends in one `ReconcilerLoadError` that says which step failed
(the spec, the import, the attribute, the class, the construction) and what to do.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from eval_pipeline.llm import LLMLayer
from eval_pipeline.reconcile.consolidating import ConsolidatingReconciler
from eval_pipeline.reconcile.extractive import ExtractiveReconciler
from eval_pipeline.reconcile.llm_reconciler import LLMReconciler
from eval_pipeline.reconcile.none import NoneReconciler
from eval_pipeline.reconcile.protocol import ReconcilerLoadError, ReconcilerUnavailable

BUILTINS: dict[str, type] = {
    "none": NoneReconciler,
    "extractive": ExtractiveReconciler,
    "llm": LLMReconciler,
    "consolidating": ConsolidatingReconciler,
}
DEFAULT_RECONCILER = "extractive"

_IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_HELP = (
    f"use a built-in ({', '.join(BUILTINS)}) or a plug-in as 'package.module:ClassName' "
    "importable from this environment"
)


def load_reconciler(
    spec: str, config: Mapping[str, Any] | None = None, *, llm: LLMLayer | None = None
) -> Any:
    """A ready reconciler for `spec`; `llm` is the layer the `llm` built-in calls through."""
    spec = (spec or "").strip()
    options = dict(config or {})
    if spec in BUILTINS:
        cls = BUILTINS[spec]
        if spec == "llm":
            return _construct(spec, cls, options, llm=llm)
        return _construct(spec, cls, options)
    if ":" not in spec:
        raise ReconcilerLoadError(f"unknown reconciler {spec!r}: {_HELP}")
    return _construct(spec, import_class(spec), options)


def import_class(spec: str) -> type:
    if not _IMPORT_PATH.match(spec):
        raise ReconcilerLoadError(f"malformed plug-in path {spec!r}: {_HELP}")
    module_name, _, qualname = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # any error while importing the user's module, not just ImportError
        raise ReconcilerLoadError(
            f"cannot import module {module_name!r} for reconciler {spec!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    for part in qualname.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ReconcilerLoadError(
                f"module {module_name!r} has no attribute {qualname!r} (reconciler {spec!r})"
            ) from None
    if not isinstance(target, type):
        raise ReconcilerLoadError(
            f"{spec!r} is a {type(target).__name__}, not a class: point at the reconciler class"
        )
    if not callable(getattr(target, "reconcile", None)):
        raise ReconcilerLoadError(
            f"{spec!r} has no reconcile(session) method: a reconciler takes one SessionInput "
            "and returns a SessionMemory (see eval_pipeline.reconcile.protocol)"
        )
    return target


def _construct(spec: str, cls: type, options: dict[str, Any], **extra: Any) -> Any:
    try:
        reconciler = cls(**extra, **options)
    except ReconcilerUnavailable:
        raise
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<config>'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)
        )
        raise ReconcilerLoadError(f"bad config for reconciler {spec!r}: {problems}") from None
    except Exception as exc:
        keys = sorted(options)
        raise ReconcilerLoadError(
            f"could not construct reconciler {spec!r} with config keys {keys}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    for attribute in ("name", "version"):
        if not isinstance(getattr(reconciler, attribute, None), str):
            raise ReconcilerLoadError(
                f"reconciler {spec!r} must define a string attribute {attribute!r} "
                "(it goes into the pins and onto every node it writes)"
            )
    return reconciler
