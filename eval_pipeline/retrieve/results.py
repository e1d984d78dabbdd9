"""Contract of the retrieval stage's output: one `QuestionRetrieval` per line of
`retrieval_results.jsonl`. The scoring stage reads exactly this.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.failures import InfraFailure

# 2: `notes` (e.g. "no match") and `infra_failures` (the pipeline's own failures: unscored).
# 3: `RetrievedItem.node_ids`; `turn_ids` include the turns reached by provenance edges.
RESULTS_SCHEMA_VERSION = 3


MEMORY_KIND = "memory"  # an item a memory provider's own search returned


class RetrievedItem(BaseModel):
    """One ranked item: the text shown to the reader and where it came from."""

    model_config = ConfigDict(extra="forbid")

    text: str
    turn_ids: list[str]  # "<session_id>#<index>", in the item's own order
    session_ids: list[str]
    score: float | None = None
    kind: str = "turn"  # turn | chunk | episode | fact | row | memory (a provider's)
    # Memory nodes the item came from (chunk, fact, episode or a plug-in's own ids): their
    # provenance edges add the turns they came from to `turn_ids` (`retrieve.provenance`).
    node_ids: list[str] = Field(default_factory=list)


class QueryRecord(BaseModel):
    """A query the retriever ran against the graph (full-text or Cypher)."""

    model_config = ConfigDict(extra="forbid")

    query: str
    params: dict = Field(default_factory=dict)
    rows: int | None = None
    error: str | None = None
    truncated: bool = False
    latency_ms: float | None = None


class QuestionRetrieval(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question_id: str
    tier: int = 1
    scope: str  # question | batch
    retriever: str
    items: list[RetrievedItem]  # rank order
    retrieval_context: list[str]  # the exact strings handed to the reader
    answer: str | None  # None: no answer was produced (an error), never ""
    reader: str  # e.g. "offline:extractive" or "openai:gpt-4o-mini"
    queries: list[QueryRecord] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)  # the system under test's own failures
    notes: list[str] = Field(default_factory=list)  # e.g. "no match: ..." (never silent)
    # The pipeline's own failures (graph server, LLM cache, provider): the question is
    # unscored, never a miss.
    infra_failures: list[InfraFailure] = Field(default_factory=list)
    retrieval_latency_ms: float | None = None
    reader_latency_ms: float | None = None
    payload_tokens: int | None = None  # of retrieval_context, pinned tokenizer
    # Whether the prompt the reader sent held the question date (protocol check
    # `protocol_reader_date`); None: the reader sent no prompt, or reported none.
    reader_saw_date: bool | None = None

    @property
    def retrieved_turn_ids(self) -> list[str]:
        """Turn ids in rank order, first occurrence kept."""
        seen: dict[str, None] = {}
        for item in self.items:
            for tid in item.turn_ids:
                seen.setdefault(tid, None)
        return list(seen)

    @property
    def retrieved_session_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for item in self.items:
            for sid in item.session_ids:
                seen.setdefault(sid, None)
        return list(seen)
