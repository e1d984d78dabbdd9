"""Structured output: asking for JSON that fits a pydantic model, checking it, asking to repair.

The schema always goes into the prompt (portable across providers and local servers); when the
role's mode is `json_schema` the provider's native JSON-schema option is sent as well, and in
`json_object` mode the provider's plain JSON mode.

What is *sent* is `wire_schema(schema)`: the schema without length, size, pattern, format or
range limits. Real servers compile the schema into a grammar and choke on those: llama.cpp's
server answers HTTP 400 ("failed to parse grammar") to `maxLength: 2000`, and
llama-cpp-python's server crashes outright (segfault) on it. The limits are enforced where
they always were, by pydantic when the reply is parsed; a reply that breaks one gets the one
repair like any other invalid reply.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from eval_pipeline.llm.messages import ChatMessage

# Bump when the instruction or repair wording changes: it is part of every cache key, so
# answers obtained with the old wording are not replayed for the new one.
# 2: the prompt shows the wire schema (no length limits) and asks for an instance of it.
STRUCTURED_PROMPT_VERSION = 2

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(?P<body>.*?)\n?\s*```\s*$", re.S)


class StructuredOutputError(ValueError):
    """A reply that is not valid JSON for the schema; the text is the short reason."""


def json_schema_of(schema: type[BaseModel]) -> dict[str, Any]:
    # A copy: callers put it in request bodies, which must not alias the memoised original.
    return json.loads(_schema_json(schema))


@lru_cache(maxsize=256)
def _schema_json(schema: type[BaseModel]) -> str:
    # Generating a JSON schema costs about a millisecond; it is asked for on every call
    # (cache key, instruction, request), so it is memoised per class.
    return json.dumps(schema.model_json_schema(), sort_keys=True, ensure_ascii=False)


# Keywords a grammar compiler may refuse or blow up on; pydantic checks them on parsing.
_UNSENT_KEYWORDS = frozenset(
    {
        "maxLength",
        "minLength",
        "pattern",
        "format",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxProperties",
        "minProperties",
        "maximum",
        "minimum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "multipleOf",
    }
)


def _strip_limits(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in _UNSENT_KEYWORDS and not isinstance(value, dict):
                continue
            if key in ("properties", "$defs", "definitions", "patternProperties"):
                # Names here are field names, not keywords: keep every one, strip inside.
                out[key] = {k: _strip_limits(v) for k, v in value.items()}
            else:
                out[key] = _strip_limits(value)
        return out
    if isinstance(node, list):
        return [_strip_limits(v) for v in node]
    return node


def wire_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The schema as sent to a provider and shown in the prompt: no limits a grammar
    compiler could refuse (a copy, safe to put in a request body)."""
    return json.loads(_wire_json(schema))


@lru_cache(maxsize=256)
def _wire_json(schema: type[BaseModel]) -> str:
    return json.dumps(
        _strip_limits(json.loads(_schema_json(schema))), sort_keys=True, ensure_ascii=False
    )


def schema_fingerprint(schema: type[BaseModel]) -> str:
    """The schema as canonical JSON text, for cache keys."""
    return _schema_json(schema)


def schema_name(schema: type[BaseModel]) -> str:
    # OpenAI allows [A-Za-z0-9_-]{1,64} for a json_schema name.
    return re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64] or "response"


def schema_instruction(schema: type[BaseModel]) -> ChatMessage:
    text = (
        "Reply with a single JSON object that validates against the JSON schema below: an "
        "instance with your values, not the schema itself. Keep string values short. Output "
        "only the JSON: no prose, no code fences.\n" + _wire_json(schema)
    )
    return ChatMessage(role="system", content=text)


def with_schema_instruction(
    messages: list[ChatMessage], schema: type[BaseModel]
) -> list[ChatMessage]:
    """Insert the instruction after the leading system messages (the caller's own come first)."""
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    return [*messages[:lead], schema_instruction(schema), *messages[lead:]]


def repair_messages(
    sent: list[ChatMessage],
    reply_text: str,
    error: StructuredOutputError,
    *,
    truncated: bool = False,
) -> list[ChatMessage]:
    """The one repair attempt: the bad reply, then the validation error, then the same ask.
    A reply cut at the token limit is told so: the fix is a shorter answer."""
    cut = (
        " Your reply was cut off at the length limit: write a much shorter JSON object."
        if truncated
        else ""
    )
    return [
        *sent,
        ChatMessage(role="assistant", content=reply_text),
        ChatMessage(
            role="user",
            content=(
                "Your previous reply did not validate against the JSON schema: "
                f"{error}.{cut}\nReply again with only the corrected JSON object."
            ),
        ),
    ]


def extract_json_text(text: str) -> str:
    """The JSON part of a reply: code fences removed, prose around one object/array trimmed."""
    fenced = _FENCE.match(text)
    body = fenced.group("body") if fenced else text
    body = body.strip()
    if body[:1] in "{[":
        return body
    start = body.find("{")
    end = body.rfind("}")
    if start != -1 and end > start:
        return body[start : end + 1]
    return body


def parse_structured(schema: type[M], text: str) -> M:
    """Validate a reply against `schema`, or raise StructuredOutputError with a short reason."""
    candidate = extract_json_text(text)
    if not candidate:
        raise StructuredOutputError("the reply was empty")
    try:
        return schema.model_validate_json(candidate)
    except ValidationError as exc:
        # Only types and locations: the model's own text is not echoed back at length.
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors(include_url=False, include_input=False)[:10]
        )
        raise StructuredOutputError(problems) from None
