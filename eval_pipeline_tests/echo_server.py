"""A model endpoint that echoes the caller's credentials back in every answer — whole, and with
its `sk-`/`sk-ant-` prefix stripped — while answering each schema validly, as a careless or
hostile provider would. For the secret tests: nothing it echoes may reach any file.

`encoded_echo` echoes the key in the encodings issue 28's probe used (`encodings`): base64,
reversed, 15-character chunks, zero-width characters interleaved, `\\u` escapes."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval_pipeline_tests.reconcile import fake_model
from eval_pipeline_tests.wire_server import RecordedRequest, ScriptedReply


def presented_key(request: RecordedRequest) -> str:
    headers = {k.lower(): v for k, v in request.headers.items()}
    if "x-api-key" in headers:
        return headers["x-api-key"]
    return headers.get("authorization", "").removeprefix("Bearer ").strip()


def leak(request: RecordedRequest) -> str:
    key = presented_key(request)
    stripped = key.removeprefix("sk-ant-").removeprefix("sk-")
    return f"your key is {key} (or {stripped})"


CHUNK = 15  # one under the old 16-character run redaction caught


def encodings(key: str) -> dict[str, str]:
    """The key as the probe's echoes wrote it, each form by name."""
    return {
        "base64": base64.b64encode(f"key={key}".encode()).decode(),
        "base64 of a part": base64.b64encode(key[4:-3].encode()).decode(),
        "reversed": key[::-1],
        "chunks": " ".join(key[i : i + CHUNK] for i in range(0, len(key), CHUNK)),
        "zero-width": "\u200b".join(key),
        "escaped": "".join(f"\\u{ord(c):04x}" for c in key),
    }


def encoded_leak(request: RecordedRequest) -> str:
    forms = encodings(presented_key(request))
    return "; ".join(f"{name}: {form}" for name, form in forms.items())


def requested_fields(request: RecordedRequest) -> set[str]:
    """The property names of the JSON schema the caller asked for (either wire format)."""
    body = request.body or {}
    schema = (
        (body.get("response_format") or {}).get("json_schema", {}).get("schema")
        or ((body.get("output_config") or {}).get("format") or {}).get("schema")
        or {}
    )
    if schema:
        return set(schema.get("properties") or {})
    # Prompt mode: the schema is in the messages, as JSON text.
    text = json.dumps(body)  # the messages, and the system prompt of the Anthropic format
    names = ("action", "cypher", "verdict", "verdicts", "reason", "score", "steps", "entities")
    return {n for n in (*names, "facts") if f'\\"{n}\\"' in text}


def echo(request: RecordedRequest) -> ScriptedReply:
    return _echo_with(request, leak)


def encoded_echo(request: RecordedRequest) -> ScriptedReply:
    return _echo_with(request, encoded_leak)


def _echo_with(
    request: RecordedRequest, said_by: Callable[[RecordedRequest], str]
) -> ScriptedReply:
    said = said_by(request)
    fields = requested_fields(request)
    if {"action", "cypher"} <= fields:
        first = request.last_user_text.startswith("Question (asked on")
        query = (
            "MATCH (:Question {question_id: $question_id})-[:HAYSTACK]->(:Session)"
            "-[:HAS_TURN]->(t:Turn) RETURN t.turn_id AS turn_id, t.text AS text "
            "ORDER BY t.turn_id LIMIT 3"
        )
        step = (
            {"thought": said, "action": "query", "cypher": query}
            if first
            else {
                "thought": said,
                "action": "finish",
            }
        )
        return ScriptedReply(text=json.dumps(step))
    if {"entities", "facts"} <= fields:
        memory = json.loads(fake_model.reply_for(request).text)
        for fact in memory["facts"]:
            fact["statement"] = f"{fact['statement']} {said}"[:1900]
        return ScriptedReply(text=json.dumps(memory))
    if "verdicts" in fields:
        return ScriptedReply(text=json.dumps({"verdicts": [{"verdict": "yes", "reason": said}]}))
    if "steps" in fields:
        return ScriptedReply(text=json.dumps({"steps": [said]}))
    if {"reason", "score"} <= fields:
        return ScriptedReply(text=json.dumps({"reason": said, "score": 8}))
    if {"verdict", "reason"} <= fields:
        return ScriptedReply(text=json.dumps({"verdict": "yes", "reason": said}))
    if fields == {"reason"}:
        return ScriptedReply(text=json.dumps({"reason": said}))
    if fake_model._is_summary(request):
        return ScriptedReply(text=f"{fake_model.reply_for(request).text} {said}")
    return ScriptedReply(text=f"From memory: {said}")


def every_role_config(server: Any, runs_dir: Path) -> str:
    """A run's --config YAML sending every LLM role (reader, judge, retrieval agent,
    reconciler) to `server` (a WireServer): OpenAI for some, Anthropic for the others."""
    openai = f"openai:gpt-4o-mini@{server.openai_base_url}"
    anthropic = f"anthropic:claude-haiku-4-5@{server.anthropic_base_url}"
    return (
        f"reader: {openai}\n"
        f"judge: {anthropic}\n"
        "judge-verdict: reference\n"  # the model's own verdict, whose reason is echoed
        "retriever: graph_agent\n"
        f"retrieval-agent: {openai}\n"
        "reconciler: llm\n"
        f"reconciler-model: {anthropic}\n"
        "sample: 10\n"
        # An echoing model cannot find a planted fact: the canaries would fail the run,
        # which these tests are not about.
        "canaries: false\n"
        f"runs-dir: {runs_dir}\n"
    )
