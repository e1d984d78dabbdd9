"""`graph_agent`: the reference baseline from the field. A model writes its own read-only Cypher.

Each step the `retrieval_agent` role answers with an `AgentStep` (structured output): a query
to run, or "finish" naming the steps whose rows form the context. What it is given, and why:

- the schema with REAL values (`schema_description`): given only label names, the reference
  agent invented property values, got nothing back and answered "not in memory";
- every failed query *and* every empty result is fed back with a hint to revise its
  assumptions, so an empty result is not read as "the memory does not know";
- a bounded step budget, and a payload cap in tokens on what it sees per step and on the
  context handed to the reader;
- every query goes through `GuardedReader` (guard, then a read transaction with timeout and
  row cap) and is recorded with its row count, error and truncation.

Scope `question`: the model is told to stay in the haystack of `$question_id` (a parameter of
every query), and rows from sessions outside it are dropped before they reach the reader.
Offline there is no model, so this retriever refuses to be built.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from eval_pipeline.graph.errors import GraphError, GraphRowLimitError
from eval_pipeline.retrieve import fulltext_queries as ftq
from eval_pipeline.retrieve.guarded_read import GuardedReader, QueryRejected
from eval_pipeline.retrieve.protocol import (
    RetrievalEnv,
    RetrievalOutput,
    RetrievalRequest,
    RetrievalTrace,
    RetrieverLoadError,
)
from eval_pipeline.retrieve.results import RetrievedItem
from eval_pipeline.retrieve.schema_description import describe_graph

AGENT_PROMPT_VERSION = 1
TURN_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}#\d+$")
_TEXT_KEYS = ("text", "summary", "content")


class AgentStep(BaseModel):
    """One move of the agent."""

    thought: str = Field(default="", description="brief reasoning about what to try next")
    action: Literal["query", "finish"]
    cypher: str | None = Field(
        default=None, description="with action 'query': one read-only Cypher statement"
    )
    use_steps: list[int] = Field(
        default_factory=list,
        description="with action 'finish': step numbers whose rows answer the question, best "
        "first; empty means every step that returned rows, latest first",
    )


AGENT_SYSTEM = """\
You retrieve memories for a question from a graph database of a user's past conversations
with an assistant. You cannot answer the question yourself: you find the conversation turns
that let someone else answer it, by writing Cypher queries one step at a time.

Rules:
- One read-only statement per step: MATCH, OPTIONAL MATCH, WITH, UNWIND, RETURN, and CALL of
  the full-text procedures shown. Anything that writes or administers is rejected unread.
- Use only labels, relationship types, properties and values that appear in the schema below.
  Match enumerated values exactly as listed. Never compare free text with =: search it.
- Return the evidence itself: turn_id, session_id, text and timestamp of turns (or the
  equivalent of other nodes). Always add a LIMIT (at most {max_rows} rows are allowed).
- Parameters available in every query: $question_id and $question_date.
{scope_rule}
- After each step you see the rows, the error, or that nothing matched. Nothing matched means
  your assumptions were wrong (a value, a label, a word), not that the memory lacks it: check
  the schema's real values, search with other words or the full-text index, loosen filters.
- You have {max_steps} steps. Finish as soon as the rows you found are enough, naming the
  steps whose rows should be kept.

{schema}
"""

SCOPE_RULES = {
    "question": (
        "- Stay inside this question's haystack: "
        "(:Question {question_id: $question_id})-[:HAYSTACK]->(s:Session)-[:HAS_TURN]->(t:Turn)."
        " Rows from other sessions are discarded."
    ),
    "batch": "- Every session in the graph may hold the answer.",
}


class GraphAgentRetriever:
    name = "graph_agent"
    # 2: at most top_k rows are handed on (protocol check `protocol_within_top_k`: a run's
    # k is its item budget, whatever the retriever).
    version = 2

    def __init__(
        self,
        env: RetrievalEnv,
        *,
        max_steps: int = 6,
        payload_cap_tokens: int = 4000,
        step_view_tokens: int | None = None,
    ) -> None:
        if env.llm is None or env.llm.role("retrieval_agent").is_offline:
            raise RetrieverLoadError(
                "retriever",
                "graph_agent",
                "needs a model for the 'retrieval_agent' role, which is offline",
                "give that role one (e.g. openai:gpt-4o-mini) or use retriever 'fulltext'",
            )
        if max_steps < 1 or payload_cap_tokens < 1:
            raise ValueError("max_steps and payload_cap_tokens must be positive")
        self.env = env
        self.client = env.llm.role("retrieval_agent")
        self.max_steps = max_steps
        self.payload_cap_tokens = payload_cap_tokens
        self.step_view_tokens = step_view_tokens or payload_cap_tokens
        self.reader = GuardedReader(env.store, timeout_s=env.query_timeout_s, max_rows=env.max_rows)
        self._schema_text: str | None = None
        self._tokenizer = env.tokenizer

    # --- setup ----------------------------------------------------------------------------

    def schema_text(self) -> str:
        if self._schema_text is None:
            sources = _indexed_sources(self.env)
            description = describe_graph(self.env.store, self.env.backend, fulltext_sources=sources)
            self._schema_text = description.render()
        return self._schema_text

    def count_tokens(self, text: str) -> int:
        if self._tokenizer is None:
            from eval_pipeline.score.tokens import PayloadTokenizer

            self._tokenizer = PayloadTokenizer()
        return self._tokenizer.count(text)

    def system_prompt(self, scope: str) -> str:
        return AGENT_SYSTEM.format(
            max_rows=self.env.max_rows,
            scope_rule=SCOPE_RULES[scope],
            max_steps=self.max_steps,
            schema=self.schema_text(),
        )

    # --- the loop -------------------------------------------------------------------------

    def retrieve(self, request: RetrievalRequest, trace: RetrievalTrace) -> RetrievalOutput:
        messages: list[dict[str, str]] = [
            {"role": "system", "content": self.system_prompt(request.scope)},
            {
                "role": "user",
                "content": f"Question (asked on {request.question_date}): {request.question}",
            },
        ]
        params = {"question_id": request.question_id, "question_date": request.question_date}
        results: dict[int, list[dict]] = {}  # step -> rows, for steps that returned rows
        record_of: dict[int, int] = {}  # step -> index of its QueryRecord in the trace
        chosen: list[int] = []
        finished = False
        for step in range(1, self.max_steps + 1):
            completion = self.client.complete_sync(messages, schema=AgentStep)
            move: AgentStep = completion.parsed
            messages.append({"role": "assistant", "content": completion.text})
            if move.action == "finish":
                chosen = [s for s in move.use_steps if s in results]
                finished = True
                break
            feedback = self._run_step(step, move, params, trace, results, record_of)
            messages.append({"role": "user", "content": feedback})
        if not finished:
            trace.note(f"graph_agent: step budget of {self.max_steps} used up without finishing")
        if not chosen:
            chosen = sorted(results, reverse=True)
        rows = [(s, row) for s in chosen for row in results[s]]
        if request.scope == "question":
            rows = self._in_haystack(request.question_id, rows, trace)
        return self._to_output(rows, trace, record_of, request.top_k)

    def _run_step(
        self,
        step: int,
        move: AgentStep,
        params: dict[str, Any],
        trace: RetrievalTrace,
        results: dict[int, list[dict]],
        record_of: dict[int, int],
    ) -> str:
        cypher = (move.cypher or "").strip()
        if not cypher:
            return f"Step {step}: no query given. Give a Cypher query, or finish."
        try:
            rows = self.reader.read(cypher, params, trace=trace)
        except QueryRejected as rejected:
            return (
                f"Step {step}: REJECTED by the read-only guard, not run: {rejected.reason}. "
                "Write one read-only statement."
            )
        except GraphRowLimitError:
            return f"Step {step}: more than {self.env.max_rows} rows; add a LIMIT or aggregate."
        except GraphError as exc:
            return (
                f"Step {step}: the server returned an error: {exc}. Check labels, properties "
                "and syntax against the schema and revise the query."
            )
        record_of[step] = len(trace.queries) - 1
        if not rows:
            return (
                f"Step {step}: 0 rows. Some assumption in the query is wrong (a value, label, "
                "relationship direction or exact wording): compare it with the real values in "
                "the schema, search free text with the full-text index or "
                "toLower(...) CONTAINS, and loosen the filters."
            )
        results[step] = rows
        shown, cut = self._fit([render_row(r) for r in rows], self.step_view_tokens)
        if cut:
            trace.queries[record_of[step]].truncated = True
        note = f", showing the first {len(shown)} to stay within the token budget" if cut else ""
        return f"Step {step}: {len(rows)} rows{note}:\n" + "\n".join(shown)

    # --- results --------------------------------------------------------------------------

    def _in_haystack(
        self, question_id: str, rows: list[tuple[int, dict]], trace: RetrievalTrace
    ) -> list[tuple[int, dict]]:
        if not rows:
            return rows
        haystack = {
            str(r["session_id"])
            for r in self.reader.read(
                ftq.HAYSTACK_STATEMENT,
                {"question_id": question_id},
                trace=trace,
                max_rows=100_000,
            )
        }
        kept = [(s, r) for s, r in rows if set(row_sessions(r)) <= haystack]
        if len(kept) < len(rows):
            trace.note(
                f"graph_agent: dropped {len(rows) - len(kept)} rows from sessions outside the "
                "question's haystack"
            )
        return kept

    def _fit(self, texts: list[str], cap: int) -> tuple[list[str], bool]:
        """The longest prefix of `texts` within `cap` tokens; (prefix, whether cut)."""
        out: list[str] = []
        used = 0
        for text in texts:
            n = self.count_tokens(text)
            if used + n > cap:
                return out, True
            out.append(text)
            used += n
        return out, False

    def _to_output(
        self,
        rows: list[tuple[int, dict]],
        trace: RetrievalTrace,
        record_of: dict[int, int],
        top_k: int,
    ) -> RetrievalOutput:
        seen: set[str] = set()
        unique: list[tuple[int, dict, str]] = []
        for step, row in rows:
            rendered = render_row(row)
            if rendered not in seen:
                seen.add(rendered)
                unique.append((step, row, rendered))
        if len(unique) > top_k:
            for step, _, _ in unique[top_k:]:
                trace.queries[record_of[step]].truncated = True
            trace.note(f"graph_agent: {len(unique)} rows cut to top_k {top_k}")
            unique = unique[:top_k]
        context, cut = self._fit([u[2] for u in unique], self.payload_cap_tokens)
        if cut:
            for step, _, _ in unique[len(context) :]:
                trace.queries[record_of[step]].truncated = True
            trace.note(
                f"graph_agent: context cut to {len(context)} of {len(unique)} rows "
                f"(payload cap {self.payload_cap_tokens} tokens)"
            )
        items = [row_item(row) for _, row, _ in unique[: len(context)]]
        return RetrievalOutput(items=items, context=context)

    def pins(self) -> dict[str, Any]:
        return {
            "retriever": self.name,
            "version": self.version,
            "prompt_version": AGENT_PROMPT_VERSION,
            "backend": self.env.backend,
            "model": self.client.config.spec,
            "max_steps": self.max_steps,
            "payload_cap_tokens": self.payload_cap_tokens,
            "max_rows": self.env.max_rows,
        }


def _indexed_sources(env: RetrievalEnv) -> list[ftq.FulltextSource]:
    from eval_pipeline.retrieve.fulltext import FulltextRetriever

    try:
        return FulltextRetriever(env).sources()
    except Exception:  # the description still helps without the index list
        return [ftq.turn_source(env.backend)]


# --- rows -> items ------------------------------------------------------------------------


def _walk(value: Any, key: str | None = None):
    """(key, scalar) pairs anywhere in a row: nodes come back as property maps."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, str(k))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _walk(v, key)
    else:
        yield key, value


def _is_text_key(key: str | None) -> bool:
    return bool(key) and key.lower().split(".")[-1] in _TEXT_KEYS


def row_turns(row: dict) -> list[str]:
    seen: dict[str, None] = {}
    for key, value in _walk(row):
        # By value, not key name: the agent may alias a turn id as anything ("id", "t").
        if isinstance(value, str) and not _is_text_key(key) and TURN_ID_RE.match(value):
            seen.setdefault(value, None)
    return list(seen)


def row_sessions(row: dict) -> list[str]:
    seen: dict[str, None] = {}
    for key, value in _walk(row):
        if key and key.lower().endswith("session_id") and isinstance(value, str) and value:
            seen.setdefault(value, None)
    for tid in row_turns(row):
        seen.setdefault(tid.rpartition("#")[0], None)
    return list(seen)


def row_text(row: dict) -> str | None:
    for key, value in _walk(row):
        if _is_text_key(key) and isinstance(value, str):
            return value
    return None


def render_row(row: dict) -> str:
    """One row as the reader (and the agent) sees it: compact JSON, text kept readable."""
    return json.dumps(row, ensure_ascii=False, default=str, separators=(", ", ": "))


def row_nodes(row: dict) -> list[str]:
    """Values that may name a memory node (a fact, chunk or plug-in id): short strings that are
    no text, turn id or session id. Provenance resolution looks them up, so a row naming a
    fact counts for the fact's turns (`retrieve.provenance`)."""
    seen: dict[str, None] = {}
    for key, value in _walk(row):
        if not isinstance(value, str) or not value or len(value) > 300 or _is_text_key(key):
            continue
        if TURN_ID_RE.match(value) or (key or "").lower().endswith("session_id"):
            continue
        seen.setdefault(value, None)
    return list(seen)


def row_item(row: dict) -> RetrievedItem:
    turns = row_turns(row)
    text = row_text(row)
    return RetrievedItem(
        text=text if text is not None else render_row(row),
        turn_ids=turns,
        session_ids=row_sessions(row),
        kind="turn" if len(turns) == 1 and text is not None else "row",
        node_ids=row_nodes(row),
    )
