"""Provider adapters over the official SDKs, and the classification of their errors.

Each adapter sends one request and returns text plus token usage; retries, timeouts, caching
and accounting live in the layer. SDK-internal retries are switched off (`max_retries=0`) so
that every attempt is ours: counted, backed off, and bounded by the role's budget.

The SDKs are imported on first use: together they take seconds to import, and the default
(offline) configuration, Dagster's definition loading and the cache never need them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from pydantic import BaseModel

from eval_pipeline.llm.config import RoleConfig
from eval_pipeline.llm.credentials import redact
from eval_pipeline.llm.messages import ChatMessage, ProviderReply
from eval_pipeline.llm.structured import json_schema_of, schema_name


class MalformedProviderResponse(Exception):
    """The server answered 2xx with a body that is not JSON (a proxy error page, a cut-off
    body); the SDKs let json.JSONDecodeError through, which we do not want to mistake for a
    bug of ours."""


class ChatProvider(Protocol):
    async def send(
        self, messages: list[ChatMessage], *, schema: type[BaseModel] | None, timeout_s: float
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

    async def send(
        self, messages: list[ChatMessage], *, schema: type[BaseModel] | None, timeout_s: float
    ) -> ProviderReply:
        config = self._config
        kwargs: dict[str, Any] = {
            "model": config.model,
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
        if schema is not None and config.structured_output_mode == "json_schema":
            kwargs["response_format"] = {
                "type": "json_schema",
                # strict=False: pydantic schemas are not all in OpenAI's strict subset.
                "json_schema": {
                    "name": schema_name(schema),
                    "schema": json_schema_of(schema),
                    "strict": False,
                },
            }
        try:
            response = await self._client.chat.completions.create(**kwargs)
        except json.JSONDecodeError as exc:
            raise MalformedProviderResponse(f"response body is not JSON ({exc.msg})") from None
        choices = response.choices or []
        text = (choices[0].message.content or "") if choices else ""
        usage = response.usage
        return ProviderReply(
            text=text,
            input_tokens=getattr(usage, "prompt_tokens", None),
            output_tokens=getattr(usage, "completion_tokens", None),
            model=response.model,
        )

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
        self, messages: list[ChatMessage], *, schema: type[BaseModel] | None, timeout_s: float
    ) -> ProviderReply:
        config = self._config
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
        if schema is not None and config.structured_output_mode == "json_schema":
            kwargs["output_config"] = {
                "format": {"type": "json_schema", "schema": json_schema_of(schema)}
            }
        try:
            response = await self._client.messages.create(**kwargs)
        except json.JSONDecodeError as exc:
            raise MalformedProviderResponse(f"response body is not JSON ({exc.msg})") from None
        text = "".join(
            getattr(block, "text", "") for block in (response.content or []) if block.type == "text"
        )
        usage = response.usage
        return ProviderReply(
            text=text,
            input_tokens=getattr(usage, "input_tokens", None),
            output_tokens=getattr(usage, "output_tokens", None),
            model=response.model,
        )

    async def aclose(self) -> None:
        await self._client.close()


def make_provider(config: RoleConfig, api_key: str) -> ChatProvider:
    if config.provider in ("openai", "openai_compatible"):
        return OpenAIChatProvider(config, api_key)
    if config.provider == "anthropic":
        return AnthropicMessagesProvider(config, api_key)
    raise ValueError(f"no provider adapter for {config.provider!r}")


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
    if isinstance(exc, (TimeoutError, MalformedProviderResponse)):
        return True
    return isinstance(exc, _sdk_error_types()["all"])


@dataclass(frozen=True)
class FailureInfo:
    kind: str  # rate_limited, server_error, timeout, connection, bad_response, client_error
    retryable: bool
    summary: str  # redacted, short
    retry_after_s: float | None = None


def classify_failure(exc: BaseException) -> FailureInfo:
    """What went wrong, whether another attempt may help, and how long the server asked to wait."""
    sdk = _sdk_error_types()
    if isinstance(exc, (TimeoutError, *sdk["timeout"])):
        return FailureInfo("timeout", True, "timed out")
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
