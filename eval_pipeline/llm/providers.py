"""Provider adapters over the official SDKs, and the classification of their errors.

Each adapter sends one request and returns text plus token usage; retries, timeouts, caching
and accounting live in the layer. SDK-internal retries are switched off (`max_retries=0`) so
that every attempt is ours: counted, backed off, and bounded by the role's budget.

The SDKs are imported on first use: together they take seconds to import, and the default
(offline) configuration, Dagster's definition loading and the cache never need them.

The adapters are the built-ins of the plug-in registry's kind `provider`; `make_provider`
builds a role's adapter from there, a plug-in provider's (`provider_plugins`) the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from pydantic import BaseModel

from eval_pipeline import plugins
from eval_pipeline.llm.config import RoleConfig
from eval_pipeline.llm.credentials import redact
from eval_pipeline.llm.errors import OfflineRoleError
from eval_pipeline.llm.messages import ChatMessage, ProviderReply
from eval_pipeline.llm.provider_plugins import ProviderCallError, provider_class
from eval_pipeline.llm.structured import schema_name, wire_schema


class MalformedProviderResponse(Exception):
    """The server answered 2xx with a body that is not JSON (a proxy error page, a cut-off
    body); the SDKs let json.JSONDecodeError through, which we do not want to mistake for a
    bug of ours."""


class SchemaModeRefused(Exception):
    """The server refused the structured-output option itself (not the prompt): the layer asks
    again in the next mode (json_schema → json_object → prompt)."""

    def __init__(self, mode: str, summary: str) -> None:
        super().__init__(summary)
        self.mode = mode
        self.summary = summary


class ChatProvider(Protocol):
    async def send(
        self,
        messages: list[ChatMessage],
        *,
        schema: type[BaseModel] | None,
        timeout_s: float,
        mode: str | None = None,
    ) -> ProviderReply: ...

    async def aclose(self) -> None: ...


class OpenAIChatProvider:
    """`openai` and `openai_compatible` roles: POST {base_url}/chat/completions."""

    def __init__(self, config: RoleConfig, api_key: str) -> None:
        import openai

        self._config = config
        self._client = openai.AsyncOpenAI(
            api_key=api_key, base_url=config.endpoint, max_retries=0, timeout=config.timeout_s
        )

    def __repr__(self) -> str:
        return f"OpenAIChatProvider(endpoint={self._config.endpoint!r})"

    def _response_format(self, schema: type[BaseModel], mode: str) -> dict[str, Any] | None:
        if mode == "json_schema":
            # strict=False: pydantic schemas are not all in OpenAI's strict subset.
            return {
                "type": "json_schema",
                "json_schema": {
                    "name": schema_name(schema),
                    "schema": wire_schema(schema),
                    "strict": False,
                },
            }
        if mode == "json_object":
            return {"type": "json_object"}
        return None

    async def send(
        self,
        messages: list[ChatMessage],
        *,
        schema: type[BaseModel] | None,
        timeout_s: float,
        mode: str | None = None,
    ) -> ProviderReply:
        config = self._config
        mode = mode or config.structured_output_mode
        kwargs: dict[str, Any] = {
            "model": config.model or "local",
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "timeout": timeout_s,
        }
        # OpenAI's newer models refuse `max_tokens`; local servers often only know it.
        if config.provider == "openai":
            kwargs["max_completion_tokens"] = config.max_tokens
        else:
            kwargs["max_tokens"] = config.max_tokens
        if config.temperature is not None:
            kwargs["temperature"] = config.temperature
        if config.stop:
            kwargs["stop"] = list(config.stop)
        response_format = self._response_format(schema, mode) if schema is not None else None
        if response_format is not None:
            kwargs["response_format"] = response_format
        kwargs.update(self._extra_request_fields())
        client = await self._client_for_request()
        try:
            response = await client.chat.completions.create(**kwargs)
        except json.JSONDecodeError as exc:
            raise MalformedProviderResponse(f"response body is not JSON ({exc.msg})") from None
        except Exception as exc:
            if response_format is not None and refuses_response_format(exc):
                raise SchemaModeRefused(mode, classify_failure(exc).summary) from None
            raise
        choices = response.choices or []
        text = (choices[0].message.content or "") if choices else ""
        finish = getattr(choices[0], "finish_reason", None) if choices else None
        usage = response.usage
        return ProviderReply(
            text=text,
            input_tokens=getattr(usage, "prompt_tokens", None),
            output_tokens=getattr(usage, "completion_tokens", None),
            model=response.model,
            finish_reason=finish,
        )

    def _extra_request_fields(self) -> dict[str, Any]:
        return {}

    async def _client_for_request(self) -> Any:
        return self._client

    async def aclose(self) -> None:
        await self._client.close()


class AnthropicMessagesProvider:
    """`anthropic` roles: POST {base_url}/v1/messages; system messages go to `system`."""

    def __init__(self, config: RoleConfig, api_key: str) -> None:
        import anthropic

        self._config = config
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=config.endpoint, max_retries=0, timeout=config.timeout_s
        )

    def __repr__(self) -> str:
        return f"AnthropicMessagesProvider(endpoint={self._config.endpoint!r})"

    async def send(
        self,
        messages: list[ChatMessage],
        *,
        schema: type[BaseModel] | None,
        timeout_s: float,
        mode: str | None = None,
    ) -> ProviderReply:
        config = self._config
        mode = mode or config.structured_output_mode
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        kwargs: dict[str, Any] = {
            "model": config.model,
            "max_tokens": config.max_tokens,
            "messages": [
                {"role": m.role, "content": m.content} for m in messages if m.role != "system"
            ],
            "timeout": timeout_s,
        }
        if system:
            kwargs["system"] = system
        # No temperature: the SDK 2.x has no such parameter and the API version it sends
        # rejects sampling parameters (RoleConfig refuses one for anthropic).
        if config.stop:
            kwargs["stop_sequences"] = list(config.stop)
        # Anthropic has no plain JSON mode: json_object is the prompt alone there.
        native = schema is not None and mode == "json_schema"
        if native:
            kwargs["output_config"] = {
                "format": {"type": "json_schema", "schema": wire_schema(schema)}
            }
        try:
            response = await self._client.messages.create(**kwargs)
        except json.JSONDecodeError as exc:
            raise MalformedProviderResponse(f"response body is not JSON ({exc.msg})") from None
        except Exception as exc:
            if native and refuses_response_format(exc):
                raise SchemaModeRefused(mode, classify_failure(exc).summary) from None
            raise
        text = "".join(
            getattr(block, "text", "") for block in (response.content or []) if block.type == "text"
        )
        usage = response.usage
        return ProviderReply(
            text=text,
            input_tokens=getattr(usage, "input_tokens", None),
            output_tokens=getattr(usage, "output_tokens", None),
            model=response.model,
            finish_reason=getattr(response, "stop_reason", None),
        )

    async def aclose(self) -> None:
        await self._client.close()


class LocalChatProvider(OpenAIChatProvider):
    """`local` roles: our own llama.cpp server (llama-cpp-python's), started on first use.

    Its native schema option is llama-cpp-python's `{"type": "json_object", "schema": ...}`
    (it refuses OpenAI's `json_schema` type with HTTP 500), compiled into a grammar. A fixed
    seed and the sampling settings are sent with every request (pinned: sampling_pins). The
    server is looked up (and restarted if it died) before every request, so a crash costs
    one retry, not the run.
    """

    def __init__(self, config: RoleConfig, api_key: str) -> None:
        self._config = config
        self._client: Any = None
        self._client_url: str | None = None
        self._model: Any = None

    def __repr__(self) -> str:
        return f"LocalChatProvider(model={self._config.model!r})"

    def _response_format(self, schema: type[BaseModel], mode: str) -> dict[str, Any] | None:
        if mode == "json_schema":
            return {"type": "json_object", "schema": wire_schema(schema)}
        if mode == "json_object":
            return {"type": "json_object"}
        return None

    def _extra_request_fields(self) -> dict[str, Any]:
        from eval_pipeline.llm.local_server import REQUEST_SAMPLING

        # Not OpenAI parameters: the SDK passes them in the body through `extra_body`.
        return {
            "seed": REQUEST_SAMPLING["seed"],
            "top_p": REQUEST_SAMPLING["top_p"],
            "extra_body": {k: REQUEST_SAMPLING[k] for k in ("top_k", "min_p")},
        }

    async def _client_for_request(self) -> Any:
        import asyncio

        import openai

        from eval_pipeline.llm import local_models, local_server

        if self._model is None:
            self._model = await asyncio.to_thread(local_models.resolve, self._config.model)
        record = await asyncio.to_thread(local_server.ensure_running, self._model)
        if self._client is None or self._client_url != record.base_url:
            if self._client is not None:
                await self._client.close()
            self._client = openai.AsyncOpenAI(
                api_key=record.key,
                base_url=record.base_url,
                max_retries=0,
                timeout=self._config.timeout_s,
            )
            self._client_url = record.base_url
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


class OfflineProvider:
    """`offline`: no model. Never sent to (an offline role refuses every call before it gets
    here); in the registry so that every provider name is found in one place."""

    def __init__(self, config: RoleConfig, api_key: str | None = None) -> None:
        self._config = config

    async def send(
        self,
        messages: list[ChatMessage],
        *,
        schema: type[BaseModel] | None,
        timeout_s: float,
        mode: str | None = None,
    ) -> ProviderReply:
        raise OfflineRoleError("the offline provider has no model")

    async def aclose(self) -> None:
        return None


def make_provider(config: RoleConfig, api_key: str | None) -> ChatProvider:
    """The role's adapter, built-in or plug-in, from the one registry."""
    cls = provider_class(config.provider)
    return plugins.construct("provider", config.provider, cls, config, api_key)


@cache
def _sdk_error_types() -> dict[str, tuple[type[BaseException], ...]]:
    import anthropic
    import openai

    return {
        "all": (openai.OpenAIError, anthropic.AnthropicError),
        "timeout": (openai.APITimeoutError, anthropic.APITimeoutError),
        "connection": (openai.APIConnectionError, anthropic.APIConnectionError),
        "status": (openai.APIStatusError, anthropic.APIStatusError),
        "bad_response": (openai.APIResponseValidationError, anthropic.APIResponseValidationError),
    }


def is_provider_error(exc: BaseException) -> bool:
    """Errors the layer classifies and may retry; anything else is a bug and propagates."""
    from eval_pipeline.llm.local_server import LocalServerError

    if isinstance(
        exc, (TimeoutError, MalformedProviderResponse, LocalServerError, ProviderCallError)
    ):
        return True
    return isinstance(exc, _sdk_error_types()["all"])


_FORMAT_WORDS = ("response_format", "json_schema", "grammar", "output_config", "schema")


def refuses_response_format(exc: BaseException) -> bool:
    """Did the server refuse the structured-output option (rather than fail)? A 400/422, or
    a 500 whose message names the option (llama-cpp-python's server answers 500 to OpenAI's
    `json_schema` type), when one was sent."""
    sdk = _sdk_error_types()
    if not isinstance(exc, sdk["status"]):
        return False
    status = int(exc.status_code)  # type: ignore[attr-defined]
    if status in (400, 422):
        return True
    if status == 500:
        text = str(exc).lower()
        return any(word in text for word in _FORMAT_WORDS)
    return False


@dataclass(frozen=True)
class FailureInfo:
    kind: str  # rate_limited, server_error, timeout, connection, bad_response, client_error
    retryable: bool
    summary: str  # redacted, short
    retry_after_s: float | None = None


def classify_failure(exc: BaseException) -> FailureInfo:
    """What went wrong, whether another attempt may help, and how long the server asked to wait."""
    from eval_pipeline.llm.local_server import LocalServerError

    if isinstance(exc, ProviderCallError):  # a plug-in's own classification
        summary = f"{exc.kind}: {redact(exc.summary)}"[:300]
        return FailureInfo(exc.kind, exc.retryable, summary, exc.retry_after_s)
    sdk = _sdk_error_types()
    if isinstance(exc, (TimeoutError, *sdk["timeout"])):
        return FailureInfo("timeout", True, "timed out")
    if isinstance(exc, LocalServerError):
        return FailureInfo("connection", True, f"local server: {redact(exc)}"[:300])
    if isinstance(exc, sdk["connection"]):
        return FailureInfo("connection", True, f"connection error: {redact(exc)}"[:300])
    if isinstance(exc, sdk["status"]):
        status = int(exc.status_code)  # type: ignore[attr-defined]
        summary = f"HTTP {status}: {redact(exc)}"[:300]
        retry_after = _retry_after_s(exc)
        if status == 429:
            return FailureInfo("rate_limited", True, summary, retry_after)
        if status == 408:
            return FailureInfo("timeout", True, summary, retry_after)
        if status >= 500:  # includes Anthropic's 529 "overloaded"
            return FailureInfo("server_error", True, summary, retry_after)
        return FailureInfo("client_error", False, summary)
    if isinstance(exc, (MalformedProviderResponse, *sdk["bad_response"])):
        return FailureInfo("bad_response", True, f"unreadable response: {redact(exc)}"[:300])
    # Other SDK errors (e.g. a body that is not JSON): a garbled reply is usually transient.
    return FailureInfo("bad_response", True, f"{type(exc).__name__}: {redact(exc)}"[:300])


def _retry_after_s(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP-date; our own backoff applies
