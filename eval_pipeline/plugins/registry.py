"""Resolve a plug-in spec of a kind to its class, and construct it, with one error shape.

A spec is one of
  - a built-in name (`extractive`, `fulltext`, `longmemeval`, `openai`, ...);
  - a name given by an entry point `<kind>.<name>` in the group `eval_pipeline.plugins`, by
    `EVAL_PIPELINE_PLUGINS`, or by `register` in this process (see `sources`);
  - an import path `package.module:Attr[.Nested]`.
Every failure raises the kind's `PluginLoadError` subclass, with the message
`<kind> <spec>: <what failed>; <what to do>`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from eval_pipeline.plugins.errors import PluginLoadError, exception_text, one_line
from eval_pipeline.plugins.kinds import KIND_NAMES, KINDS, KindInfo
from eval_pipeline.plugins.sources import (
    ENTRY_POINT_GROUP,
    ENV_VAR,
    IMPORT_PATH,
    Source,
    named,
)


@dataclass(frozen=True)
class Plugin:
    """A resolved spec: the class, and where it came from (for messages and `check`)."""

    kind: str
    spec: str
    target: Any
    path: str  # "module:Attr" of the class
    origin: str  # "built-in", "import path", or the source of the name


def kind_info(kind: str) -> KindInfo:
    if kind not in KINDS:
        raise PluginLoadError("plug-in", kind, "unknown kind", f"kinds are {', '.join(KINDS)}")
    return KINDS[kind]


def error_class(kind: str) -> type[PluginLoadError]:
    """The kind's subclass of PluginLoadError (what its consumers catch)."""
    return _attr(kind_info(kind).error)


def fail(
    kind: str, spec: str, problem: str, remedy: str, cause: BaseException | None = None
) -> NoReturn:
    """Raise the kind's load error; `cause` is chained except for providers (see KindInfo)."""
    error = error_class(kind)(kind, spec, problem, remedy)
    if cause is not None and kind_info(kind).chain_cause:
        raise error from cause
    raise error from None


def spec_help(kind: str) -> str:
    """What a spec of this kind may be, with the names there are."""
    info = kind_info(kind)
    names = sorted(named(kind))
    registered = f"a registered name ({', '.join(names)})" if names else "a registered name"
    how = f"names are registered by an entry point '{kind}.<name>' in group '{ENTRY_POINT_GROUP}'"
    if info.names_only:
        return (
            f"use a built-in ({', '.join(info.builtins)}) or {registered}; {how} or by "
            f"{ENV_VAR}={kind}.<name>=package.module:Class (an import path cannot be a name)"
        )
    return (
        f"use a built-in ({', '.join(info.builtins)}), {registered} or an import path "
        f"'package.module:Class'; {how} or by {ENV_VAR}"
    )


def find(kind: str, spec: str) -> Plugin:
    """The plug-in `spec` names, imported and checked against the kind's interface."""
    info = kind_info(kind)
    text = (spec or "").strip()
    if not text:
        fail(kind, spec or "", "no spec given", spec_help(kind))
    if ":" in text:
        if not IMPORT_PATH.match(text):
            fail(
                kind,
                text,
                "malformed import path",
                "write 'package.module:Class' (dotted Python names either side of one ':')",
            )
        target, path, origin = _import(kind, text, text, None), text, "import path"
    elif text in info.builtins:
        path, origin = info.builtins[text], "built-in"
        target = _import(kind, text, path, None)
    else:
        source = named(kind).get(text)
        if source is None:
            _unknown(kind, text)
        if source.conflict:
            fail(
                kind,
                text,
                f"{source.origin} and {', '.join(source.conflict)} give this name different "
                "classes",
                "uninstall one, or name the class by its import path",
            )
        if isinstance(source.target, str):
            path, origin = source.target, source.origin
            target = _import(kind, text, path, source)
        else:
            target, origin = source.target, source.origin
            path = _path_of(target)
    check_class(kind, text, target, where=origin)
    return Plugin(kind=kind, spec=text, target=target, path=path, origin=origin)


def resolve(kind: str, spec: str) -> Any:
    """The class `spec` names (see `find`)."""
    return find(kind, spec).target


def construct(
    kind: str,
    spec: str,
    cls: Callable[..., Any],
    *args: Any,
    options: Mapping[str, Any] | None = None,
    passthrough: tuple[type[BaseException], ...] = (),
    **extra: Any,
) -> Any:
    """`cls(*args, **extra, **options)`, every failure as the kind's load error.

    `passthrough`: exceptions the consumer handles itself (e.g. ReconcilerUnavailable). A load
    error of this kind raised by the plug-in itself is already shaped and goes through as is."""
    options = dict(options or {})
    try:
        instance = cls(*args, **extra, **options)
    except passthrough:
        raise
    except Exception as exc:
        if isinstance(exc, error_class(kind)):
            raise
        _construction_failed(kind, spec, options, exc)
    problem = _run_check(kind_info(kind).instance_check, instance)
    if problem:
        fail(kind, spec, f"{type(instance).__name__} {problem}", kind_info(kind).interface)
    return instance


def load(
    kind: str,
    spec: str,
    *args: Any,
    options: Mapping[str, Any] | None = None,
    passthrough: tuple[type[BaseException], ...] = (),
    **extra: Any,
) -> Any:
    """Resolve `spec` and construct it (see `find` and `construct`)."""
    plugin = find(kind, spec)
    return construct(
        kind, plugin.spec, plugin.target, *args, options=options, passthrough=passthrough, **extra
    )


def check_class(kind: str, spec: str, target: Any, *, where: str = "import path") -> None:
    """Refuse what is not a class of this kind: not a class, another kind, a missing part."""
    info = kind_info(kind)
    if not inspect.isclass(target):
        fail(
            kind,
            spec,
            f"{_described(where)}is {_a(type(target).__name__)}, not a class",
            f"point at the {kind} class",
        )
    declared = getattr(target, "plugin_kind", None)
    if declared is not None and declared != kind:
        if declared in KIND_NAMES:
            fail(
                kind,
                spec,
                f"{target.__name__} is {_a(declared)} plug-in (plugin_kind), not {_a(kind)}",
                f"give it where {_a(declared)} is expected, or name {_a(kind)}",
            )
        fail(
            kind,
            spec,
            f"{target.__name__} declares plugin_kind {declared!r}, which is no kind",
            f"set plugin_kind to one of {', '.join(KIND_NAMES)}",
        )
    missing = [f"{m}()" for m in info.methods if not callable(getattr(target, m, None))]
    missing += [a for a in info.attributes if not hasattr(target, a)]
    if missing:
        fail(kind, spec, f"{target.__name__} lacks {', '.join(missing)}", info.interface)
    problem = _run_check(info.class_check, target)
    if problem:
        fail(kind, spec, f"{target.__name__} {problem}", info.interface)


def accepts_keyword(cls: Any, name: str) -> bool:
    """Does `cls(...)` take a parameter called `name` explicitly (not through **kwargs)?"""
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False
    parameter = parameters.get(name)
    return parameter is not None and parameter.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


def available(kind: str) -> dict[str, str]:
    """name → origin, built-ins first: what a bare name of this kind can be."""
    info = kind_info(kind)
    out = {name: "built-in" for name in info.builtins}
    out.update({name: source.origin for name, source in sorted(named(kind).items())})
    return out


# ---- internals ------------------------------------------------------------------------------


def _unknown(kind: str, name: str) -> NoReturn:
    for other in KIND_NAMES:
        if other != kind and (name in KINDS[other].builtins or name in named(other)):
            fail(
                kind,
                name,
                f"unknown name, but there is {_a(other)} of that name",
                f"give it where {_a(other)} is expected; for {_a(kind)}, {spec_help(kind)}",
            )
    fail(kind, name, "unknown name", spec_help(kind))


def _import(kind: str, spec: str, path: str, source: Source | None) -> Any:
    module_name, _, qualname = path.partition(":")
    via = f"{source.origin} = {path!r}: " if source is not None else ""
    try:
        target: Any = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # whatever a module raises on import (not ^C)
        fail(
            kind,
            spec,
            f"{via}cannot import module {module_name!r} ({exception_text(exc)})",
            "check that it is installed in this environment (or on PYTHONPATH) and imports "
            f"cleanly: python -c 'import {module_name}'",
            exc,
        )
    fix = "check the name after ':'" if source is None else f"fix the target of {source.origin}"
    for part in filter(None, qualname.split(".")):
        try:
            target = getattr(target, part)
        except AttributeError:
            fail(kind, spec, f"{via}module {module_name!r} has no attribute {qualname!r}", fix)
    return target


def _construction_failed(
    kind: str, spec: str, options: Mapping[str, Any], exc: Exception
) -> NoReturn:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<config>'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)
        )
        fail(kind, spec, f"bad config: {one_line(problems)}", "fix the options named")
    fail(
        kind,
        spec,
        f"could not construct it with config keys {sorted(options)} ({exception_text(exc)})",
        "check the options against its constructor",
        exc,
    )


def _run_check(path: str | None, target: Any) -> str | None:
    return None if path is None else _attr(path)(target)


def _attr(path: str) -> Any:
    module_name, _, name = path.partition(":")
    return getattr(importlib.import_module(module_name), name)


def _path_of(target: Any) -> str:
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', target)}"


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _described(where: str) -> str:
    return "" if where in ("import path", "built-in") else f"{where}: "
