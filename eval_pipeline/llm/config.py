"""Role and provider configuration of the LLM layer, and the CLI form `PROVIDER:MODEL`.

Four roles are configured separately so that, for instance, the judge can sit on a different
provider from the system under test. A role set to `offline` has no model at all: callers fall
back to their offline implementation or report "unscored: no judge".

API keys are never part of the configuration, only the *name* of the environment variable that
holds one (`api_key_env`); `hide_input_in_errors` keeps pydantic from echoing a key someone
pasted in the wrong field.

A provider is a built-in (`ProviderName`) or a plug-in registered under a name
(`provider_plugins`): `table:my-model` works like `openai:gpt-4o-mini` once `table` is one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from eval_pipeline.llm.errors import LLMConfigError
from eval_pipeline.llm.names import ENV_NAME_PATTERN, StructuredOutputMode

if TYPE_CHECKING:
    from eval_pipeline.llm.provider_plugins import ProviderPlugin

# The built-in providers; a role's provider may also be a plug-in's name (`provider_plugins`).
ProviderName = Literal["openai", "anthropic", "openai_compatible", "local", "offline"]
RoleName = Literal["reconciler", "retrieval_agent", "reader", "judge"]

PROVIDER_NAMES: tuple[str, ...] = get_args(ProviderName)
ROLE_NAMES: tuple[str, ...] = get_args(RoleName)

# Passed explicitly to the SDKs so that an OPENAI_BASE_URL / ANTHROPIC_BASE_URL left in the
# environment cannot silently reroute a run.
DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
DEFAULT_KEY_ENVS: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
# Anthropic's JSON-schema output rejects some schemas pydantic produces (it wants closed
# objects), so the portable instruction-in-the-prompt mode is its default.
DEFAULT_STRUCTURED_OUTPUT: dict[str, StructuredOutputMode] = {
    "openai": "json_schema",
    "openai_compatible": "json_schema",
    "local": "json_schema",
    "anthropic": "prompt",
}

# The `local` provider runs a model on this machine's CPU, one request at a time: calls take
# seconds to minutes, so its defaults differ (DESIGN.md section 6: "CPU models need timeouts
# of minutes, not 60 s"). Any of them can be set per role from the CLI or --config.
LOCAL_ROLE_DEFAULTS: dict[str, Any] = {
    "timeout_s": 600.0,
    "concurrency": 1,
    "max_retries": 2,
}
# Output budgets sized per role (a small model writes until max_tokens when nothing stops it,
# and a reply cut mid-JSON is useless): what each role's answer needs, with room to spare.
LOCAL_ROLE_MAX_TOKENS: dict[str, int] = {
    "judge": 512,
    "reader": 256,
    "retrieval_agent": 512,
    "reconciler": 1024,
}


def check_base_url(url: str) -> str:
    """A base URL must be plain http(s) with no credentials or query (keys belong in env)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("base_url must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            "base_url must not carry credentials (user:password@); "
            "put the key in an environment variable named by api_key_env"
        )
    if parts.query or parts.fragment:
        raise ValueError("base_url must not have a query string or fragment")
    from eval_pipeline.llm.uri_credentials import uri_credential

    where = uri_credential(url)
    if where is not None:  # a key in the path (`http://h:9/KEY/v1`) is stored as a pin
        raise ValueError(
            f"base_url must not carry a key ({where}); put the key in an environment "
            "variable named by api_key_env"
        )
    return url.rstrip("/")


def safe_spec(text: str) -> str:
    """The spec as it may appear in an error: URL userinfo, query and fragment blanked out
    (`?api_key=…` is a key), and whatever else `redact` knows to be secret."""
    from eval_pipeline.llm.credentials import redact
    from eval_pipeline.llm.uri_credentials import mask_uri, uri_credential

    text = re.sub(r"://[^/@\s]*@", "://***@", text)
    text = re.sub(r"([?#])\S*", r"\1***", text)
    # A URL with a key in its path or host: scheme, host and port only.
    text = re.sub(
        r"https?://\S+",
        lambda m: mask_uri(m.group(0)) if uri_credential(m.group(0)) else m.group(0),
        text,
    )
    return redact(text)


# A model name is a short identifier: one that looks like a key (sk-…, a long token with no
# separators) is a key pasted in the wrong place — it would be stored in Dagster's run storage.
_KEY_SHAPED = re.compile(r"^(sk-|sk_|key-|pk-)|^[A-Za-z0-9]{32,}$")


def check_model_name(model: str) -> str:
    from eval_pipeline.llm.uri_credentials import looks_secret

    # By shape (sk-, hf_, ghp_, a long random run, ...) as well as by value.
    if _KEY_SHAPED.search(model) or looks_secret(model):
        raise LLMConfigError(
            "the model name looks like an API key; keys are read only from the environment "
            "(OPENAI_API_KEY, ANTHROPIC_API_KEY, or the variable named by api_key_env): give "
            "the model's name, e.g. openai:gpt-4o-mini"
        )
    return model


class RoleConfig(BaseModel):
    """How one role talks to its model. Defaults suit a judge: deterministic, short replies."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    provider: str = "offline"  # a built-in (ProviderName) or a plug-in provider's name
    model: str | None = None
    base_url: str | None = None  # required for openai_compatible; an override for the others
    api_key_env: str | None = None  # NAME of the env var; default OPENAI_/ANTHROPIC_API_KEY
    # Unset: 0.0 for OpenAI-style providers (deterministic judging), not sent to Anthropic,
    # whose current API version rejects sampling parameters. An explicit None: not sent.
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int = Field(default=1024, ge=1)
    # Stop sequences sent with every request of the role (None: the model's own end token).
    stop: tuple[str, ...] | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=20)
    concurrency: int = Field(default=8, ge=1, le=1024)
    cache: bool = True
    structured_output: StructuredOutputMode | None = None  # None: the provider's default
    # Price override (USD per million tokens), e.g. for a gateway; else the pinned table.
    input_usd_per_mtok: float | None = Field(default=None, ge=0)
    output_usd_per_mtok: float | None = Field(default=None, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _default_temperature(cls, data: Any) -> Any:
        if isinstance(data, dict) and "temperature" not in data:
            if data.get("provider") in ("openai", "openai_compatible", "local"):
                data = {**data, "temperature": 0.0}
        if isinstance(data, dict) and data.get("provider") == "local":
            data = {**LOCAL_ROLE_DEFAULTS, **data}
        return data

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in PROVIDER_NAMES:
            plugin_provider(value)  # ProviderLoadError, a ValueError: it says what to do
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url_is_plain(cls, value: str | None) -> str | None:
        return None if value is None else check_base_url(value)

    @field_validator("api_key_env")
    @classmethod
    def _key_env_is_a_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME_PATTERN.match(value):
            # Never echo the value: the usual mistake is pasting the key itself here.
            raise ValueError(
                "api_key_env must be the NAME of an environment variable "
                "(upper case, digits, underscores), not the key"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RoleConfig:
        if self.provider == "offline":
            if self.model is not None or self.base_url is not None:
                raise ValueError("the offline provider takes no model and no base_url")
            return self
        if self.provider == "local":
            # The model is a catalogue name or a .gguf path; None: the default model. The
            # server is ours, on loopback: no base_url, no key.
            if self.base_url is not None or self.api_key_env is not None:
                raise ValueError("the local provider takes no base_url and no api_key_env")
            from eval_pipeline.llm.local_models import check_local_model_name

            try:
                check_local_model_name(self.model)
            except LLMConfigError as exc:
                raise ValueError(str(exc)) from None
            return self
        if not self.model or not self.model.strip():
            raise ValueError(f"provider {self.provider!r} needs a model")
        if self.provider == "anthropic" and self.temperature is not None:
            raise ValueError(
                "anthropic roles take no temperature: the Anthropic API version sent by the "
                "anthropic SDK 2.x rejects sampling parameters; leave it unset"
            )
        if self.provider == "openai_compatible" and self.base_url is None:
            raise ValueError("provider 'openai_compatible' needs a base_url")
        if (self.input_usd_per_mtok is None) != (self.output_usd_per_mtok is None):
            raise ValueError("set both input_usd_per_mtok and output_usd_per_mtok, or neither")
        return self

    @classmethod
    def from_spec(cls, spec: str, **overrides: Any) -> RoleConfig:
        """Build from the CLI form (see `parse_provider_spec`) plus field overrides."""
        parsed = parse_provider_spec(spec)
        fields: dict[str, Any] = {"provider": parsed.provider, "model": parsed.model}
        if parsed.base_url is not None:
            fields["base_url"] = parsed.base_url
        fields.update(overrides)
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise LLMConfigError(f"invalid role config for {safe_spec(spec)!r}: {exc}") from None

    @property
    def is_offline(self) -> bool:
        return self.provider == "offline"

    @property
    def endpoint(self) -> str | None:
        """The base URL the SDK will be pointed at (None when offline, and for `local`, whose
        server's port is chosen when it starts)."""
        if self.is_offline or self.provider == "local":
            return None
        return self.base_url or DEFAULT_BASE_URLS.get(self.provider)

    @property
    def is_plugin(self) -> bool:
        """A plug-in provider, not a built-in one."""
        return self.provider not in PROVIDER_NAMES

    @property
    def key_env_name(self) -> str | None:
        if self.api_key_env or not self.is_plugin:
            return self.api_key_env or DEFAULT_KEY_ENVS.get(self.provider)
        return plugin_provider(self.provider).key_env

    @property
    def structured_output_mode(self) -> StructuredOutputMode:
        if self.structured_output is not None:
            return self.structured_output
        if self.is_plugin:
            return plugin_provider(self.provider).structured_output  # type: ignore[return-value]
        return DEFAULT_STRUCTURED_OUTPUT.get(self.provider, "prompt")

    @property
    def spec(self) -> str:
        """The CLI form of this role's provider and model."""
        if self.is_offline:
            return "offline"
        if self.provider == "local":
            return f"local:{self.model}" if self.model else "local"
        text = f"{self.provider}:{self.model}"
        if self.base_url is not None:
            text += f"@{self.base_url}"
        return text

    def pins(self) -> dict[str, Any]:
        """What decides a role's answers, for run pins (no key, no operational knobs).

        For `local`, also the weights' sha256 (the file's name is not its identity), the
        server's version and the sampling settings the server applies."""
        pins: dict[str, Any] = {
            "provider": self.provider,
            "model": self.model,
            "endpoint": self.endpoint,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "structured_output": None if self.is_offline else self.structured_output_mode,
        }
        if self.stop:
            pins["stop"] = list(self.stop)
        if self.provider == "local":
            pins.update(local_pins(self.model))
        if self.is_plugin:
            pins["plugin"] = plugin_provider(self.provider).pins()
        return pins


class RetryPolicy(BaseModel):
    """Exponential backoff with jitter between attempts; the count is per role (max_retries)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=20.0, ge=0)
    jitter: bool = True


class LLMSettings(BaseModel):
    """Everything the layer needs: one config per role, the cache file, retry timing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    roles: dict[RoleName, RoleConfig] = Field(default_factory=dict)
    cache_path: Path | None = None  # None: <state dir>/llm_cache.sqlite3
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    # Optional cap shared by every role on one provider endpoint (rate limits are per account);
    # each role is in any case bounded by its own `concurrency`.
    provider_concurrency: dict[str, int] = Field(default_factory=dict)  # built-in or plug-in
    # Which sample of a repeated configuration this layer draws, e.g. "<salt>/<k>" for repeat k
    # of `run --repeat N`. When set it is part of every cache key: another identity never hits
    # this one's entries (a fresh provider call), the same identity does (a re-run of repeat k
    # reproduces it from the cache). None, a plain run: keys exactly as before, so existing
    # cache files stay valid.
    sample_identity: str | None = Field(default=None, min_length=1, max_length=256)
    # The token recorded on every cache entry this layer writes; a hit on an entry of another
    # origin is counted as `cache_replayed`. None: a fresh random token per LLMLayer. Never
    # part of a cache key.
    origin: str | None = Field(default=None, min_length=1, max_length=256)

    @field_validator("sample_identity", "origin")
    @classmethod
    def _visible_text(cls, value: str | None) -> str | None:
        if value is not None and (value != value.strip() or not value.isprintable()):
            raise ValueError("must be printable text without leading or trailing whitespace")
        return value

    @model_validator(mode="after")
    def _every_role_present(self) -> LLMSettings:
        for name in ROLE_NAMES:
            self.roles.setdefault(name, RoleConfig())  # type: ignore[index]
        for provider, limit in self.provider_concurrency.items():
            if provider not in PROVIDER_NAMES:
                plugin_provider(provider)
            if limit < 1:
                raise ValueError(f"provider_concurrency[{provider!r}] must be at least 1")
        return self

    @classmethod
    def from_specs(
        cls,
        specs: Mapping[str, str],
        *,
        role_overrides: Mapping[str, Mapping[str, Any]] | None = None,
        **settings: Any,
    ) -> LLMSettings:
        """Roles from CLI specs, e.g. `{"judge": "openai:gpt-4o-mini"}`; the rest offline."""
        unknown = sorted(set(specs) - set(ROLE_NAMES))
        if unknown:
            raise LLMConfigError(f"unknown role(s) {unknown}; roles are {list(ROLE_NAMES)}")
        overrides = role_overrides or {}
        roles = {}
        for name, spec in specs.items():
            fields = {k: v for k, v in dict(overrides.get(name, {})).items() if v is not None}
            if parse_provider_spec(spec).provider == "local":
                fields.setdefault("max_tokens", LOCAL_ROLE_MAX_TOKENS[name])
            roles[name] = RoleConfig.from_spec(spec, **fields)
        return cls(roles=roles, **settings)

    def role(self, name: str) -> RoleConfig:
        if name not in ROLE_NAMES:
            raise LLMConfigError(f"unknown role {name!r}; roles are {list(ROLE_NAMES)}")
        return self.roles[name]  # type: ignore[index]

    def pins(self) -> dict[str, Any]:
        """Each role's pins, and the sample identity (it decides which cached answers apply)."""
        return {
            **{name: self.role(name).pins() for name in ROLE_NAMES},
            "sample_identity": self.sample_identity,
        }


class ProviderSpec(BaseModel):
    """The parsed CLI form of a provider choice."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str  # a built-in (ProviderName) or a plug-in provider's name
    model: str | None = None
    base_url: str | None = None


_SPEC_HELP = (
    "expected 'offline', 'local', 'local:PATH.gguf', 'openai:MODEL', 'anthropic:MODEL', "
    "'openai_compatible:MODEL@http://host:port/v1' or 'NAME:MODEL' for a provider plug-in"
)
# The model may itself contain ':' (Ollama tags such as llama3:8b) or '@', so the URL is
# recognised by its scheme rather than by the last '@'.
_MODEL_AT_URL = re.compile(r"^(?P<model>.*?)@(?P<url>https?://\S+)$")


def parse_provider_spec(text: str) -> ProviderSpec:
    """Parse `PROVIDER:MODEL[@BASE_URL]` or `offline`; raise LLMConfigError saying what's wrong."""
    spec = (text or "").strip()
    if not spec:
        raise LLMConfigError(f"empty provider spec; {_SPEC_HELP}")
    provider, sep, rest = spec.partition(":")
    provider = provider.strip().lower()
    if provider not in PROVIDER_NAMES:
        plugin_provider(provider, model_spec=spec)  # ProviderLoadError when there is none
    if provider == "offline":
        if sep and rest.strip():
            raise LLMConfigError("the offline provider takes no model: write just 'offline'")
        return ProviderSpec(provider="offline")
    rest = rest.strip()
    if provider == "local":
        # `local` (the default model), `local:NAME` (the catalogue) or `local:PATH.gguf`.
        from eval_pipeline.llm.local_models import check_local_model_name

        if _MODEL_AT_URL.match(rest):
            raise LLMConfigError(
                "the local provider starts its own server: give no URL (for a server you run, "
                "use 'openai_compatible:MODEL@http://127.0.0.1:PORT/v1')"
            )
        if rest:
            check_model_name(rest)  # before the catalogue's refusal, which shows the name
        check_local_model_name(rest or None)
        return ProviderSpec(provider="local", model=rest or None)
    if not rest:
        raise LLMConfigError(f"provider {provider!r} needs a model; {_SPEC_HELP}")
    model, base_url = rest, None
    match = _MODEL_AT_URL.match(rest)
    if match:
        model, base_url = match.group("model").strip(), match.group("url")
        try:
            base_url = check_base_url(base_url)
        except ValueError as exc:
            raise LLMConfigError(f"bad base URL in {safe_spec(spec)!r}: {exc}") from None
    elif "@" in rest and provider == "openai_compatible":
        raise LLMConfigError(
            f"the URL after '@' in {safe_spec(spec)!r} must start with http:// or https://"
        )
    if not model:
        raise LLMConfigError(f"provider {provider!r} needs a model before '@'; {_SPEC_HELP}")
    check_model_name(model)
    if provider == "openai_compatible" and base_url is None:
        raise LLMConfigError(
            f"openai_compatible needs a base URL: 'openai_compatible:{model}@http://host:port/v1'"
        )
    return ProviderSpec(provider=provider, model=model, base_url=base_url)  # type: ignore[arg-type]


def plugin_provider(name: str, *, model_spec: str | None = None) -> ProviderPlugin:
    """The plug-in provider called `name`; its load error (ProviderLoadError) names the model
    spec it was found in, when there is one."""
    from eval_pipeline.llm.provider_plugins import ProviderLoadError, provider_plugin

    try:
        return provider_plugin(name)
    except ProviderLoadError as exc:
        if model_spec is None:
            raise
        if model_spec.strip().lower() == name:  # no ':' at all: a model name alone?
            where = "a model spec is PROVIDER:MODEL[@BASE_URL]"
        else:
            where = f"in {safe_spec(model_spec)!r}"
        raise ProviderLoadError(
            exc.kind, exc.spec, f"{exc.problem} ({where})", exc.remedy
        ) from None


def local_pins(model: str | None) -> dict[str, Any]:
    """The local role's identity: weights sha256 and size, server version, sampling."""
    from eval_pipeline.llm.local_models import resolve
    from eval_pipeline.llm.local_server import sampling_pins, server_version

    weights = resolve(model)
    return {
        "weights": {
            "name": weights.name,
            "sha256": weights.sha256,
            "size": weights.size,
            "catalogue": weights.catalogue,
        },
        "server": server_version(),
        "sampling": sampling_pins(),
    }
