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

    Each row: id, session_id, text, role, timestamp, turn_ids, score; facts add valid_at,
    invalid_at and superseded_by (current vs history). A scoped fact search also keeps only
    the question's namespace (`$namespace`): a session shared by many haystacks has a
    namespaced fact per user, and a user reads only their own. The LIMIT sits before the
    expansion to turns so only k nodes are expanded.
    """
    where = ""
    if scoped:
        where = "WITH node, score WHERE node.session_id IN $haystack"
        if source.kind == "fact":
            where += " AND (node.namespace IS NULL OR node.namespace = $namespace)"
        where += "\n"
    top = f"WITH node, score ORDER BY score DESC, node.{source.id_property} ASC LIMIT $k\n"
    return f"{dialect.fulltext_call()}\n{where}{top}{_tail(source)}"


def _tail(source: SourceKind) -> str:
    if source.turn_link is None:
        return (
            f"RETURN node.{source.id_property} AS id, node.session_id AS session_id, "
            f"node.{source.text_property} AS text, node.role AS role, "
            "node.timestamp AS timestamp, [node.turn_id] AS turn_ids, score"
        )
    history = (
        ", node.valid_at AS valid_at, node.invalid_at AS invalid_at, "
        "node.superseded_by AS superseded_by"
        if source.kind == "fact"
        else ""
    )
    return (
        f"OPTIONAL MATCH (node)-[:{source.turn_link}]->(t:{schema.TURN})\n"
        "WITH node, score, collect(t.turn_id) AS turn_ids, min(t.timestamp) AS timestamp\n"
        f"RETURN node.{source.id_property} AS id, node.session_id AS session_id, "
        f"node.{source.text_property} AS text, null AS role, timestamp, turn_ids, score"
        f"{history}"
    )


FACT_SOURCE = SOURCE_KINDS[2]
# The successors of superseded facts a search returned: current memory is shown first.
SUCCESSORS_STATEMENT = (
    f"MATCH (node:{reconcile_schema.FACT}) WHERE node.fact_id IN $ids\n"
    "WITH node, null AS score\n" + _tail(FACT_SOURCE)
)


def search_params(
    dialect: Dialect,
    source: FulltextSource,
    or_query: str,
    k: int,
    haystack: list[str] | None,
    namespace: str | None = None,
) -> dict[str, Any]:
    params = dialect.fulltext_params(
        source.index, source.source.text_property, or_query, FETCH_LIMIT
    )
    params["k"] = k
    if haystack is not None:
        params["haystack"] = haystack
        if source.source.kind == "fact":
            params["namespace"] = namespace
    return params


HAYSTACK_STATEMENT = (
    f"MATCH (:{schema.QUESTION} {{question_id: $question_id}})-[:{schema.HAYSTACK}]->"
    f"(s:{schema.SESSION}) RETURN s.session_id AS session_id"
)


# --- bounded search (issue 18) --------------------------------------------------------------
# Common words match most of the corpus (100k+ turns at LongMemEval_S scale), and the unbounded
# CALL loads every matching node before the haystack filter and the LIMIT. Where the dialect
# can bound the call (`Dialect.fulltext_call_bounded`), `search` asks for the best
# FIRST_FETCH hits, keeps the ids and scores of those in scope, and widens by FETCH_GROWTH
# only while they cannot decide the top k; past FETCH_LIMIT it runs `search_statement`
# itself. The rows are the same as `search_statement`'s (`exact_top` says why).
FIRST_FETCH = 4_000
FETCH_GROWTH = 4


def scope_condition(source: SourceKind) -> str:
    """What `search_statement` keeps when scoped, as one boolean expression over `node`."""
    condition = "node.session_id IN $haystack"
    if source.kind == "fact":
        condition += " AND (node.namespace IS NULL OR node.namespace = $namespace)"
    return condition


def candidates_statement(dialect: Dialect, source: SourceKind, *, scoped: bool) -> str | None:
    """One row: how many hits the bounded call returned (`fetched`), the lowest score among
    them (`floor`) and `[id, score]` of those in scope (`inside`); None without a bounded
    call."""
    call = dialect.fulltext_call_bounded()
    if call is None:
        return None
    keep = scope_condition(source) if scoped else "true"
    return (
        f"{call}\n"
        "WITH count(node) AS fetched, min(score) AS floor, "
        f"collect(CASE WHEN {keep} THEN [node.{source.id_property}, score] END) AS inside\n"
        "RETURN fetched, floor, inside"
    )


def exact_top(row: dict[str, Any], k: int, fetch: int) -> list[dict[str, Any]] | None:
    """The top k `{id, score}` in `search_statement`'s order (score descending, then id), or
    None when the `fetch` best hits cannot decide it. They can when the call returned fewer
    than `fetch` hits (every hit was seen), or when the k-th hit in scope scores strictly above
    the lowest fetched score: any hit not fetched scores at most that, so it can neither
    enter the top k nor tie with its last member."""
    inside = [pair for pair in row.get("inside") or [] if pair and pair[0] is not None]
    picked = sorted(
        ({"id": pair[0], "score": float(pair[1])} for pair in inside),
        key=lambda p: (-p["score"], str(p["id"])),
    )
    if int(row.get("fetched") or 0) < fetch:
        return picked[:k]
    if len(picked) >= k and picked[k - 1]["score"] > float(row["floor"]):
        return picked[:k]
    return None


def picked_statement(source: SourceKind) -> str:
    """The rows of `search_statement` for nodes already picked (`$picked`: id and score)."""
    return (
        f"UNWIND $picked AS p MATCH (node:{source.label} {{{source.id_property}: p.id}})\n"
        f"WITH node, p.score AS score ORDER BY score DESC, node.{source.id_property} ASC\n"
        + _tail(source)
    )


# --- in-haystack ranking (issue 29) -------------------------------------------------------
# Ranking `haystack` does not ask the engine: it reads the id and text of every node of one
# source in the question's haystack (from the question, through its sessions: every index
# used is the question id's) and ranks them itself (`retrieve.haystack_bm25`); then
# `picked_statement` gives the same rows as the engine path. Facts keep the namespace rule.
SESSION_LINKS: dict[str, str] = {
    "turn": schema.HAS_TURN,
    "chunk": "HAS_CHUNK",
    "fact": "HAS_FACT",
    "episode": "HAS_EPISODE",
}


def haystack_documents_statement(source: SourceKind) -> str:
    """One row, `docs`: `[id, text]` of every node of `source` in `$question_id`'s haystack
    (facts: of `$namespace` or of none); turns add session_id, role and timestamp (the rest
    of `search_statement`'s row), so their top k needs no second read. One row of lists, not
    a row per node: the driver decodes it in half the time (probed on ArcadeDB, ~480 turns:
    38 ms against 78 ms at the median); a list keeps its nulls, so fields stay in step."""
    keep = ""
    if source.kind == "fact":
        keep = "WHERE node.namespace IS NULL OR node.namespace = $namespace\n"
    fields = [f"node.{source.id_property}", f"node.{source.text_property}"]
    if source.turn_link is None:
        fields += ["node.session_id", "node.role", "node.timestamp"]
    return (
        f"MATCH (:{schema.QUESTION} {{question_id: $question_id}})-[:{schema.HAYSTACK}]->"
        f"(:{schema.SESSION})-[:{SESSION_LINKS[source.kind]}]->(node:{source.label})\n"
        f"{keep}"
        "WITH DISTINCT node\n"
        f"RETURN collect([{', '.join(fields)}]) AS docs"
    )


HAYSTACK_DOC_FIELDS = ("id", "text", "session_id", "role", "timestamp")


# (statement, params, max_rows) -> rows: the retriever's guarded, traced read.
Read = Any


def search(
    read: Read,
    dialect: Dialect,
    source: FulltextSource,
    or_query: str,
    k: int,
    haystack: list[str] | None,
    namespace: str | None = None,
) -> list[dict]:
    """The rows `search_statement` gives for this source, query, k and scope, through the
    bounded call where the dialect has one."""
    scoped = haystack is not None
    params = search_params(dialect, source, or_query, k, haystack, namespace=namespace)
    bounded = candidates_statement(dialect, source.source, scoped=scoped)
    fetch = FIRST_FETCH
    while bounded is not None and fetch < FETCH_LIMIT:
        rows = read(bounded, {**params, "fetch": fetch}, 1)
        if not rows:  # an aggregate always has its row; without it, trust nothing
            break
        picked = exact_top(rows[0], k, fetch)
        if picked is not None:
            if not picked:
                return []
            return read(picked_statement(source.source), {"picked": picked}, k)
        fetch *= FETCH_GROWTH
    return read(search_statement(dialect, source.source, scoped=scoped), params, k)
