"""What goes in and out of a call: chat messages, a provider's raw reply, a finished completion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

MessageRole = Literal["system", "user", "assistant"]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: MessageRole
    content: str


MessagesInput = str | Sequence[ChatMessage | Mapping[str, str]]


def normalise_messages(messages: MessagesInput, system: str | None = None) -> list[ChatMessage]:
    """A prompt string or a list of {role, content} as validated messages, `system` first."""
    if isinstance(messages, str):
        items: list[ChatMessage] = [ChatMessage(role="user", content=messages)]
    else:
        items = [
            m if isinstance(m, ChatMessage) else ChatMessage.model_validate(m) for m in messages
        ]
    if system is not None:
        items.insert(0, ChatMessage(role="system", content=system))
    if not any(m.role != "system" for m in items):
        raise ValueError("a call needs at least one user or assistant message")
    return items


class ProviderReply(BaseModel):
    """One HTTP exchange's result. Token counts are None when the server did not report usage."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    model: str | None = None
    # "length": the reply was cut at max_tokens (as the server said); None: not reported.
    finish_reason: str | None = None

    @property
    def truncated(self) -> bool:
        return self.finish_reason in ("length", "max_tokens")


@dataclass(frozen=True)
class Completion:
    """The answer to one logical call (after retries and, for structured output, repair).

    `parsed` holds the validated schema instance when a schema was requested. Token counts
    cover every request the call made; for a cache hit they are the original call's, and
    `cached` is True (no provider request was made, nothing was spent).
    """

    role: str
    text: str
    parsed: Any = None
    cached: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float = 0.0
    requests: int = 0
