"""Full-text search text per backend, and which indexed sources the graph offers.

The graph dialects (`eval_pipeline.graph.dialects`) have a full-text query for turns returning
`turn_id` and `score` only; retrieval needs the text, the session, scoping by haystack and the
reconcilers' chunks, facts and episodes, so those statements live here, keyed by backend:

- ArcadeDB: `CALL db.index.fulltext.queryNodes('<Label>[<prop>]', $query)`, Lucene syntax, no
  implicit result limit (probed: 3,000 matches of one term all come back);
- Memgraph: `CALL text_search.search('<index>', 'data.<prop>:(...)')`, Tantivy syntax; the
  index name is the one the index was created with. Not run here (no Memgraph server): the
  statements follow the graph dialect's and Memgraph's documented form.

Everything after the CALL is portable Cypher.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from eval_pipeline.graph import schema
from eval_pipeline.reconcile import schema as reconcile_schema

ARCADEDB = "arcadedb"
MEMGRAPH = "memgraph"
BACKENDS = (ARCADEDB, MEMGRAPH)

# Memgraph's text search has a result limit of its own; for a scoped search the haystack filter
# runs after it, so fetch generously and let the filter and ORDER BY/LIMIT do the cutting.
MEMGRAPH_FETCH_LIMIT = 100_000


@dataclass(frozen=True)
class SourceKind:
    """A label whose text a full-text index may cover, and how it leads back to turns."""

    kind: str  # the RetrievedItem kind
    label: str
    text_property: str
    id_property: str
    turn_link: str | None  # relationship type from the node to its turns; None: it is a turn


SOURCE_KINDS: tuple[SourceKind, ...] = (
    SourceKind("turn", schema.TURN, "text", "turn_id", None),
    SourceKind("chunk", reconcile_schema.CHUNK, "text", "chunk_id", "FROM_TURN"),
    SourceKind("fact", reconcile_schema.FACT, "text", "fact_id", "FROM_TURN"),
    SourceKind("episode", reconcile_schema.EPISODE, "summary", "episode_id", "COVERS"),
)
KINDS = tuple(s.kind for s in SOURCE_KINDS)


@dataclass(frozen=True)
class FulltextSource:
    """One searchable source: a kind and the backend's name of the index over it."""

    source: SourceKind
    index: str


def default_index_name(backend: str, source: SourceKind) -> str:
    if backend == ARCADEDB:
        return f"{source.label}[{source.text_property}]"  # ArcadeDB names indexes Type[prop]
    if backend == MEMGRAPH:
        from eval_pipeline.graph.dialects.memgraph import TEXT_INDEX_NAME

        return TEXT_INDEX_NAME if source.label == schema.TURN else f"{source.label.lower()}_text"
    raise ValueError(f"no full-text query for backend {backend!r}; known: {', '.join(BACKENDS)}")


def turn_source(backend: str) -> FulltextSource:
    turn = SOURCE_KINDS[0]
    return FulltextSource(turn, default_index_name(backend, turn))


# --- index discovery ----------------------------------------------------------------------

ARCADEDB_LIST_INDEXES = "SHOW INDEXES YIELD name, type, labelsOrTypes, properties"
MEMGRAPH_LIST_INDEXES = "SHOW INDEX INFO"


def sources_from_arcadedb(rows: list[dict[str, Any]]) -> list[FulltextSource]:
    """Sources with a FULLTEXT index, from the rows of ArcadeDB's SHOW INDEXES."""
    found: list[FulltextSource] = []
    for source in SOURCE_KINDS:
        for row in rows:
            kind = str(row.get("type") or "").upper().replace("_", "")
            labels = list(row.get("labelsOrTypes") or [])
            props = list(row.get("properties") or [])
            if kind == "FULLTEXT" and source.label in labels and source.text_property in props:
                found.append(FulltextSource(source, str(row["name"])))
                break
    return found


_MEMGRAPH_TEXT_INDEX = re.compile(r"^text\b.*?name:\s*([^)\s]+)")


def sources_from_memgraph(rows: list[dict[str, Any]]) -> list[FulltextSource]:
    """Sources with a text index, from the rows of Memgraph's SHOW INDEX INFO.

    A text index with no property list covers every text property of its label.
    """
    found: list[FulltextSource] = []
    for source in SOURCE_KINDS:
        for row in rows:
            match = _MEMGRAPH_TEXT_INDEX.match(str(row.get("index type", "")).strip())
            prop = row.get("property")
            props = (
                [str(p) for p in prop]
                if isinstance(prop, list)
                else ([] if not prop else [str(prop)])
            )
            if (
                match
                and row.get("label") == source.label
                and (not props or source.text_property in props)
            ):
                found.append(FulltextSource(source, match.group(1)))
                break
    return found


# --- search statements --------------------------------------------------------------------


def search_call(backend: str, source: SourceKind) -> str:
    """The CALL clause yielding `node, score` for `$index` and `$query`."""
    if backend == ARCADEDB:
        return "CALL db.index.fulltext.queryNodes($index, $query) YIELD node, score"
    if backend == MEMGRAPH:
        return "CALL text_search.search($index, $query, {limit: $fetch}) YIELD node, score"
    raise ValueError(f"no full-text query for backend {backend!r}; known: {', '.join(BACKENDS)}")


def search_text(backend: str, source: SourceKind, or_query: str) -> str:
    """The engine's query string for an already escaped disjunction of terms."""
    if backend == MEMGRAPH:
        return f"data.{source.text_property}:({or_query})"
    return or_query


def search_statement(backend: str, source: SourceKind, *, scoped: bool) -> str:
    """Top `$k` of one source, optionally restricted to sessions in `$haystack`.

    Each row: id, session_id, text, role, timestamp, turn_ids, score. The LIMIT sits before
    the expansion to turns so only k nodes are expanded.
    """
    where = "WITH node, score WHERE node.session_id IN $haystack\n" if scoped else ""
    top = f"WITH node, score ORDER BY score DESC, node.{source.id_property} ASC LIMIT $k\n"
    if source.turn_link is None:
        tail = (
            f"RETURN node.{source.id_property} AS id, node.session_id AS session_id, "
            f"node.{source.text_property} AS text, node.role AS role, "
            "node.timestamp AS timestamp, [node.turn_id] AS turn_ids, score"
        )
    else:
        tail = (
            f"OPTIONAL MATCH (node)-[:{source.turn_link}]->(t:{schema.TURN})\n"
            "WITH node, score, collect(t.turn_id) AS turn_ids, min(t.timestamp) AS timestamp\n"
            f"RETURN node.{source.id_property} AS id, node.session_id AS session_id, "
            f"node.{source.text_property} AS text, null AS role, timestamp, turn_ids, score"
        )
    return f"{search_call(backend, source)}\n{where}{top}{tail}"


def search_params(
    backend: str,
    source: FulltextSource,
    or_query: str,
    k: int,
    haystack: list[str] | None,
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "index": source.index,
        "query": search_text(backend, source.source, or_query),
        "k": k,
    }
    if backend == MEMGRAPH:
        params["fetch"] = MEMGRAPH_FETCH_LIMIT
    if haystack is not None:
        params["haystack"] = haystack
    return params


HAYSTACK_STATEMENT = (
    f"MATCH (:{schema.QUESTION} {{question_id: $question_id}})-[:{schema.HAYSTACK}]->"
    f"(s:{schema.SESSION}) RETURN s.session_id AS session_id"
)
