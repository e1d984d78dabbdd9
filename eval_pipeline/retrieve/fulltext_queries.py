"""Full-text retrieval statements, and which indexed sources the graph offers.

Everything backend-specific comes from the graph dialect (`eval_pipeline.graph.dialects`): the
CALL clause and its parameters (`Dialect.fulltext_call`, `fulltext_params`), the index names
and which indexes exist (`Dialect.text_indexes`). What this module adds is portable Cypher
around that call: retrieval needs the text, the session, scoping by haystack and the
reconcilers' chunks, facts and episodes, not only the turn ids of `GraphStore.fulltext_search`.
Queries arrive escaped once (`retrieve.terms.or_query`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eval_pipeline.graph import schema
from eval_pipeline.graph.dialects import DIALECTS, Dialect, TextIndex, get_dialect
from eval_pipeline.reconcile import schema as reconcile_schema

BACKENDS = tuple(DIALECTS)

# How many hits the engine is asked for where it takes a limit (Memgraph): for a scoped search
# the haystack filter runs after it, so fetch generously and let the filter and ORDER BY/LIMIT
# do the cutting.
FETCH_LIMIT = 100_000


def dialect_for(backend: str, store: Any = None) -> Dialect:
    """The dialect to build statements with: the store's own (it knows the server's version)
    when it is of `backend`, else `backend`'s, planned for the pinned release."""
    own = getattr(store, "dialect", None)
    if isinstance(own, Dialect) and own.name == backend:
        return own
    try:
        return get_dialect(backend)
    except Exception:
        raise ValueError(
            f"no full-text query for backend {backend!r}; known: {', '.join(BACKENDS)}"
        ) from None


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
    return dialect_for(backend).text_index_name(source.label, source.text_property)


def turn_source(backend: str) -> FulltextSource:
    turn = SOURCE_KINDS[0]
    return FulltextSource(turn, default_index_name(backend, turn))


# --- index discovery ----------------------------------------------------------------------


def sources_from_indexes(indexes: list[TextIndex]) -> list[FulltextSource]:
    """The sources an index covers, in SOURCE_KINDS order (the first covering index wins);
    an index listing no property covers every text property of its label."""
    found: list[FulltextSource] = []
    for source in SOURCE_KINDS:
        for index in indexes:
            if index.covers(source.label, source.text_property):
                found.append(FulltextSource(source, index.name))
                break
    return found


# --- search statements --------------------------------------------------------------------


def search_statement(dialect: Dialect, source: SourceKind, *, scoped: bool) -> str:
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
    return f"{dialect.fulltext_call()}\n{where}{top}{tail}"


def search_params(
    dialect: Dialect,
    source: FulltextSource,
    or_query: str,
    k: int,
    haystack: list[str] | None,
) -> dict[str, Any]:
    params = dialect.fulltext_params(
        source.index, source.source.text_property, or_query, FETCH_LIMIT
    )
    params["k"] = k
    if haystack is not None:
        params["haystack"] = haystack
    return params


HAYSTACK_STATEMENT = (
    f"MATCH (:{schema.QUESTION} {{question_id: $question_id}})-[:{schema.HAYSTACK}]->"
    f"(s:{schema.SESSION}) RETURN s.session_id AS session_id"
)
