"""Memgraph over Bolt: production (`memgraph/memgraph-mage`, pinned in docker-compose.yml).

Memgraph cannot run where this was written (no Docker engine, no package): every statement and
output shape below was read from Memgraph's source and tests (`memgraph/memgraph`) and docs
(`memgraph/documentation`); the tests quote each source (eval_pipeline_tests/graph/
test_memgraph_statements.py), and the conformance suite checks them against a live server
wherever one exists (EVAL_TEST_MEMGRAPH_URI). What differs by release is decided once per
server from `SHOW VERSION` (`on_connect`):

- supported: 3.5 and later (`CREATE TEXT INDEX` exists from 3.5; before 3.6 it also needs
  `--experimental-enabled=text-search`); an older server is refused with one line;
- `text_search.search`: two arguments (index, query) yielding `node` only up to 3.5 (a rank
  stands in for the score: hits come back best first); from 3.6 an Int limit as third
  argument and a `score` column; from 3.11 a config map (`{limit: n}`) instead;
- `SHOW INDEX INFO` (`index type, label, property, count`): text indexes are
  `label_text (name: x)` / `edge-type_text (name: x)` from 3.6 and `text (name: x)` before;
  vector indexes `label+property_vector` / `edge-type+property_vector`;
- `CREATE TEXT INDEX name ON :Label(prop)` from 3.6; before that `ON :Label` (every text
  property; the query's `data.<prop>:` prefix still picks the field);
- storage mode from `SHOW STORAGE INFO` (`storage info, value`, key `storage_mode`): in
  `IN_MEMORY_ANALYTICAL` there are no transactions, so reconciliation (one transaction per
  session) is refused there (`require_transactions`);
- one database per instance on community (multi-database is Enterprise-only): the project's
  default database name maps to Memgraph's default and is not sent;
- wipe = triggers dropped first, batched DETACH DELETE (DROP GRAPH needs analytical mode),
  then every index and constraint SHOW INDEX INFO / SHOW CONSTRAINT INFO list;
- "empty" = no node, relationship, index, constraint or trigger (the SHOW queries run only in
  auto-commit transactions);
- agent reads carry `QUERY MEMORY LIMIT n MB` (`bound_read`), and a read still running at its
  timeout is terminated (`SHOW TRANSACTIONS`, `TERMINATE TRANSACTIONS 'id'`); the server's
  own `--query-execution-timeout-sec` and `--memory-limit` (docker-compose.yml) are the
  backstop;
- a timed-out read is found by its id in the transaction's metadata (`Dialect.mark_read`: Bolt
  BEGIN's `tx_metadata`, which SHOW TRANSACTIONS lists in its `metadata` column, 3.10.1
  `src/glue/SessionHL.cpp` ToQueryExtras, `src/query/interpreter.cpp` ShowTransactions), not
  by a comment in its text: EXPLAIN and PROFILE re-parse `query_string.substr(8)`, the raw
  text after its first 8 characters (`interpreter.cpp`), so a leading comment breaks them;
- SHOW SCHEMA INFO (needs --schema-info-enabled=True) runs only in auto-commit; without it the
  portable scans answer;
- maps and nested lists are valid property values: no encoding needed.

The statement builders are plain functions (and a dialect made with a `version`) so they are
tested without a server.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import Any

from eval_pipeline.graph import schema
from eval_pipeline.graph.dialects.base import (
    READ_MARK_KEY,
    Dialect,
    Inventory,
    TextIndex,
    VectorIndex,
    listing,
    quote_name,
)
from eval_pipeline.graph.dialects.store_protocol import DialectStore
from eval_pipeline.graph.errors import GraphError, GraphQueryError

log = logging.getLogger(__name__)

TEXT_INDEX_NAME = "turn_text"
# Names that mean "the default database" here: community edition has no other.
DEFAULT_DATABASE_NAMES = frozenset({"", "eval", "memgraph"})

Version = tuple[int, int, int]
MIN_VERSION: Version = (3, 5, 0)
PINNED_VERSION: Version = (3, 10, 1)  # docker-compose.yml, the CI workflow and the docs
TEXT_SEARCH_SCORE_SINCE: Version = (3, 6, 0)  # score column, Int limit, label_text rows
TEXT_SEARCH_CONFIG_SINCE: Version = (3, 11, 0)  # {limit: n} config map replaces the Int
TEXT_INDEX_PROPERTIES_SINCE: Version = (3, 6, 0)
ANALYTICAL = "IN_MEMORY_ANALYTICAL"
# Per agent query (`QUERY MEMORY LIMIT`): well under docker-compose.yml's --memory-limit.
READ_MEMORY_LIMIT_MB = 1024
# std::to_string of a uint64 (TERMINATE TRANSACTIONS parses it back with stoul).
_TRANSACTION_ID = re.compile(r"[0-9]{1,20}")
_TEXT_KINDS = frozenset({"text", "label_text"})


def parse_version(text: str) -> Version | None:
    """(3, 10, 1) from SHOW VERSION's `version` ("3.10.1"; a suffix such as "-rc1" or
    "+12~abc" is ignored); None for anything else."""
    match = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if not match:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def version_text(version: Version) -> str:
    return ".".join(str(v) for v in version)


def storage_mode(rows: list[dict[str, Any]]) -> str | None:
    """The `storage_mode` value among SHOW STORAGE INFO's rows (`storage info`, `value`)."""
    for row in rows:
        if row.get("storage info") == "storage_mode":
            return str(row.get("value"))
    return None


def _props(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]


def create_index_statements(
    pairs: Iterable[tuple[str, str]] = schema.PROPERTY_INDEXES,
) -> list[str]:
    return [f"CREATE INDEX ON :{quote_name(label)}({quote_name(prop)})" for label, prop in pairs]


def reconcile_index_statements(indexes: Iterable[tuple[str, str, bool]]) -> list[str]:
    """Memgraph has no IF NOT EXISTS here: an existing index or constraint is refused with
    "already exists", which the caller takes for done."""
    out: list[str] = []
    for label, prop, unique in indexes:
        out.append(f"CREATE INDEX ON :{quote_name(label)}({quote_name(prop)})")
        if unique:
            out.append(
                f"CREATE CONSTRAINT ON (n:{quote_name(label)}) ASSERT n.{quote_name(prop)} "
                "IS UNIQUE"
            )
    return out


def text_index_name(label: str, prop: str) -> str:
    """`turn_text` for turns (the name injection has always used), `<label>_<prop>` else."""
    if (label, prop) == schema.FULLTEXT_PROPERTY:
        return TEXT_INDEX_NAME
    return f"{label.lower()}_{prop}"


def create_text_index_statement(
    name: str = TEXT_INDEX_NAME,
    label: str | None = None,
    prop: str | None = None,
    version: Version = PINNED_VERSION,
) -> str:
    if label is None or prop is None:
        label, prop = schema.FULLTEXT_PROPERTY
    on = f":{quote_name(label)}"
    if version >= TEXT_INDEX_PROPERTIES_SINCE:
        on += f"({quote_name(prop)})"
    return f"CREATE TEXT INDEX {quote_name(name)} ON {on}"


def drop_text_index_statement(name: str) -> str:
    return f"DROP TEXT INDEX {quote_name(name)}"


def text_search_call(version: Version = PINNED_VERSION) -> str:
    """The CALL clause yielding `node, score` for `$index`, `$query` (and `$fetch`) on a
    server of `version`."""
    if version >= TEXT_SEARCH_CONFIG_SINCE:
        return "CALL text_search.search($index, $query, {limit: $fetch}) YIELD node, score"
    if version >= TEXT_SEARCH_SCORE_SINCE:
        return "CALL text_search.search($index, $query, $fetch) YIELD node, score"
    # Two arguments and no score: the rank in the engine's (best-first) order stands in.
    return (
        "CALL text_search.search($index, $query) YIELD node\n"
        "WITH collect(node) AS hits\n"
        "UNWIND range(0, size(hits) - 1) AS rank\n"
        "WITH hits[rank] AS node, 1.0 / (1 + rank) AS score"
    )


_NAMED_INDEX = re.compile(r"^(?P<kind>[\w+\-]+)\s*\(name:\s*(?P<name>[^)]+?)\s*\)")


def _index_kind(row: dict[str, Any]) -> tuple[str, str | None]:
    """(kind, name) of a SHOW INDEX INFO row: `label_text (name: x)` -> ("label_text", "x");
    `label+property` -> ("label+property", None)."""
    kind = str(row.get("index type", "")).strip()
    named = _NAMED_INDEX.match(kind)
    if named:
        return named.group("kind"), named.group("name")
    return re.sub(r"\s*\(.*\)$", "", kind), None


def text_indexes_from_rows(rows: list[dict[str, Any]]) -> list[TextIndex]:
    """The text indexes on labels among SHOW INDEX INFO rows (`label_text (name: x)` since
    3.6, `text (name: x)` before); `property` [] or NULL: every text property."""
    found = []
    for row in rows:
        kind, name = _index_kind(row)
        if name and kind in _TEXT_KINDS and row.get("label"):
            found.append(TextIndex(name, str(row["label"]), tuple(_props(row.get("property")))))
    return found


def _property_path(name: str) -> str:
    """A listed property (`a` or a nested path `a.b`, as SHOW INDEX INFO prints one) in the
    grammar's `nestedPropertyKeyNames` form: each part quoted."""
    return ".".join(quote_name(part) for part in name.split("."))


def drop_index_statements(rows: list[dict[str, Any]]) -> list[str]:
    """DROP statements for the rows of SHOW INDEX INFO (columns `index type`, `label`,
    `property`; text indexes name themselves: `label_text (name: x)`), once each.

    Vector index rows (`label+property_vector`, `edge-type+property_vector`) carry no name
    there (src/query/interpreter.cpp @ v3.10.1): they are dropped by name from SHOW VECTOR
    INDEX INFO instead (`drop_vector_index_statements`). `label+property (DESC)` is dropped
    with the ascending one by the same DROP INDEX (an order left out drops both)."""
    out: list[str] = []
    for row in rows:
        kind, name = _index_kind(row)
        label = row.get("label")
        props = _props(row.get("property"))
        cols = f"({', '.join(_property_path(p) for p in props)})" if props else ""
        if name and kind in {"text", "label_text", "edge-type_text"}:
            stmt = drop_text_index_statement(name)
        elif "vector" in kind:
            continue
        elif kind == "edge-property" and props:
            stmt = f"DROP GLOBAL EDGE INDEX ON :({quote_name(props[0])})"
        elif kind.startswith("edge-type") and label:
            stmt = f"DROP EDGE INDEX ON :{quote_name(str(label))}{cols}"
        elif kind.startswith("label") and label:
            stmt = f"DROP INDEX ON :{quote_name(str(label))}{cols}"
        elif kind == "point" and label and props:
            stmt = f"DROP POINT INDEX ON :{quote_name(str(label))}({quote_name(props[0])})"
        else:
            continue
        if stmt not in out:
            out.append(stmt)
    return out


# VectorIndexConfigFromTypedMap: `static_cast<std::uint16_t>(dimension)` (src/query/interpreter.cpp
# @ v3.10.1).
MAX_VECTOR_DIMENSION = 65_535


def vector_index_name(label: str, prop: str) -> str:
    return f"{label.lower()}_{prop}"


def create_vector_index_statement(
    name: str, label: str, prop: str, dims: int, capacity: int
) -> str:
    """`createVectorIndex : CREATE VECTOR INDEX indexName ON ':' labelName '(' propertyKeyName
    ')' WITH CONFIG configsMap` (MemgraphCypher.g4 @ v3.10.1); `dimension` and `capacity` are
    mandatory, `metric` defaults to l2sq, "cos" is cosine (VectorIndexConfigFromTypedMap,
    src/query/interpreter.cpp; MetricFromName, src/storage/v2/indices/vector_index_utils.hpp
    @ v3.10.1). The capacity grows on demand by `resize_coefficient` (default 2). The keys are
    string literals because the grammar's `configKeyValuePair` is `literal ':' ( literal |
    parameter )`. The server casts the dimension to a uint16 (`VectorIndexConfigFromTypedMap`):
    a larger one would wrap silently into another index, so it is refused here."""
    if not 0 < int(dims) <= MAX_VECTOR_DIMENSION:
        raise GraphError(
            f"a Memgraph vector index holds 1 to {MAX_VECTOR_DIMENSION} dimensions, not {dims}"
        )
    config = f'{{"dimension": {int(dims)}, "capacity": {max(int(capacity), 1)}, "metric": "cos"}}'
    return (
        f"CREATE VECTOR INDEX {quote_name(name)} ON :{quote_name(label)}({quote_name(prop)}) "
        f"WITH CONFIG {config}"
    )


def vector_indexes_from_rows(rows: list[dict[str, Any]]) -> list[VectorIndex]:
    """Node vector indexes among SHOW VECTOR INDEX INFO rows (columns index_name, label,
    property, capacity, dimension, metric, size, scalar_kind, index_type; edge indexes are
    listed there too, with an edge type as `label`: src/query/interpreter.cpp @ v3.10.1)."""
    found = []
    for row in rows:
        if "edge" in str(row.get("index_type") or "").lower():
            continue
        if not (row.get("index_name") and row.get("label") and row.get("property")):
            continue
        dims = row.get("dimension")
        found.append(
            VectorIndex(
                str(row["index_name"]),
                str(row["label"]),
                str(row["property"]),
                int(dims) if dims is not None else None,
            )
        )
    return found


def drop_vector_index_statements(rows: list[dict[str, Any]]) -> list[str]:
    """`DROP VECTOR INDEX name` for each row of SHOW VECTOR INDEX INFO (columns `index_name`,
    `label`, `property`, ..., `index_type`; src/query/interpreter.cpp @ v3.10.1). The one
    statement drops node and edge vector indexes alike (`dropVectorIndex : DROP VECTOR INDEX
    indexName`, MemgraphCypher.g4 @ v3.10.1; InMemoryAccessor::DropVectorIndex tries both)."""
    names = sorted({str(r["index_name"]) for r in rows if r.get("index_name")})
    return [f"DROP VECTOR INDEX {quote_name(name)}" for name in names]


def drop_trigger_statements(rows: list[dict[str, Any]]) -> list[str]:
    """DROP statements for the rows of SHOW TRIGGERS."""
    return [f"DROP TRIGGER {quote_name(name)}" for name in trigger_names(rows)]


def index_names(rows: list[dict[str, Any]]) -> list[str]:
    """One stable name per SHOW INDEX INFO row (its changing `count` left out)."""
    names = []
    for row in rows:
        kind = str(row.get("index type", "")).strip()
        label = row.get("label")
        props = ", ".join(_props(row.get("property")))
        on = f":{label}" if label else ""
        names.append(f"{kind} {on}({props})" if props else f"{kind} {on}".strip())
    return sorted(names)


def constraint_names(rows: list[dict[str, Any]]) -> list[str]:
    """One stable name per SHOW CONSTRAINT INFO row."""
    names = []
    for row in rows:
        kind = str(row.get("constraint type", "")).strip()
        props = ", ".join(_props(row.get("properties")))
        typed = f" {row['data_type']}" if row.get("data_type") else ""
        names.append(f"{kind} :{row.get('label')}({props}){typed}")
    return sorted(names)


def trigger_names(rows: list[dict[str, Any]]) -> list[str]:
    """The names in SHOW TRIGGERS rows (column `trigger name`)."""
    return sorted(str(r["trigger name"]) for r in rows if r.get("trigger name"))


def drop_constraint_statements(rows: list[dict[str, Any]]) -> list[str]:
    """DROP statements for the rows of SHOW CONSTRAINT INFO."""
    out: list[str] = []
    for row in rows:
        kind = str(row.get("constraint type", "")).lower()
        label = quote_name(str(row.get("label")))
        props = _props(row.get("properties"))
        if not props:
            continue
        if kind == "exists":
            out.append(f"DROP CONSTRAINT ON (n:{label}) ASSERT EXISTS (n.{quote_name(props[0])})")
        elif kind == "unique":
            cols = ", ".join(f"n.{quote_name(p)}" for p in props)
            out.append(f"DROP CONSTRAINT ON (n:{label}) ASSERT {cols} IS UNIQUE")
        elif kind in {"data_type", "data type"} and row.get("data_type"):
            out.append(
                f"DROP CONSTRAINT ON (n:{label}) ASSERT n.{quote_name(props[0])} "
                f"IS TYPED {typed_constraint_keyword(str(row['data_type']))}"
            )
    return out


# SHOW CONSTRAINT INFO prints a type constraint's kind with `TypeConstraintKindToString`
# (src/storage/v2/constraints/type_constraints_kind.hpp @ v3.10.1), but DROP CONSTRAINT ...
# IS TYPED takes the grammar's keyword (`typeConstraintType`, src/query/frontend/opencypher/
# grammar/MemgraphCypher.g4 @ v3.10.1). Every one of the 13 kinds, printed -> keyword; nine
# are spelled alike.
TYPED_CONSTRAINT_KEYWORDS: dict[str, str] = {
    "STRING": "STRING",
    "BOOL": "BOOLEAN",
    "INTEGER": "INTEGER",
    "FLOAT": "FLOAT",
    "LIST": "LIST",
    "MAP": "MAP",
    "DURATION": "DURATION",
    "DATE": "DATE",
    "LOCAL TIME": "LOCALTIME",
    "LOCAL DATE TIME": "LOCALDATETIME",
    "ZONED DATE TIME": "ZONEDDATETIME",
    "ENUM": "ENUM",
    "POINT": "POINT",
}


def typed_constraint_keyword(printed: str) -> str:
    """The IS TYPED keyword for a `data_type` as SHOW CONSTRAINT INFO prints it; a kind this
    table does not know is refused in one line (sending it would make the wipe raise midway)."""
    keyword = TYPED_CONSTRAINT_KEYWORDS.get(" ".join(printed.upper().split()))
    if keyword is None:
        raise GraphError(
            f"Memgraph lists a type constraint of kind {printed!r} that eval_pipeline cannot "
            f"drop (known: {', '.join(TYPED_CONSTRAINT_KEYWORDS)})"
        )
    return keyword


def inventory_from_rows(
    counted: Inventory,
    indexes: list[dict[str, Any]],
    constraints: list[dict[str, Any]],
    triggers: list[dict[str, Any]],
) -> Inventory:
    """`counted` (nodes and relationships) completed with the rows of SHOW INDEX INFO, SHOW
    CONSTRAINT INFO and SHOW TRIGGERS: then nothing Memgraph holds is left out."""
    return counted.model_copy(
        update={
            "complete": True,
            "indexes": index_names(indexes),
            "constraints": constraint_names(constraints),
            "triggers": trigger_names(triggers),
        }
    )


# Memgraph's lexer, as far as the tail of a statement needs it (CypherLexer.g4 and the
# pre-lexer src/query/frontend/stripped.cpp @ v3.10.1): strings with backslash escapes,
# backtick names (a doubled backtick inside), `/* */` and `//` comments, words, integers.
_TAIL_TOKEN = re.compile(
    r"(?P<space>\s+)"
    r"|(?P<comment>/\*.*?\*/|//[^\n]*)"
    r"|(?P<string>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<name>(?:`[^`]*`)+)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<number>[0-9]+)"
    r"|(?P<other>.)",
    re.DOTALL,
)
_MEMORY_SCALE = {"KB": 1024, "MB": 1024 * 1024}


def _check_comment(query: str, start: int, end: int) -> None:
    # The pre-lexer ends a `//` comment at LF or CRLF only and stops at a lone CR, where the
    # ANTLR lexer ends it: text whose code the two would read differently is not guessed at.
    if query.startswith("//", start) and re.search(r"\r(?!\n)", query[start : end + 1]):
        raise GraphQueryError(
            f"cannot bound this read: the // comment at offset {start} contains a lone "
            "carriage return"
        )


def _code_tokens(query: str) -> list[tuple[str, str, int]]:
    """(kind, upper-cased text, offset) of each code token of `query` (a string or a name is
    one token; spaces and comments none); GraphQueryError for text this cannot read
    as Memgraph does (unterminated quotes or comments, a lone CR ending a `//` comment)."""
    tokens: list[tuple[str, str, int]] = []
    for match in _TAIL_TOKEN.finditer(query):
        kind, text = match.lastgroup or "other", match.group()
        if kind == "space":
            continue
        if kind == "comment":
            _check_comment(query, match.start(), match.end())
            continue  # whitespace to the server
        if kind == "other" and (text in "'\"`" or query.startswith("/*", match.start())):
            raise GraphQueryError(
                f"cannot bound this read: an unterminated quote or comment at offset "
                f"{match.start()}"
            )
        tokens.append((kind, text.upper(), match.start()))
    return tokens


def _own_memory_clause(tokens: list[tuple[str, str, int]]) -> tuple[int, int | None] | None:
    """(offset, bytes or None for UNLIMITED) of a `QUERY MEMORY ...` clause ending the
    statement (`cypherQuery : ... ( queryMemoryLimit )?`, `queryMemoryLimit : QUERY
    memoryLimit`, `memoryLimit : MEMORY ( UNLIMITED | LIMIT literal ( MB | KB ) )`:
    Cypher.g4 @ v3.10.1); None when the statement does not end with one. A limit that is
    not a plain integer counts as no limit (ours replaces it)."""
    while tokens and tokens[-1][1] == ";":
        tokens = tokens[:-1]
    words = [text for _, text, _ in tokens[-5:]]
    if words[-3:-1] == ["QUERY", "MEMORY"] and words[-1] == "UNLIMITED":
        return tokens[-3][2], None
    if words[-5:-2] == ["QUERY", "MEMORY", "LIMIT"] and words[-1] in _MEMORY_SCALE:
        amount = tokens[-2]
        size = int(amount[1]) * _MEMORY_SCALE[words[-1]] if amount[0] == "number" else None
        return tokens[-5][2], size
    return None


def bound_read(query: str, memory_mb: int = READ_MEMORY_LIMIT_MB) -> str:
    """`query` ending with a per-query memory limit (`QUERY MEMORY LIMIT n MB|KB`, the last
    clause of a Cypher query), on a line of its own so a trailing `//` comment cannot swallow
    it. The bound always holds: a read that ends with its own clause has it replaced (by its
    own limit when that is tighter, by ours otherwise: UNLIMITED included), and whatever the
    text says elsewhere (a string literal, a comment, a subquery's clause, which the server
    ignores) leaves ours in place. Only the top-level clause counts at v3.10.1
    (`cypher_query->memory_limit_`, src/query/interpreter.cpp); a second one would not parse."""
    ours = int(memory_mb) * _MEMORY_SCALE["MB"]
    tokens = _code_tokens(query)
    own = _own_memory_clause(tokens)
    text = query
    limit = ours
    if own is not None:
        offset, size = own
        text = query[:offset]
        if size is not None and 0 < size < ours:
            limit = size
    text = text.rstrip().rstrip(";").rstrip()
    if limit % _MEMORY_SCALE["MB"] == 0:
        return f"{text}\nQUERY MEMORY LIMIT {limit // _MEMORY_SCALE['MB']} MB"
    return f"{text}\nQUERY MEMORY LIMIT {-(-limit // _MEMORY_SCALE['KB'])} KB"


# SHOW TRANSACTIONS' `status` (TransactionStatusToString, src/query/interpreter.cpp @
# v3.10.1): "running" is the only state a kill can still stop; a terminated transaction is no
# longer listed (TryAcquireForVerification lists running, committing and aborting ones only).
RUNNING = "running"


def transactions_running(
    rows: list[dict[str, Any]], query: str, read_id: str | None = None
) -> list[str]:
    """Ids of the SHOW TRANSACTIONS rows (`username, transaction_id, query, status,
    metadata` at v3.10.1; `query` the transaction's statements, a list) of the read `read_id`
    (its metadata, `Dialect.mark_read`), or, without an id, running `query`. A row without
    `status` (an older server) counts as running; a snapshot's synthetic row
    (`transaction_id` "snapshot") is no transaction of ours."""
    wanted = query.strip()
    ids = []
    for row in rows:
        if str(row.get("status") or RUNNING) != RUNNING:
            continue
        texts = row.get("query")
        texts = texts if isinstance(texts, list) else [texts]
        metadata = row.get("metadata")
        if read_id is not None:
            found = isinstance(metadata, dict) and metadata.get(READ_MARK_KEY) == read_id
        else:
            found = any(str(t).strip() == wanted for t in texts if t is not None)
        if found:
            tid = str(row.get("transaction_id") or "")
            if _TRANSACTION_ID.fullmatch(tid):
                ids.append(tid)
    return ids


def still_running(rows: list[dict[str, Any]], transaction_ids: list[str]) -> set[str]:
    """Which of `transaction_ids` SHOW TRANSACTIONS still lists as running."""
    wanted = set(transaction_ids)
    return {
        str(r.get("transaction_id"))
        for r in rows
        if str(r.get("transaction_id")) in wanted and str(r.get("status") or RUNNING) == RUNNING
    }


def terminate_statement(transaction_ids: list[str]) -> str:
    for tid in transaction_ids:
        if not _TRANSACTION_ID.fullmatch(tid):
            raise GraphError(f"not a Memgraph transaction id: {tid!r}")
    return "TERMINATE TRANSACTIONS " + ", ".join(f"'{tid}'" for tid in transaction_ids)


def parse_schema_info(raw: str | dict[str, Any]) -> dict[str, list[str]]:
    """Labels, relationship types and property keys from SHOW SCHEMA INFO's JSON."""
    info = json.loads(raw) if isinstance(raw, str) else raw
    labels: set[str] = set()
    types: set[str] = set()
    node_keys: set[str] = set()
    rel_keys: set[str] = set()
    for node in info.get("nodes", []):
        labels.update(node.get("labels", []))
        node_keys.update(p["key"] for p in node.get("properties", []))
    for edge in info.get("edges", []):
        types.add(edge.get("type", ""))
        rel_keys.update(p["key"] for p in edge.get("properties", []))
    return {
        "labels": sorted(labels),
        "relationship_types": sorted(t for t in types if t),
        "node_keys": sorted(node_keys),
        "relationship_keys": sorted(rel_keys),
    }


class MemgraphDialect(Dialect):
    """`version` and `storage` are what `on_connect` read from the server; a dialect made
    without a server plans for the pinned release (PINNED_VERSION)."""

    name = "memgraph"
    default_database = "memgraph"  # community edition's one database

    def __init__(self, version: Version | None = None, storage: str | None = None) -> None:
        self.version = version
        self.storage = storage

    @property
    def planned_version(self) -> Version:
        return self.version or PINNED_VERSION

    def session_database(self, database: str | None) -> str | None:
        return None if (database or "") in DEFAULT_DATABASE_NAMES else database

    # --- the server ---------------------------------------------------------------------

    def on_connect(self, store: DialectStore) -> None:
        if self.version is not None:
            return
        try:
            rows = store.autocommit("SHOW VERSION")
        except GraphQueryError as exc:
            log.warning(
                "SHOW VERSION refused at %s (%s): planning for %s",
                store.where,
                exc,
                version_text(PINNED_VERSION),
            )
            return
        raw = rows[0].get("version") if rows else None
        version = parse_version(str(raw)) if raw is not None else None
        if version is None:
            log.warning(
                "Memgraph at %s reports version %r: planning for %s",
                store.where,
                raw,
                version_text(PINNED_VERSION),
            )
            return
        if version < MIN_VERSION:
            raise GraphError(
                f"Memgraph {version_text(version)} at {store.where} is too old: eval_pipeline "
                f"needs {version_text(MIN_VERSION)} or later (text indexes); it is tested "
                f"against {version_text(PINNED_VERSION)}"
            )
        self.version = version
        self.storage = self.read_storage_mode(store)

    def read_storage_mode(self, store: DialectStore) -> str | None:
        try:
            return storage_mode(store.autocommit("SHOW STORAGE INFO"))
        except GraphQueryError:
            return None

    def require_transactions(self, store: DialectStore, purpose: str) -> None:
        # Read again: the mode can be switched at any time (STORAGE MODE ...).
        mode = self.read_storage_mode(store)
        self.storage = mode or self.storage
        if mode == ANALYTICAL:
            # No transactions (nothing all-or-nothing) and no text indexes ("Text index is not
            # supported in analytical storage mode.", src/query/interpreter.cpp @ v3.10.1).
            raise GraphError(
                f"Memgraph at {store.where} runs in {ANALYTICAL}, which has no transactions "
                f"and no text indexes: {purpose} needs both; run `STORAGE MODE "
                "IN_MEMORY_TRANSACTIONAL` there first"
            )

    # --- wipe, inventory, indexes -------------------------------------------------------

    def wipe(self, store: DialectStore) -> None:
        # Triggers first: one firing on our deletes could write (or refuse) while we wipe.
        for stmt in drop_trigger_statements(store.autocommit("SHOW TRIGGERS")):
            store.autocommit(stmt)
        super().wipe(store)

    def drop_index_statements(self, store: DialectStore) -> list[str]:
        indexes = store.autocommit("SHOW INDEX INFO")
        constraints = store.autocommit("SHOW CONSTRAINT INFO")
        vectors = store.autocommit("SHOW VECTOR INDEX INFO")
        return (
            drop_constraint_statements(constraints)
            + drop_index_statements(indexes)
            + drop_vector_index_statements(vectors)
        )

    def inventory(self, store: DialectStore) -> Inventory:
        """Nodes and relationships by full scans (exact, in memory), plus the names of every
        index, constraint and trigger (SHOW ... runs only in an auto-commit transaction)."""
        inv = super().inventory(store)
        return inventory_from_rows(
            inv,
            store.autocommit("SHOW INDEX INFO"),
            store.autocommit("SHOW CONSTRAINT INFO"),
            store.autocommit("SHOW TRIGGERS"),
        )

    def create_index_statements(self, pairs: Iterable[tuple[str, str]]) -> list[str]:
        return create_index_statements(pairs)

    def reconcile_index_statements(self, indexes: Iterable[tuple[str, str, bool]]) -> list[str]:
        return reconcile_index_statements(indexes)

    # --- full-text ----------------------------------------------------------------------

    def text_index_name(self, label: str, prop: str) -> str:
        return text_index_name(label, prop)

    def create_text_index(self, store: DialectStore, label: str, prop: str) -> None:
        stmt = create_text_index_statement(
            self.text_index_name(label, prop), label, prop, self.planned_version
        )
        try:
            store.autocommit(stmt)
        except GraphQueryError as exc:
            if "already exists" not in str(exc).lower():
                raise
        # At 3.10.1 an existing name is a notification, not an error (PrepareTextIndexQuery,
        # src/query/interpreter.cpp): only the listing says whether the index is ours.
        self.require_text_index(store, label, prop)

    def drop_text_index(self, store: DialectStore, label: str, prop: str) -> None:
        name = self.text_index_name(label, prop)
        if not any(i.name == name for i in self.text_indexes(store)):
            return  # dropping a missing text index is an error there
        store.autocommit(drop_text_index_statement(name))

    def text_indexes(self, store: DialectStore) -> list[TextIndex]:
        return text_indexes_from_rows(store.autocommit("SHOW INDEX INFO"))

    def fulltext_call(self) -> str:
        return text_search_call(self.planned_version)

    def fulltext_query(self, prop: str, or_query: str) -> str:
        return f"data.{prop}:({or_query})"

    def fulltext_params(self, index: str, prop: str, or_query: str, fetch: int) -> dict[str, Any]:
        params: dict[str, Any] = {"index": index, "query": self.fulltext_query(prop, or_query)}
        if self.planned_version >= TEXT_SEARCH_SCORE_SINCE:
            params["fetch"] = int(fetch)
        return params

    def fulltext_example(self, index: str, prop: str) -> str:
        query = f"'data.{prop}:(word1 OR word2)'"
        call = text_search_call(self.planned_version)
        call = call.replace("$index", f"'{index}'").replace("$query", query)
        call = call.replace("$fetch", "100")
        return f"{call} RETURN node ORDER BY score DESC LIMIT 10"

    # --- vectors ------------------------------------------------------------------------

    def vector_index_name(self, label: str, prop: str) -> str:
        return vector_index_name(label, prop)

    def create_vector_index(
        self, store: DialectStore, label: str, prop: str, dims: int, capacity: int
    ) -> None:
        name = self.vector_index_name(label, prop)
        if not any(i.name == name for i in self.vector_indexes(store)):
            # A CREATE that fails (a taken name, a bad config) answers with a notification,
            # not an error (VectorIndexQuery CREATE, src/query/interpreter.cpp @ v3.10.1).
            store.autocommit(create_vector_index_statement(name, label, prop, dims, capacity))
        self.require_vector_index(store, label, prop)

    def vector_indexes(self, store: DialectStore) -> list[VectorIndex]:
        return vector_indexes_from_rows(store.autocommit("SHOW VECTOR INDEX INFO"))

    def vector_call(self) -> str:
        # search(index_name, result_set_size, query_vector) YIELD node, distance, similarity
        # (query_modules/vector_search_module.cpp @ v3.10.1).
        return (
            "CALL vector_search.search($index, $k, $vector) YIELD node, similarity\n"
            "WITH node, similarity AS score"
        )

    def vector_similarity(self, left: str, right: str) -> str:
        # A function of the same module (cosine_similarity(vector1, vector2), @ v3.10.1).
        return f"vector_search.cosine_similarity({left}, {right})"

    # --- reads by agents ----------------------------------------------------------------

    def bound_read(self, query: str) -> str:
        return bound_read(query)

    def cancel_query(
        self, store: DialectStore, query: str, submitted: float, read_id: str | None = None
    ) -> list[str]:
        """Terminate the transactions running the read, and say which really stopped.

        TERMINATE TRANSACTIONS answers `killed` true for every id it found, even when the
        rights check then refused the kill (InterpreterContext::TerminateTransactions,
        src/query/interpreter_context.cpp @ v3.10.1): a kill is believed only when SHOW
        TRANSACTIONS no longer lists the transaction as running."""
        ids = transactions_running(store.autocommit("SHOW TRANSACTIONS"), query, read_id)
        if not ids:
            return []
        answered = store.autocommit(terminate_statement(ids))
        found = {str(r.get("transaction_id")) for r in answered if r.get("killed")}
        running = still_running(store.autocommit("SHOW TRANSACTIONS"), ids)
        return [
            f"{tid} {'killed' if tid in found and tid not in running else 'not killed'}"
            for tid in ids
        ]

    def schema_state(self, store: DialectStore) -> dict[str, Any]:
        """Indexes (without their changing `count`), constraints and triggers (SHOW ...:
        auto-commit only)."""
        autocommit = getattr(store, "autocommit", None)
        if not callable(autocommit):
            return {}
        return {
            "indexes": listing(autocommit, "SHOW INDEX INFO"),
            "constraints": listing(autocommit, "SHOW CONSTRAINT INFO"),
            "triggers": listing(autocommit, "SHOW TRIGGERS"),
        }

    # --- introspection ------------------------------------------------------------------

    def _schema_info(self, store: DialectStore) -> dict[str, list[str]] | None:
        try:
            rows = store.autocommit("SHOW SCHEMA INFO")
        except GraphQueryError:
            return None  # flag not set: the portable scans answer instead
        return parse_schema_info(rows[0]["schema"]) if rows else None

    def labels(self, store: DialectStore) -> list[str]:
        info = self._schema_info(store)
        return info["labels"] if info else super().labels(store)

    def relationship_types(self, store: DialectStore) -> list[str]:
        info = self._schema_info(store)
        return info["relationship_types"] if info else super().relationship_types(store)

    def property_keys(self, store: DialectStore) -> dict[str, list[str]]:
        info = self._schema_info(store)
        if info is None:
            return super().property_keys(store)
        return {"nodes": info["node_keys"], "relationships": info["relationship_keys"]}

    def server_version(self, store: DialectStore) -> str:
        try:
            rows = store.autocommit("SHOW VERSION")
        except GraphQueryError:
            return store.driver_agent()
        return f"Memgraph {rows[0]['version']}" if rows else store.driver_agent()

    def map_error(self, exc: Exception, where: str) -> GraphError:
        mapped = super().map_error(exc, where)
        text = str(exc).lower()
        if "enterprise" in text or "multi-tenan" in text:
            return GraphQueryError(
                f"Memgraph at {where}: multi-database is Enterprise-only; leave "
                "--graph-database at its default"
            )
        if "text search" in text and "experimental" in text:
            return GraphQueryError(
                f"Memgraph at {where}: text search is off (before 3.6 it needs "
                "--experimental-enabled=text-search)"
            )
        return mapped
