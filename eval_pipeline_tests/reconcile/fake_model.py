"""A deterministic stand-in for a model behind the OpenAI wire format (`WireServer` responder).

It answers the `llm` reconciler's two calls: for the extraction call, one `event` fact per
user turn citing that turn, with the entities the extractive rules find in it; for the summary
call, one sentence naming the first user turn. Markers in the text script failures:
`MALFORMED` (never valid JSON), `REPAIRME` (invalid first, valid after the repair message),
`BADLABEL` (cites a turn label that does not exist).
"""

from __future__ import annotations

import json
import re

from eval_pipeline.reconcile.entity_rules import find_entities
from eval_pipeline_tests.wire_server import RecordedRequest, ScriptedReply

_LINE = re.compile(r"^\[(t\d+)\] (\w+): (.*)$")


def _is_summary(request: RecordedRequest) -> bool:
    return any(
        m.get("role") == "system" and "Summarise" in str(m.get("content")) for m in request.messages
    )


def _turns(request: RecordedRequest) -> list[tuple[str, str, str]]:
    first_user = next(m for m in request.messages if m.get("role") == "user")
    out = []
    for line in str(first_user.get("content", "")).splitlines():
        match = _LINE.match(line)
        if match:
            out.append((match.group(1), match.group(2), match.group(3)))
    return out


def extraction(turns: list[tuple[str, str, str]]) -> dict:
    entities: dict[str, dict] = {}
    facts = []
    for label, role, text in turns:
        if role != "user":
            continue
        names = []
        for e in find_entities(text):
            entities.setdefault(e.name, {"name": e.name, "type": e.type})
            names.append(e.name)
        cited = [label, "t99"] if "BADLABEL" in text else [label]
        facts.append(
            {
                "statement": f"The user said: {text[:80]}",
                "fact_type": "event",
                "source_turns": cited,
                "entities": names,
            }
        )
    return {"entities": list(entities.values()), "facts": facts}


def reply_for(request: RecordedRequest, delay_s: float = 0.0) -> ScriptedReply:
    turns = _turns(request)
    whole = " ".join(text for _, _, text in turns)
    if _is_summary(request):
        first = next((text for _, role, text in turns if role == "user"), "nothing")
        return ScriptedReply(text=f"The user talked about: {first[:60]}", delay_s=delay_s)
    if "MALFORMED" in whole:
        return ScriptedReply(text="this is not JSON", delay_s=delay_s)
    repairing = any("did not validate" in str(m.get("content")) for m in request.messages)
    if "REPAIRME" in whole and not repairing:
        return ScriptedReply(text='{"facts": [{"statement": 3}]}', delay_s=delay_s)
    return ScriptedReply(text=json.dumps(extraction(turns)), delay_s=delay_s)


def respond(request: RecordedRequest) -> ScriptedReply:
    return reply_for(request)


def respond_after_100ms(request: RecordedRequest) -> ScriptedReply:
    """For the benchmark: every answer after a fixed 100 ms."""
    return reply_for(request, delay_s=0.1)
