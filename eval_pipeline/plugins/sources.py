"""Where named plug-ins come from, besides the built-ins: names registered in this process
(`register`), the `EVAL_PIPELINE_PLUGINS` variable, and entry points in the group
`eval_pipeline.plugins`.

One group carries every kind: an entry point's name is `<kind>.<name>`, e.g.
`reconciler.notes = "notes_memory:NotesMemory"` or `provider.table = "mypkg.llm:Table"`.
The variable has the same form, for a plug-in that is importable but not installed (and it
reaches the processes a run starts, which an in-process `register` does not):
`EVAL_PIPELINE_PLUGINS="provider.table=mypkg.llm:Table reconciler.notes=notes_memory:Notes"`
(entries separated by spaces, commas or semicolons).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from typing import Any

from eval_pipeline.plugins.errors import PluginLoadError
from eval_pipeline.plugins.kinds import KIND_NAMES, KINDS

ENTRY_POINT_GROUP = "eval_pipeline.plugins"
ENV_VAR = "EVAL_PIPELINE_PLUGINS"
# Lower case: a model spec's provider part is read case-insensitively, as lower case.
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]*$")
IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_ENV_SEPARATORS = re.compile(r"[\s,;]+")


@dataclass(frozen=True)
class Source:
    """One named plug-in: where its name is given and what it points at."""

    kind: str
    name: str
    target: str | Any  # "module:Attr", or the object itself (`register` with an object)
    origin: str  # for messages: "registered in this process", "entry point ... (dist 1.0)"
    conflict: tuple[str, ...] = ()  # other entry points with the same name and another value


_registered: dict[tuple[str, str], Source] = {}


def split_name(full: str) -> tuple[str, str] | None:
    """`<kind>.<name>` → (kind, name), or None when it is not of that form."""
    kind, dot, name = full.partition(".")
    if not dot or kind not in KIND_NAMES or not NAME_PATTERN.match(name):
        return None
    return kind, name


def register(kind: str, name: str, target: str | Any) -> None:
    """Name a plug-in in this process, by import path or by the object itself."""
    usage = "register(kind, name, 'package.module:Attr'), name in lower case"
    if kind not in KIND_NAMES:
        raise PluginLoadError("plug-in", f"{kind}.{name}", "unknown kind", _kinds_help())
    if not NAME_PATTERN.match(name or ""):
        raise PluginLoadError(kind, name, "not a valid plug-in name", usage)
    if name in KINDS[kind].builtins:
        raise PluginLoadError(
            kind, name, "is a built-in name and cannot be replaced", "register another name"
        )
    if isinstance(target, str) and not IMPORT_PATH.match(target):
        raise PluginLoadError(kind, target, "malformed import path", usage)
    _registered[(kind, name)] = Source(kind, name, target, "registered in this process")


def unregister(kind: str, name: str) -> None:
    _registered.pop((kind, name), None)


def named(kind: str) -> dict[str, Source]:
    """Every named plug-in of `kind` outside the built-ins; the first source of a name wins:
    registered in this process, then the variable, then entry points."""
    found: dict[str, Source] = {}
    for source in (*_registered.values(), *env_sources(), *entry_point_sources()):
        if source.kind == kind and source.name not in KINDS[kind].builtins:
            found.setdefault(source.name, source)
    return found


def all_named() -> list[Source]:
    return [s for kind in KIND_NAMES for s in named(kind).values()]


def env_sources() -> list[Source]:
    """The entries of EVAL_PIPELINE_PLUGINS; a malformed one is refused, naming the variable."""
    text = os.environ.get(ENV_VAR, "").strip()
    sources = []
    for entry in filter(None, _ENV_SEPARATORS.split(text)):
        full, eq, target = entry.partition("=")
        parts = split_name(full.strip())
        if not eq or parts is None or not IMPORT_PATH.match(target.strip()):
            raise PluginLoadError(
                "plug-in",
                entry,
                f"malformed {ENV_VAR} entry",
                f"write KIND.NAME=package.module:Attr, NAME in lower case; {_kinds_help()}",
            )
        kind, name = parts
        if name in KINDS[kind].builtins:
            raise PluginLoadError(
                kind,
                name,
                f"is a built-in name and cannot be replaced ({ENV_VAR})",
                "give the plug-in another name",
            )
        sources.append(Source(kind, name, target.strip(), f"{ENV_VAR} entry {full.strip()}"))
    return sources


def entry_point_sources() -> list[Source]:
    return list(_entry_point_table(tuple(sys.path)))


def malformed_entry_points() -> list[str]:
    """Entry points of the group whose names are not `<kind>.<name>` (shown by the check)."""
    return [
        f"{ep.name} = {ep.value!r}"
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
        if split_name(ep.name) is None
    ]


def refresh() -> None:
    """Forget the entry points read so far (after installing a plug-in in this process)."""
    _entry_point_table.cache_clear()


@lru_cache(maxsize=8)
def _entry_point_table(path: tuple[str, ...]) -> tuple[Source, ...]:
    # Keyed by sys.path: a distribution put on the path later is found without a refresh.
    by_name: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        parts = split_name(ep.name)
        if parts is None:
            continue
        dist = ep.dist
        where = f"{dist.name} {dist.version}" if dist is not None else "unknown distribution"
        value = f"{ep.module}:{ep.attr}" if ep.attr else ep.module
        values = by_name.setdefault(parts, [])
        if all(seen != value for seen, _ in values):  # one dist on the path twice is one
            values.append((value, where))
    table = []
    for (kind, name), values in by_name.items():
        (value, where), *others = values
        table.append(
            Source(
                kind,
                name,
                value,
                f"entry point {kind}.{name} ({where})",
                conflict=tuple(f"{v!r} ({w})" for v, w in others),
            )
        )
    return tuple(table)


def _kinds_help() -> str:
    return f"kinds are {', '.join(KIND_NAMES)}"
