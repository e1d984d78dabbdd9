"""One registry for every plug-in: reconcilers (memory systems among them), retrievers, answer
judges and model providers. `docs/plugins.md` says how to write and register each.

Modules, by what they hold:
  kinds     the four kinds: built-ins, required interface, the error class of each
  sources   named plug-ins: entry points `<kind>.<name>` in group `eval_pipeline.plugins`,
            the EVAL_PIPELINE_PLUGINS variable, `register` in this process
  registry  find / resolve / construct / load a spec of a kind; `available` names
  errors    PluginLoadError: `<kind> <spec>: <what failed>; <what to do>`
  __main__  `python -m eval_pipeline.plugins [KIND SPEC]`: list plug-ins, or check one loads
"""

from eval_pipeline.plugins.errors import PluginLoadError
from eval_pipeline.plugins.kinds import KIND_NAMES, KINDS, PluginKind
from eval_pipeline.plugins.registry import (
    Plugin,
    accepts_keyword,
    available,
    check_class,
    construct,
    error_class,
    fail,
    find,
    load,
    resolve,
    spec_help,
)
from eval_pipeline.plugins.sources import (
    ENTRY_POINT_GROUP,
    ENV_VAR,
    refresh,
    register,
    unregister,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "KINDS",
    "KIND_NAMES",
    "Plugin",
    "PluginKind",
    "PluginLoadError",
    "accepts_keyword",
    "available",
    "check_class",
    "construct",
    "error_class",
    "fail",
    "find",
    "load",
    "refresh",
    "register",
    "resolve",
    "spec_help",
    "unregister",
]
