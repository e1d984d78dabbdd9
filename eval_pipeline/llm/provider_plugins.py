"""Model-provider plug-ins: a provider named in a model spec (`--judge table:my-model`) that is
not one of the built-ins, registered as a plug-in of kind `provider` (`eval_pipeline.plugins`:
an entry point `provider.<name>`, or `EVAL_PIPELINE_PLUGINS=provider.<name>=pkg.mod:Class`).
A model spec is `NAME:MODEL[@BASE_URL]`, so a provider is always named: an import path cannot
stand before `:MODEL`.

The class is what the layer calls, exactly as it calls the built-in adapters (`providers`):

    class TableProvider:
        plugin_kind = "provider"        # optional: refused where another kind is expected
        version = "1"                   # optional: pinned, and part of every cache key
        key_env = "TABLE_API_KEY"       # optional: the NAME of the variable holding its key
        structured_output = "prompt"    # optional: json_schema | json_object | prompt (default)
        def __init__(self, config: RoleConfig, api_key: str | None): ...
        async def send(self, messages: list[ChatMessage], *, schema: type[BaseModel] | None,
                       timeout_s: float, mode: str | None = None) -> ProviderReply: ...
        async def aclose(self) -> None: ...

Everything around `send` is the layer's: the cache, the per-role and per-provider limits, the
timeout, retries with backoff, structured output with one repair, the ledger, redaction of the
reply. A failure the layer should count (and retry, if `retryable`) is raised as
`ProviderCallError`, or TimeoutError; anything else is a bug and propagates. Keys: the layer
reads the one named by the role's `api_key_env`, else by the class's `key_env`, from the
environment only (a missing one stops the run at start), registers it for redaction and
passes it as `api_key`; with neither, `api_key` is None. A key is never in a spec or a config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eval_pipeline import plugins
from eval_pipeline.llm.errors import LLMConfigError
from eval_pipeline.llm.names import ENV_NAME_PATTERN, STRUCTURED_OUTPUT_MODES
from eval_pipeline.plugins.errors import PluginLoadError


class ProviderLoadError(PluginLoadError, LLMConfigError):
    """A provider name in a model spec that is no built-in and no plug-in that loads (the
    plug-in registry's error for kind `provider`; an LLMConfigError for the callers of specs)."""


KIND = "provider"
FAILURE_KINDS: tuple[str, ...] = (
    "rate_limited",
    "server_error",
    "timeout",
    "connection",
    "bad_response",
    "client_error",
)


class ProviderCallError(Exception):
    """A provider plug-in's failed request, classified for the layer. `retryable` defaults to
    every kind but client_error; the summary is redacted before it is shown or logged."""

    def __init__(
        self,
        summary: str,
        *,
        kind: str = "server_error",
        retryable: bool | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        if kind not in FAILURE_KINDS:
            raise ValueError(f"ProviderCallError kind {kind!r}: kinds are {list(FAILURE_KINDS)}")
        super().__init__(summary)
        self.summary = summary
        self.kind = kind
        self.retryable = kind != "client_error" if retryable is None else retryable
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class ProviderPlugin:
    """A plug-in provider as the configuration sees it."""

    name: str
    cls: type
    path: str  # "module:Class"
    key_env: str | None
    structured_output: str
    version: str | None

    def pins(self) -> dict[str, Any]:
        return {"class": self.path, "version": self.version}


def provider_plugin(name: str) -> ProviderPlugin:
    """The plug-in provider called `name`; ProviderLoadError (an LLMConfigError) if there is
    none, or it does not load."""
    if ":" in name:
        plugins.fail(
            KIND,
            name,
            "an import path cannot name a provider in a model spec (NAME:MODEL[@BASE_URL])",
            f"register it under a name: {plugins.ENV_VAR}=provider.<name>={name}, or an entry "
            f"point 'provider.<name>' in group '{plugins.ENTRY_POINT_GROUP}'",
        )
    found = plugins.find(KIND, name)
    cls = found.target
    version = getattr(cls, "version", None)
    return ProviderPlugin(
        name=name,
        cls=cls,
        path=found.path,
        key_env=getattr(cls, "key_env", None),
        structured_output=getattr(cls, "structured_output", None) or "prompt",
        version=None if version is None else str(version),
    )


def provider_class(name: str) -> type:
    """The adapter class of a provider, built-in or plug-in (one registry for both)."""
    return plugins.resolve(KIND, name)


def class_problem(cls: type) -> str | None:
    """The registry's extra check of a provider class: its declared key variable and mode."""
    key_env = getattr(cls, "key_env", None)
    if key_env is not None and not (isinstance(key_env, str) and ENV_NAME_PATTERN.match(key_env)):
        # Never echo the value: the usual mistake is writing the key itself there.
        return (
            "has a key_env that is not the NAME of an environment variable (upper case, "
            "digits, underscores); keys are read from the environment only"
        )
    mode = getattr(cls, "structured_output", None)
    if mode is not None and mode not in STRUCTURED_OUTPUT_MODES:
        return f"has structured_output {mode!r}; modes are {', '.join(STRUCTURED_OUTPUT_MODES)}"
    return None
