"""The graph schema reconcilers write, on top of the injected schema (`eval_pipeline.graph`).

Version RECONCILE_SCHEMA_VERSION. Every node a reconciler writes carries `reconciler` (the
reconciler's name) so retrieval can tell the distilled layer from the raw turns; nothing here
copies evidence markers (`has_answer`, `holds_evidence`, answer session ids) — the reconciler
only ever sees what the injected graph holds, and the writer only writes the fields below.

    (:Session {session_id, ..., reconcile_status, reconcile_error, reconciler,
               reconciler_version, reconcile_schema, reconcile_pins})
        reconcile_status: "pending" (written by injection) → "done" | "failed"
        reconcile_error:  the reason when "failed", else null
        reconcile_pins:   `pins_key` of the configuration that reconciled it; a run under
                          other pins redoes the session (its old memory removed first)

    (:EvalPipelineMemory {pins_key, pins, recorded_at})
        one node per reconciler configuration whose memory is in the graph: `pins` is the
        JSON of its pins, so the graph itself says what produced its memory

    (:Session)-[:HAS_CHUNK]->(:Chunk {chunk_id, session_id, index, text, reconciler})
    (:Chunk)-[:FROM_TURN]->(:Turn)                 the turn(s) the chunk's text came from
    (:Chunk)-[:MENTIONS]->(:Entity)

    (:Entity {key, name, type, reconciler})        shared across sessions, one node per `key`
        key:  "<type>:<normalised name>" (see `entity_key`), unique
        type: person | place | organisation | product | quantity | date | other

    (:Session)-[:HAS_FACT]->(:Fact {fact_id, session_id, text, fact_type, valid_at,
                                    reconciler})
    (:Fact)-[:FROM_TURN]->(:Turn)                  the turns that state the fact
    (:Fact)-[:ABOUT]->(:Entity)
        valid_at: the session's start (ISO 8601, naive, as the injected `started_at`)

    (:Session)-[:HAS_EPISODE]->(:Episode {episode_id, session_id, summary, started_at,
                                          reconciler})
    (:Episode)-[:COVERS]->(:Turn)                  every turn of the session

Namespaced memory (the `consolidating` reconciler; `namespace_graph` has the details):
Entity and Fact nodes with a `namespace` (one user's history, or tier 2's organisation),
Fact.invalid_at / Fact.superseded_by with (:Fact)-[:SUPERSEDED_BY]->(:Fact), and one
(:MemoryNamespace {namespace, pins_key, sessions, ...}) per consolidated namespace.
Session-level reconcilers leave `namespace` unset.

Indexes: unique on Entity.key, Chunk.chunk_id, Fact.fact_id, Episode.episode_id; full-text
on Chunk.text, Fact.text and Episode.summary (see FULLTEXT).

Ids: `<session_id>#chunk<n>`, `<session_id>#fact<n>`, `<session_id>#episode` (a turn id is
`<session_id>#<index>`, so the namespaces never collide). Property values are scalars or lists
of scalars only: ArcadeDB refuses map-valued properties, so anything structured is JSON text.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from eval_pipeline.graph import schema as graph_schema

# 2: namespaces (per-user / per-organisation entities and facts, `MemoryNamespace`), facts
# with invalid_at / superseded_by and SUPERSEDED_BY edges (see `namespace_graph`).
RECONCILE_SCHEMA_VERSION = 2

# Labels and relationship types this stage creates (the graph wipe removes them all).
MEMORY = graph_schema.MEMORY  # bookkeeping: which configurations made the graph's memory
CHUNK = "Chunk"
ENTITY = "Entity"
FACT = "Fact"
EPISODE = "Episode"
NAMESPACE = "MemoryNamespace"  # what a namespace's consolidation covered (namespace_graph)
NODE_LABELS: tuple[str, ...] = (CHUNK, ENTITY, FACT, EPISODE, NAMESPACE)
RELATIONSHIP_TYPES: tuple[str, ...] = (
    "HAS_CHUNK",
    "FROM_TURN",
    "MENTIONS",
    "HAS_FACT",
    "ABOUT",
    "HAS_EPISODE",
    "COVERS",
    "SUPERSEDED_BY",
)
# The provenance edge of each memory label: node → the turns it came from.
PROVENANCE: dict[str, str] = {CHUNK: "FROM_TURN", FACT: "FROM_TURN", EPISODE: "COVERS"}

# Values of Session.reconcile_status.
PENDING = "pending"
DONE = "done"
FAILED = "failed"
STATUSES: tuple[str, ...] = (PENDING, DONE, FAILED)

# Indexed properties: (label, property, unique). Entity.key must be unique, because a MERGE
# without a unique constraint duplicates nodes under concurrency on ArcadeDB.
INDEXES: tuple[tuple[str, str, bool], ...] = (
    (ENTITY, "key", True),
    (CHUNK, "chunk_id", True),
    (FACT, "fact_id", True),
    (EPISODE, "episode_id", True),
    (ENTITY, "namespace", False),
    (FACT, "namespace", False),
    (NAMESPACE, "namespace", False),
)

# Full-text indexes over the distilled text, created after a run for labels that have nodes
# (retrieval discovers them by label and property: ArcadeDB names them `Label[prop]`,
# Memgraph's are named `<label>_text`).
FULLTEXT: tuple[tuple[str, str], ...] = ((CHUNK, "text"), (FACT, "text"), (EPISODE, "summary"))

# Never written by any reconciler (the graph's evidence-leak check looks for them too).
EVIDENCE_MARKERS: frozenset[str] = frozenset(
    {"has_answer", "holds_evidence", "answer_session_ids", "evidence", "is_evidence"}
)


def pins_key(pins: dict[str, Any]) -> str:
    """A short stable name for a reconciler configuration (its pins), stored on every session
    it reconciled: memory made under other pins is redone, never kept."""
    canonical = json.dumps(
        {"pins": pins, "reconcile_schema": RECONCILE_SCHEMA_VERSION},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def chunk_id(session_id: str, n: int) -> str:
    return f"{session_id}#chunk{n}"


def fact_id(session_id: str, n: int) -> str:
    return f"{session_id}#fact{n}"


def episode_id(session_id: str) -> str:
    return f"{session_id}#episode"
