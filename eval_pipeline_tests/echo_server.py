"""A model endpoint that echoes the caller's credentials back in every answer — whole, and with
its `sk-`/`sk-ant-` prefix stripped — while answering each schema validly, as a careless or
hostile provider would. For the secret tests: nothing it echoes may reach any file."""

from __future__ import annotations

import json

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
    said = leak(request)
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
