"""Every statement the Memgraph dialect sends, and every answer shape it reads, without a server.

No Memgraph runs here (no Docker engine, no package), so each fixture row below quotes where
its shape was read. The stored copies of `memgraph/memgraph` used here are not mapped to
release tags by the index that served them: where a shape is tied to a release it is dated by
the pull request or documentation change that introduced it, and the conformance suite
(`-m conformance` with EVAL_TEST_MEMGRAPH_URI) checks it against a live 3.10.1.

Sources (repository, file, version read):
[TS-2a] memgraph/memgraph query_modules/text_search_module.cpp
        @ fc0a71f3d593b3d433cf16052a712bd2f57d47fc (2024):
        search(index_name :: String, search_query :: String) -> (node :: Node).
[TS-2b] same file @ 0cb9d80c42d2f3138e6b7265136b96edc60629e8: search, regex_search, search_all,
        aggregate; two parameters, `node` only.
[TS-3]  memgraph/memgraph PR #3264 (merged 2025-09-11): "adds a relevance score to the output
        of text search queries, introduces a limit option as an input parameter"; documented by
        memgraph/documentation PR #1422 (2025-10-07, release 3.6: "Text search is no longer an
        experimental feature as of Memgraph version 3.6").
[TS-4]  same file, stored copies dated 2026 (index ids 56274240894, 55715240571): a third
        parameter `config` of type Map, default {}, keys limit / fuzzy_distance / fuzzy_prefix /
        fuzzy_transpositions; returns node and score (Double). memgraph/documentation PR #1666
        (2026-06-17, for memgraph#4191): "limit was previously a positional argument and is now
        a key inside the config map" (release 3.11).
[IDX]   memgraph/memgraph tests/e2e/durability/durability_with_text_index.py (stored copy dated
        2025, index id 70766661126) and tests/gql_behave text search features (ids 9070898804,
        51811331616): SHOW INDEX INFO header `index type | label | property | count`, rows
        ("label_text (name: document_index)", "Document", [], 2) and
        ("edge-type_text (name: relation_index)", "RELATES_TO", ["title", "content"], 1);
        `CREATE TEXT INDEX document_index ON :Document`, `CREATE TEXT EDGE INDEX relation_index
        ON :RELATES_TO(title, content)`, `DROP TEXT INDEX exampleEdgeIndex`.
[DROP]  memgraph/memgraph e2e high-availability cleanup helper (index id 51771475968): the DROP
        statement per SHOW INDEX INFO `index type` (label, label+property, edge-type,
        edge-type+property, edge-property -> DROP GLOBAL EDGE INDEX ON :(p), point,
        label_text / edge-type_text -> DROP TEXT INDEX, label+property_vector (name: x) ->
        DROP VECTOR INDEX x, edge-type+property_vector (name: x) -> DROP VECTOR EDGE INDEX x).
[INTERP] memgraph/memgraph src/query/interpreter.cpp @ e05585207854537f40309a9587e2a76992516341:
        SHOW VERSION header {"version"}; SHOW STORAGE INFO header {"storage info", "value"} with
        a ("storage_mode", ...) row; SHOW CONSTRAINT INFO {"constraint type", "label",
        "properties"} (exists: one property name; unique: a list); SHOW TRIGGERS {"trigger name",
        "statement", "event type", "phase", "owner"}; SHOW TRANSACTIONS {"username",
        "transaction_id", "query", "metadata"} (transaction_id the decimal id as a string, query
        the list of the transaction's statements); TERMINATE TRANSACTIONS {"transaction_id",
        "killed"}; all of them refused inside an explicit transaction.
[TRIG]  memgraph/memgraph e2e trigger privilege test (index id 48108609462): newer SHOW TRIGGERS
        add a "privilege context" column.
[G4]    memgraph/memgraph src/query/frontend/opencypher/grammar/MemgraphCypher.g4
        @ 722144d824e77bc5e1becb97765e3f2faeeae721: cypherQuery : ( indexHints )? singleQuery
        ( cypherUnion )* ( queryMemoryLimit )? ; terminateTransactions : TERMINATE TRANSACTIONS
        transactionIdList (literals); storageModeQuery; versionQuery : SHOW VERSION. Cypher.g4
        (index id 5717815387): memoryLimit : MEMORY ( UNLIMITED | LIMIT literal ( MB | KB ) ) ;
        queryMemoryLimit : QUERY memoryLimit.
[GQLA]  memgraph/gqlalchemy gqlalchemy/vendors/memgraph.py: the storage mode is the `value` of
        the SHOW STORAGE INFO row whose `storage info` is "storage_mode" (IN_MEMORY_TRANSACTIONAL,
        IN_MEMORY_ANALYTICAL, ON_DISK_TRANSACTIONAL); TERMINATE TRANSACTIONS 'id', ...
[MIG]   a third-party Memgraph upgrade note (index id 23692309380), corroboration only: "v3.6.0
        Text indexes: text -> label_text or edge-type_text"; "v3.4.0 Vector indexes: vector ->
        label+property_vector".
[CONS]  memgraph/documentation constraint pages (index ids 49508641093, 48985768203): SHOW
        CONSTRAINT INFO rows `unique | Employee | email`, `exists | Employee | first_name`.

Read at tag v3.10.1 (commit 0e77b786fc03fe4f92a18b9730940e11c62a0c32, the pinned release):
[TCK]   src/storage/v2/constraints/type_constraints_kind.hpp: TypeConstraintKind has 13 kinds;
        TypeConstraintKindToString prints BOOLEAN as "BOOL", LOCALTIME as "LOCAL TIME",
        LOCALDATETIME as "LOCAL DATE TIME", ZONEDDATETIME as "ZONED DATE TIME", the other nine
        (STRING INTEGER FLOAT LIST MAP DURATION DATE ENUM POINT) as their names.
[G4-10] src/query/frontend/opencypher/grammar/MemgraphCypher.g4: typeConstraintType : BOOLEAN
        | STRING | INTEGER | FLOAT | LIST | MAP | DATE | LOCALTIME | LOCALDATETIME |
        ZONEDDATETIME | DURATION | ENUM | POINT; dropVectorIndex : DROP VECTOR INDEX indexName
        (CREATE VECTOR EDGE INDEX exists, no DROP VECTOR EDGE INDEX); cypherQuery : (
        preQueryDirectives )? singleQuery ( cypherUnion )* ( queryMemoryLimit )?; callSubquery
        : CALL ... '{' cypherQuery '}'. Cypher.g4: memoryLimit : MEMORY ( UNLIMITED | LIMIT
        literal ( MB | KB ) ); constraint ... ASSERT variable propertyLookup IS TYPED
        typeConstraintType.
[IN-10] src/query/interpreter.cpp: SHOW INDEX INFO gives vector rows ("label+property_vector"
        | "edge-type+property_vector", label or edge type, property name, count) with no name;
        SHOW VECTOR INDEX INFO header {"index_name", "label", "property", "capacity",
        "dimension", "metric", "size", "scalar_kind", "index_type"}, index_type from
        VectorIndexTypeToString ("label+property_vector" / "edge-type+property_vector",
        src/storage/v2/indices/vector_index_utils.hpp); SHOW CONSTRAINT INFO header
        {"constraint type", "label", "properties", "data_type"} (exists: a property name and
        ""; unique: a list and ""; "data_type": a name and the printed kind of [TCK]); SHOW
        TRANSACTIONS header {"username", "transaction_id", "query", "status", "metadata"},
        status "running" / "committing" / "aborting" (TransactionStatusToString), plus a
        synthetic ("", "snapshot", ["CREATE SNAPSHOT"], "running", {...}) row while a snapshot
        runs; PrepareTextIndexQuery: an existing name on CREATE and a missing one on DROP are
        INFO notifications ("Text index on label {} with name {} already exists.", "Text index
        with name {} doesn't exist."), and analytical mode throws "Text index is not supported
        in analytical storage mode."; SHOW STORAGE INFO's row ("storage_mode",
        StorageModeToString: "IN_MEMORY_ANALYTICAL", src/storage/v2/storage_mode.cpp);
        only the top-level query's memory limit is evaluated (`cypher_query->memory_limit_`).
        src/storage/v2/inmemory/storage.cpp: DropVectorIndex(name) tries the node vector
        index, then the edge one.
[IC-10] src/query/interpreter_context.cpp, InterpreterContext::TerminateTransactions: every id
        found is answered (id, true), whether the rights check then killed it ("Transaction {}
        successfully killed") or not ("Not enough rights to kill the transaction"); a killed
        transaction turns TERMINATED, which SHOW TRANSACTIONS no longer lists.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from eval_pipeline.graph import schema
from eval_pipeline.graph.dialects import memgraph as mg
from eval_pipeline.graph.dialects.base import KEPT_LABELS, Inventory, TextIndex
from eval_pipeline.graph.errors import GraphError, GraphQueryError
from eval_pipeline.reconcile import schema as reconcile_schema
from eval_pipeline.reconcile import writer
from eval_pipeline.retrieve import fulltext_queries as ftq
from eval_pipeline.retrieve.readonly_guard import check_read_only
from eval_pipeline_tests.graph import memgraph_clauses

V35, V36, V310, V311 = (3, 5, 0), (3, 6, 0), (3, 10, 1), (3, 11, 0)

# [IDX] rows, verbatim (tuples turned into the driver's dicts by the header).
IDX_HEADER = ("index type", "label", "property", "count")
IDX_TEXT_ROWS = [
    dict(zip(IDX_HEADER, ("label_text (name: document_index)", "Document", [], 2), strict=True)),
    dict(
        zip(
            IDX_HEADER,
            ("edge-type_text (name: relation_index)", "RELATES_TO", ["title", "content"], 1),
            strict=True,
        )
    ),
]
# [IN-10] SHOW CONSTRAINT INFO (with its `data_type` column), the values of [CONS].
CONS_ROWS = [
    {"constraint type": "exists", "label": "Employee", "properties": "first_name", "data_type": ""},
    {"constraint type": "unique", "label": "Employee", "properties": ["email"], "data_type": ""},
]
# [INTERP] + [TRIG]: SHOW TRIGGERS, one row (the statement is [INTERP]'s trigger example form).
TRIGGER_ROWS = [
    {
        "trigger name": "audit",
        "statement": "UNWIND createdVertices AS v SET v.seen = true",
        "privilege context": "INVOKER",
        "event type": "() CREATE",
        "phase": "AFTER COMMIT",
        "owner": None,
    }
]


# --- version and storage mode ---------------------------------------------------------------


class FakeMemgraph:
    """Answers auto-commit statements with canned rows (headers as [INTERP] gives them) and
    records what it was sent; `read` answers the portable scans with nothing."""

    where = "bolt://memgraph:7687 (database memgraph)"

    def __init__(self, answers: dict[str, list[dict[str, Any]]] | None = None) -> None:
        self.answers = {
            "SHOW VERSION": [{"version": "3.10.1"}],
            "SHOW STORAGE INFO": [
                {"storage info": "vertex_count", "value": 0},
                {"storage info": "storage_mode", "value": "IN_MEMORY_TRANSACTIONAL"},
            ],
            "SHOW INDEX INFO": [],
            "SHOW CONSTRAINT INFO": [],
            "SHOW TRIGGERS": [],
            "SHOW VECTOR INDEX INFO": [],
            **(answers or {}),
        }
        self.sent: list[str] = []
        # [IC-10]: a kill the rights check refused leaves the transaction running.
        self.refuse_kills = False

    def autocommit(self, query: str, params: Any = None) -> list[dict]:
        self.sent.append(query)
        if query.startswith("TERMINATE TRANSACTIONS"):
            ids = [
                part.strip(" '") for part in query.removeprefix("TERMINATE TRANSACTIONS").split(",")
            ]
            listed = {r["transaction_id"] for r in self.answers.get("SHOW TRANSACTIONS", [])}
            if not self.refuse_kills:  # [IC-10]: a killed transaction is no longer listed
                self.answers["SHOW TRANSACTIONS"] = [
                    r
                    for r in self.answers.get("SHOW TRANSACTIONS", [])
                    if r["transaction_id"] not in ids
                ]
            # [IC-10]: `killed` is true for every id found, refused or not.
            return [{"transaction_id": tid, "killed": tid in listed} for tid in ids]
        return [dict(r) for r in self.answers.get(query, [])]

    def read(self, query: str, params: Any = None, **kw: Any) -> list[dict]:
        assert not query.lstrip().upper().startswith("SHOW"), "SHOW runs only in auto-commit"
        if "count(n)" in query:
            return [{"n": 0}]
        return []

    def write(self, query: str, params: Any = None) -> list[dict]:
        self.sent.append(query)
        return [{"deleted": 0}]

    def driver_agent(self) -> str:
        return "Memgraph/3.10.1"


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [("3.10.1", (3, 10, 1)), ("3.5.2", (3, 5, 2)), ("3.11.0-rc1", (3, 11, 0)), ("v3.6", (3, 6, 0))],
)
def test_version_strings(raw: str, parsed: tuple[int, int, int]) -> None:
    # [INTERP]: one column, `version`, the server's gflags version string.
    assert mg.parse_version(raw) == parsed
    assert mg.parse_version("unknown") is None


def test_show_version_is_read_once_and_old_releases_are_refused() -> None:
    store = FakeMemgraph()
    dialect = mg.MemgraphDialect()
    dialect.on_connect(store)  # type: ignore[arg-type]
    dialect.on_connect(store)  # type: ignore[arg-type]
    assert store.sent.count("SHOW VERSION") == 1
    assert (dialect.version, dialect.storage) == ((3, 10, 1), "IN_MEMORY_TRANSACTIONAL")

    old = FakeMemgraph({"SHOW VERSION": [{"version": "3.4.0"}]})
    with pytest.raises(GraphError, match=r"Memgraph 3\.4\.0 at .* needs 3\.5\.0 or later") as info:
        mg.MemgraphDialect().on_connect(old)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_reconcile_is_refused_in_analytical_mode() -> None:
    # [INTERP] + [GQLA]: the ("storage_mode", "IN_MEMORY_ANALYTICAL") row of SHOW STORAGE INFO.
    analytical = FakeMemgraph(
        {"SHOW STORAGE INFO": [{"storage info": "storage_mode", "value": "IN_MEMORY_ANALYTICAL"}]}
    )
    with pytest.raises(GraphError, match="IN_MEMORY_ANALYTICAL, which has no transactions"):
        mg.MemgraphDialect(V310).require_transactions(analytical, "reconciliation")  # type: ignore[arg-type]
    mg.MemgraphDialect(V310).require_transactions(FakeMemgraph(), "reconciliation")  # type: ignore[arg-type]


def test_reconcile_schema_refuses_analytical_mode_before_any_ddl() -> None:
    from eval_pipeline.reconcile.indexes import ensure_reconcile_schema

    class Store(FakeMemgraph):
        dialect = mg.MemgraphDialect(V310)

    store = Store(
        {"SHOW STORAGE INFO": [{"storage info": "storage_mode", "value": "IN_MEMORY_ANALYTICAL"}]}
    )
    with pytest.raises(GraphError, match="IN_MEMORY_ANALYTICAL"):
        ensure_reconcile_schema(store)
    assert not [q for q in store.sent if q.startswith("CREATE")]


# --- text search, by release ----------------------------------------------------------------


def test_text_search_call_per_release() -> None:
    # 3.5: [TS-2a]/[TS-2b] two String parameters, `node` only: a rank stands in for the score.
    v35 = mg.text_search_call(V35)
    assert v35.startswith("CALL text_search.search($index, $query) YIELD node\n")
    assert "score" not in v35.split("\n")[0] and v35.endswith("1.0 / (1 + rank) AS score")
    # 3.6-3.10: [TS-3] a positional Int limit and a `score` column.
    assert (
        mg.text_search_call(V36)
        == mg.text_search_call(V310)
        == ("CALL text_search.search($index, $query, $fetch) YIELD node, score")
    )
    # 3.11+: [TS-4] the limit moves into the config map.
    assert mg.text_search_call(V311) == (
        "CALL text_search.search($index, $query, {limit: $fetch}) YIELD node, score"
    )
    # Without a server the plan is the pinned release's.
    assert mg.MemgraphDialect().fulltext_call() == mg.text_search_call(mg.PINNED_VERSION)


@pytest.mark.parametrize("version", [V35, V310, V311])
def test_turn_search_statement_and_params(version: tuple[int, int, int]) -> None:
    dialect = mg.MemgraphDialect(version)
    cypher, params = dialect.fulltext_search("pizza OR rome", 5)
    assert cypher.startswith(mg.text_search_call(version))
    assert cypher.endswith("RETURN node.turn_id AS turn_id, score ORDER BY score DESC LIMIT $limit")
    # Tantivy field syntax (`data.<prop>:`), the query already escaped: not escaped again.
    expected = {"index": "turn_text", "query": "data.text:(pizza OR rome)", "limit": 5}
    if version >= V36:
        expected["fetch"] = 5
    assert params == expected
    check_read_only(cypher)


@pytest.mark.parametrize("version", [V35, V310, V311])
@pytest.mark.parametrize("source", ftq.SOURCE_KINDS, ids=ftq.KINDS)
@pytest.mark.parametrize("scoped", [True, False])
def test_retrieval_statements_per_release_pass_the_guard(version, source, scoped) -> None:
    dialect = mg.MemgraphDialect(version)
    statement = ftq.search_statement(dialect, source, scoped=scoped)
    check_read_only(statement)
    assert statement.startswith(mg.text_search_call(version))
    params = ftq.search_params(
        dialect, ftq.FulltextSource(source, "x_index"), "a OR b", 3, ["s"] if scoped else None
    )
    assert params["query"] == f"data.{source.text_property}:(a OR b)"
    assert ("fetch" in params) is (version >= V36) and ("$fetch" in statement) is (version >= V36)


def test_schema_description_example_is_the_release_call() -> None:
    example = mg.MemgraphDialect(V310).fulltext_example("turn_text", "text")
    assert example == (
        "CALL text_search.search('turn_text', 'data.text:(word1 OR word2)', 100) "
        "YIELD node, score RETURN node ORDER BY score DESC LIMIT 10"
    )
    check_read_only(example)


# --- index DDL and discovery ----------------------------------------------------------------


def test_index_statements() -> None:
    # [IDX]/[DROP]: `CREATE INDEX ON :L(p)` pairs with `DROP INDEX ON :L(p)`.
    assert mg.create_index_statements() == [
        "CREATE INDEX ON :`Session`(`session_id`)",
        "CREATE INDEX ON :`Turn`(`turn_id`)",
        "CREATE INDEX ON :`Question`(`question_id`)",
    ]
    # [CONS]: `CREATE CONSTRAINT ON (n:Employee) ASSERT n.email IS UNIQUE`.
    assert mg.reconcile_index_statements(
        [("Entity", "key", True), ("Chunk", "chunk_id", False)]
    ) == [
        "CREATE INDEX ON :`Entity`(`key`)",
        "CREATE CONSTRAINT ON (n:`Entity`) ASSERT n.`key` IS UNIQUE",
        "CREATE INDEX ON :`Chunk`(`chunk_id`)",
    ]


def test_text_index_ddl_per_release() -> None:
    # [IDX] (3.6+): `CREATE TEXT INDEX name ON :Label(props)`; the experimental-era docs
    # (memgraph/documentation pages/querying/text-search.mdx
    # @ 0e11406f977d5a11b0c3c824d696cf6730c81fff): `CREATE TEXT INDEX complianceDocuments
    # ON :Report;` only.
    assert mg.create_text_index_statement(version=V310) == (
        "CREATE TEXT INDEX `turn_text` ON :`Turn`(`text`)"
    )
    assert mg.create_text_index_statement(version=V35) == "CREATE TEXT INDEX `turn_text` ON :`Turn`"
    assert mg.create_text_index_statement("episode_summary", "Episode", "summary", V310) == (
        "CREATE TEXT INDEX `episode_summary` ON :`Episode`(`summary`)"
    )
    assert mg.drop_text_index_statement("chunk_text") == "DROP TEXT INDEX `chunk_text`"
    d = mg.MemgraphDialect(V310)
    assert [
        d.text_index_name(*lp)
        for lp in (("Turn", "text"), ("Chunk", "text"), ("Episode", "summary"))
    ] == [
        "turn_text",
        "chunk_text",
        "episode_summary",
    ]


def test_text_index_discovery_from_show_index_info() -> None:
    # [IDX] rows, plus the pre-3.6 spelling `text (name: x)` ([MIG]); the property column of
    # that older row is not documented anywhere read: NULL is an assumption (unverified).
    pre_36 = {"index type": "text (name: turns_old)", "label": "Turn", "property": None, "count": 4}
    found = mg.text_indexes_from_rows([*IDX_TEXT_ROWS, pre_36])
    assert found == [
        TextIndex("document_index", "Document", ()),
        TextIndex("turns_old", "Turn", ()),
    ]
    # An edge-type text index is no source of nodes.
    assert all(i.label != "RELATES_TO" for i in found)
    sources = ftq.sources_from_indexes(
        [TextIndex("turn_text", "Turn", ("text",)), TextIndex("fact_text", "Fact", ())]
    )
    assert [(s.source.kind, s.index) for s in sources] == [
        ("turn", "turn_text"),
        ("fact", "fact_text"),
    ]


def test_drop_index_statements_for_every_listed_kind() -> None:
    # Row kinds as [IN-10] prints them, DROP forms as [DROP] and [G4-10] give them;
    # label/property values are [IDX]'s where [IDX] has a row of that kind, the others stand
    # in for any name.
    rows = [
        *IDX_TEXT_ROWS,
        {"index type": "label", "label": "Document", "property": None, "count": 2},
        {"index type": "label+property", "label": "Document", "property": ["title"], "count": 2},
        # [IN-10]: a descending index is listed apart; DROP INDEX without an order drops both.
        {
            "index type": "label+property (DESC)",
            "label": "Document",
            "property": ["title"],
            "count": 2,
        },
        {"index type": "label+property", "label": "Doc", "property": ["meta.lang"], "count": 1},
        {"index type": "edge-type", "label": "RELATES_TO", "property": None, "count": 1},
        {
            "index type": "edge-type+property",
            "label": "RELATES_TO",
            "property": "title",
            "count": 1,
        },
        {"index type": "edge-property", "label": None, "property": "title", "count": 1},
        {"index type": "point", "label": "Document", "property": "loc", "count": 0},
        # [IN-10]: vector rows carry no name here; SHOW VECTOR INDEX INFO names them.
        {"index type": "label+property_vector", "label": "Document", "property": "emb", "count": 0},
        {
            "index type": "edge-type+property_vector",
            "label": "RELATES_TO",
            "property": "emb",
            "count": 0,
        },
    ]
    assert mg.drop_index_statements(rows) == [
        "DROP TEXT INDEX `document_index`",
        "DROP TEXT INDEX `relation_index`",
        "DROP INDEX ON :`Document`",
        "DROP INDEX ON :`Document`(`title`)",
        "DROP INDEX ON :`Doc`(`meta`.`lang`)",  # nestedPropertyKeyNames ([G4-10])
        "DROP EDGE INDEX ON :`RELATES_TO`",
        "DROP EDGE INDEX ON :`RELATES_TO`(`title`)",
        "DROP GLOBAL EDGE INDEX ON :(`title`)",
        "DROP POINT INDEX ON :`Document`(`loc`)",
    ]


# [IN-10] SHOW VECTOR INDEX INFO rows, one on nodes and one on edges (values stand in).
VECTOR_ROWS = [
    {
        "index_name": "doc_vec",
        "label": "Document",
        "property": "emb",
        "capacity": 1000,
        "dimension": 384,
        "metric": "cos",
        "size": 3,
        "scalar_kind": "f32",
        "index_type": "label+property_vector",
    },
    {
        "index_name": "rel_vec",
        "label": "RELATES_TO",
        "property": "emb",
        "capacity": 1000,
        "dimension": 384,
        "metric": "cos",
        "size": 0,
        "scalar_kind": "f32",
        "index_type": "edge-type+property_vector",
    },
]


def test_vector_indexes_are_dropped_by_name_node_and_edge_alike() -> None:
    # [G4-10] `DROP VECTOR INDEX name` is the one form (no DROP VECTOR EDGE INDEX in the
    # grammar); [IN-10] the names come from SHOW VECTOR INDEX INFO, never SHOW INDEX INFO.
    assert mg.drop_vector_index_statements(VECTOR_ROWS) == [
        "DROP VECTOR INDEX `doc_vec`",
        "DROP VECTOR INDEX `rel_vec`",
    ]
    fake = FakeMemgraph(
        {
            "SHOW INDEX INFO": [
                {"index type": "label+property_vector", "label": "Document", "property": "emb"},
                {
                    "index type": "edge-type+property_vector",
                    "label": "RELATES_TO",
                    "property": "emb",
                },
            ],
            "SHOW VECTOR INDEX INFO": VECTOR_ROWS,
        }
    )
    mg.MemgraphDialect(V310).wipe(fake)  # type: ignore[arg-type]
    assert "DROP VECTOR INDEX `doc_vec`" in fake.sent
    assert "DROP VECTOR INDEX `rel_vec`" in fake.sent
    assert not [q for q in fake.sent if "VECTOR EDGE" in q]


def test_drop_constraint_statements() -> None:
    # [CONS] forms: `... ASSERT exists (n.first_name)`, `... ASSERT n.email IS UNIQUE`.
    assert mg.drop_constraint_statements(CONS_ROWS) == [
        "DROP CONSTRAINT ON (n:`Employee`) ASSERT EXISTS (n.`first_name`)",
        "DROP CONSTRAINT ON (n:`Employee`) ASSERT n.`email` IS UNIQUE",
    ]


# [TCK] printed kind -> [G4-10] keyword, for all 13 TypeConstraintKind values.
PRINTED_TYPE_KINDS = {
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


@pytest.mark.parametrize(("printed", "keyword"), sorted(PRINTED_TYPE_KINDS.items()))
def test_typed_constraints_are_dropped_with_the_grammars_keyword(printed: str, keyword: str):
    # [IN-10] a "data_type" row carries [TCK]'s printed kind; DROP takes [G4-10]'s keyword.
    row = {"constraint type": "data_type", "label": "Doc", "properties": "p", "data_type": printed}
    assert mg.drop_constraint_statements([row]) == [
        f"DROP CONSTRAINT ON (n:`Doc`) ASSERT n.`p` IS TYPED {keyword}"
    ]


def test_an_unknown_type_constraint_kind_is_one_line() -> None:
    row = {"constraint type": "data_type", "label": "Doc", "properties": "p", "data_type": "VEC"}
    with pytest.raises(GraphError, match="type constraint of kind 'VEC'") as info:
        mg.drop_constraint_statements([row])
    assert "\n" not in str(info.value)


# --- wipe and inventory ---------------------------------------------------------------------


def test_inventory_names_every_index_constraint_and_trigger() -> None:
    counted = Inventory(complete=False, nodes=2, labels={"Customer": 2})
    inv = mg.inventory_from_rows(counted, IDX_TEXT_ROWS, CONS_ROWS, TRIGGER_ROWS)
    assert inv.complete and inv.nodes == 2
    assert inv.indexes == [
        "edge-type_text (name: relation_index) :RELATES_TO(title, content)",
        "label_text (name: document_index) :Document",
    ]
    assert inv.constraints == ["exists :Employee(first_name)", "unique :Employee(email)"]
    assert inv.triggers == ["audit"]
    # [IDX]'s `count` changes with the data: not a new index.
    recounted = [{**r, "count": 99} for r in IDX_TEXT_ROWS]
    assert (
        mg.inventory_from_rows(counted, recounted, CONS_ROWS, TRIGGER_ROWS)
        .added_since(inv)
        .is_empty()
    )


def test_emptiness_ignores_only_our_lease_and_claim() -> None:
    d = mg.MemgraphDialect(V310)

    class Ours(FakeMemgraph):
        def read(self, query: str, params: Any = None, **kw: Any) -> list[dict]:
            if "UNWIND labels(n)" in query:
                return [{"label": schema.LEASE, "n": 1}]
            return super().read(query, params, **kw)

    assert d.inventory(Ours()).without(KEPT_LABELS).is_empty()  # type: ignore[arg-type]
    found = d.inventory(Ours({"SHOW TRIGGERS": TRIGGER_ROWS})).without(KEPT_LABELS)  # type: ignore[arg-type]
    assert not found.is_empty() and found.describe() == "1 trigger (audit)"


def test_wipe_drops_triggers_first_then_data_then_indexes() -> None:
    fake = FakeMemgraph(
        {
            "SHOW TRIGGERS": TRIGGER_ROWS,
            "SHOW INDEX INFO": IDX_TEXT_ROWS,
            "SHOW CONSTRAINT INFO": CONS_ROWS,
        }
    )
    mg.MemgraphDialect(V310).wipe(fake)  # type: ignore[arg-type]
    assert fake.sent[:2] == ["SHOW TRIGGERS", "DROP TRIGGER `audit`"]
    delete = next(q for q in fake.sent if "DETACH DELETE" in q)
    assert f"NOT n:`{schema.LEASE}`" in delete and f"NOT n:`{schema.CLAIM}`" in delete
    assert fake.sent.index(delete) < fake.sent.index("SHOW INDEX INFO")
    assert fake.sent[-4:] == [
        "DROP CONSTRAINT ON (n:`Employee`) ASSERT EXISTS (n.`first_name`)",
        "DROP CONSTRAINT ON (n:`Employee`) ASSERT n.`email` IS UNIQUE",
        "DROP TEXT INDEX `document_index`",
        "DROP TEXT INDEX `relation_index`",
    ]


def test_drop_text_index_only_when_listed() -> None:
    # Dropping a missing text index is an error there ([IDX]'s DROP scenario drops an
    # existing one): the dialect looks first.
    d = mg.MemgraphDialect(V310)
    absent = FakeMemgraph()
    d.drop_text_index(absent, "Chunk", "text")  # type: ignore[arg-type]
    assert absent.sent == ["SHOW INDEX INFO"]
    present = FakeMemgraph(
        {
            "SHOW INDEX INFO": [
                {
                    "index type": "label_text (name: chunk_text)",
                    "label": "Chunk",
                    "property": ["text"],
                    "count": 3,
                }
            ]
        }
    )
    d.drop_text_index(present, "Chunk", "text")  # type: ignore[arg-type]
    assert present.sent[-1] == "DROP TEXT INDEX `chunk_text`"


# --- agent reads: memory bound and termination ----------------------------------------------


def test_agent_reads_carry_a_query_memory_limit() -> None:
    # [G4]/[G4-10]: `QUERY MEMORY LIMIT <literal> MB` ends a Cypher query (after any UNION).
    bound = mg.bound_read("MATCH (t:Turn) RETURN t.text // the turns\n;")
    assert bound == "MATCH (t:Turn) RETURN t.text // the turns\nQUERY MEMORY LIMIT 1024 MB"
    assert mg.MemgraphDialect().bound_read("RETURN 1") == "RETURN 1\nQUERY MEMORY LIMIT 1024 MB"


LIMIT = "\nQUERY MEMORY LIMIT 1024 MB"


@pytest.mark.parametrize(
    ("read", "sent"),
    [
        # The words in a string literal, a comment or a name are no clause: the bound is added.
        (
            "MATCH (t:Turn) WHERE t.text CONTAINS 'query memory' RETURN t",
            "MATCH (t:Turn) WHERE t.text CONTAINS 'query memory' RETURN t" + LIMIT,
        ),
        (
            "MATCH (t) RETURN t // QUERY MEMORY UNLIMITED",
            "MATCH (t) RETURN t // QUERY MEMORY UNLIMITED" + LIMIT,
        ),
        (
            "MATCH (t) RETURN t /* QUERY MEMORY UNLIMITED */",
            "MATCH (t) RETURN t /* QUERY MEMORY UNLIMITED */" + LIMIT,
        ),
        (
            "MATCH (t) RETURN t.x AS `QUERY MEMORY UNLIMITED`",
            "MATCH (t) RETURN t.x AS `QUERY MEMORY UNLIMITED`" + LIMIT,
        ),
        (
            'RETURN "it\\"s QUERY MEMORY UNLIMITED"',
            'RETURN "it\\"s QUERY MEMORY UNLIMITED"' + LIMIT,
        ),
        # The read's own top-level clause is replaced: UNLIMITED and looser limits by ours...
        ("MATCH (n) RETURN n QUERY MEMORY UNLIMITED", "MATCH (n) RETURN n" + LIMIT),
        ("MATCH (n) RETURN n query memory unlimited;", "MATCH (n) RETURN n" + LIMIT),
        ("MATCH (n) RETURN n QUERY MEMORY UNLIMITED // no bound", "MATCH (n) RETURN n" + LIMIT),
        ("MATCH (n) RETURN n QUERY MEMORY LIMIT 4096 MB", "MATCH (n) RETURN n" + LIMIT),
        ("MATCH (n) RETURN n QUERY MEMORY LIMIT 2000000 KB", "MATCH (n) RETURN n" + LIMIT),
        (
            "MATCH (a) RETURN a UNION MATCH (b) RETURN b AS a QUERY MEMORY UNLIMITED",
            "MATCH (a) RETURN a UNION MATCH (b) RETURN b AS a" + LIMIT,
        ),
        # ...a tighter one stays (written by us).
        (
            "MATCH (n) RETURN n QUERY MEMORY LIMIT 10 MB",
            "MATCH (n) RETURN n\nQUERY MEMORY LIMIT 10 MB",
        ),
        (
            "MATCH (n) RETURN n QUERY MEMORY LIMIT 512 KB",
            "MATCH (n) RETURN n\nQUERY MEMORY LIMIT 512 KB",
        ),
        # A subquery's clause is not the query's ([IN-10]: only the top-level one is read).
        (
            "CALL { MATCH (n) RETURN n QUERY MEMORY UNLIMITED } RETURN n",
            "CALL { MATCH (n) RETURN n QUERY MEMORY UNLIMITED } RETURN n" + LIMIT,
        ),
    ],
)
def test_no_read_switches_its_memory_bound_off(read: str, sent: str) -> None:
    assert mg.bound_read(read) == sent
    # Exactly one top-level clause reaches the server, at the very end.
    assert mg._own_memory_clause(mg._code_tokens(sent)) is not None


def test_the_guards_accepted_reads_with_memory_clauses_get_the_bound() -> None:
    # Both reads of issue 28 pass the read-only guard; neither may lift the bound.
    for read in (
        "MATCH (t:Turn) WHERE t.text CONTAINS 'query memory' RETURN t.text",
        "MATCH (t:Turn) RETURN t.text QUERY MEMORY UNLIMITED",
    ):
        check_read_only(read)
        assert mg.bound_read(read).endswith(LIMIT)


@pytest.mark.parametrize(
    "read", ["RETURN 'unterminated", "RETURN 1 /* open", "RETURN `open", "RETURN 1 // a\rb"]
)
def test_a_read_that_cannot_be_read_is_not_bounded_by_guesswork(read: str) -> None:
    with pytest.raises(GraphQueryError, match="cannot bound this read"):
        mg.bound_read(read)


SENT = "MATCH (n) RETURN count(n) AS n\nQUERY MEMORY LIMIT 1024 MB"
# [IN-10] SHOW TRANSACTIONS rows: username "", transaction_id as a decimal string, query the
# list of the transaction's statements, status, metadata a map; the synthetic snapshot row.
TX_ROWS = [
    {"username": "", "transaction_id": "9", "query": [SENT], "status": "running", "metadata": {}},
    {"username": "", "transaction_id": "11", "query": [SENT], "status": "aborting", "metadata": {}},
    {
        "username": "",
        "transaction_id": "10",
        "query": ["SHOW TRANSACTIONS"],
        "status": "running",
        "metadata": {},
    },
    {
        "username": "",
        "transaction_id": "snapshot",
        "query": ["CREATE SNAPSHOT"],
        "status": "running",
        "metadata": {"phase": "vertices"},
    },
]


def test_a_timed_out_read_is_terminated_by_transaction_id() -> None:
    # An aborting transaction (status, [IN-10]) is on its way out: not terminated again.
    assert mg.transactions_running(TX_ROWS, SENT) == ["9"]
    assert mg.transactions_running(TX_ROWS, "CREATE SNAPSHOT") == []
    assert mg.terminate_statement(["9"]) == "TERMINATE TRANSACTIONS '9'"
    with pytest.raises(GraphError, match="not a Memgraph transaction id"):
        mg.terminate_statement(["9'; DROP"])
    store = FakeMemgraph({"SHOW TRANSACTIONS": [dict(r) for r in TX_ROWS]})
    assert mg.MemgraphDialect(V310).cancel_query(store, SENT, 0.0) == ["9 killed"]  # type: ignore[arg-type]
    assert store.sent[-3:] == [
        "SHOW TRANSACTIONS",
        "TERMINATE TRANSACTIONS '9'",
        "SHOW TRANSACTIONS",
    ]


def test_a_refused_kill_reported_as_killed_is_not_believed() -> None:
    # [IC-10]: (9, true) comes back although the rights check refused the kill; SHOW
    # TRANSACTIONS still lists 9 as running.
    store = FakeMemgraph({"SHOW TRANSACTIONS": [dict(r) for r in TX_ROWS]})
    store.refuse_kills = True
    assert mg.MemgraphDialect(V310).cancel_query(store, SENT, 0.0) == ["9 not killed"]  # type: ignore[arg-type]


# --- text indexes verified, analytical mode refused -----------------------------------------


def test_a_text_index_create_answered_with_a_notification_is_caught() -> None:
    # [IN-10]: at 3.10.1 an existing name is a notification, so CREATE returns no error; the
    # name may be taken by an index on another label. Only SHOW INDEX INFO tells.
    elsewhere = FakeMemgraph(
        {
            "SHOW INDEX INFO": [
                {
                    "index type": "label_text (name: chunk_text)",
                    "label": "Document",
                    "property": ["text"],
                    "count": 1,
                }
            ]
        }
    )
    d = mg.MemgraphDialect(V310)
    with pytest.raises(GraphQueryError, match="accepted the full-text index chunk_text") as info:
        d.create_text_index(elsewhere, "Chunk", "text")  # type: ignore[arg-type]
    assert "chunk_text on Document" in str(info.value) and "\n" not in str(info.value)
    assert elsewhere.sent[0] == "CREATE TEXT INDEX `chunk_text` ON :`Chunk`(`text`)"
    with pytest.raises(GraphQueryError, match="listed: none"):
        d.create_text_index(FakeMemgraph(), "Chunk", "text")  # type: ignore[arg-type]
    listed = FakeMemgraph(
        {
            "SHOW INDEX INFO": [
                {
                    "index type": "label_text (name: chunk_text)",
                    "label": "Chunk",
                    "property": ["text"],
                    "count": 1,
                }
            ]
        }
    )
    d.create_text_index(listed, "Chunk", "text")  # type: ignore[arg-type]


ANALYTICAL_INFO = {
    "SHOW STORAGE INFO": [
        {"storage info": "vertex_count", "value": 535},
        {"storage info": "storage_mode", "value": "IN_MEMORY_ANALYTICAL"},
    ]
}


def test_injection_in_analytical_mode_is_refused_before_the_wipe(tmp_path) -> None:
    # [IN-10]: SHOW STORAGE INFO's "storage_mode" row; text indexes are refused in
    # IN_MEMORY_ANALYTICAL, so injection would fail after the wipe and the load.
    from eval_pipeline.graph.inject import inject_fixtures
    from eval_pipeline_tests.graph.conftest import write_fixtures

    class Store(FakeMemgraph):
        dialect = mg.MemgraphDialect(V310)
        wiped = False

        def ensure_running(self) -> str:
            return "bolt://memgraph:7687"

        def wipe(self) -> None:
            self.wiped = True

    store = Store(ANALYTICAL_INFO)
    with pytest.raises(GraphError, match="IN_MEMORY_ANALYTICAL.*injection needs both") as info:
        inject_fixtures(store, write_fixtures(tmp_path / "fixtures.jsonl"))  # type: ignore[arg-type]
    assert not store.wiped and "\n" not in str(info.value)


def test_a_timed_out_read_is_found_by_the_id_in_its_transaction_metadata() -> None:
    """Issue 28: the read's id travels as Bolt BEGIN metadata, not in its text.

    memgraph/memgraph v3.10.1 (0e77b786): src/glue/SessionHL.cpp ToQueryExtras copies BEGIN's
    `tx_metadata` map into the transaction's metadata; src/query/interpreter.cpp
    ShowTransactions answers {"username", "transaction_id", "query", "status", "metadata"},
    metadata that map. A comment would not do: PrepareExplainQuery and PrepareProfileQuery
    re-parse `query_string.substr(8)` (the raw text after "explain "/"profile "), which a
    leading comment would cut instead.
    """
    d = mg.MemgraphDialect(V310)
    statement = "EXPLAIN MATCH (n) RETURN n\nQUERY MEMORY LIMIT 1024 MB"
    sent, metadata = d.mark_read(statement, "0123456789abcdef")
    assert sent == statement
    assert metadata == {"eval_pipeline_read": "0123456789abcdef"}
    # Two transactions running the same text: only the one with the id is ours.
    rows = [
        {
            "username": "",
            "transaction_id": "9",
            "query": [sent],
            "status": "running",
            "metadata": {"eval_pipeline_read": "ffffffffffffffff"},
        },
        {
            "username": "",
            "transaction_id": "11",
            "query": [sent],
            "status": "running",
            "metadata": metadata,
        },
        {
            "username": "",
            "transaction_id": "12",
            "query": ["SHOW TRANSACTIONS"],
            "status": "running",
            "metadata": {},
        },
    ]
    assert mg.transactions_running(rows, sent, "0123456789abcdef") == ["11"]
    assert mg.transactions_running(rows, sent) == ["9", "11"]  # by text, without an id
    store = FakeMemgraph({"SHOW TRANSACTIONS": rows})
    assert d.cancel_query(store, sent, 0.0, "0123456789abcdef") == ["11 killed"]  # type: ignore[arg-type]
    # Only the read's own transaction is terminated, and the kill is checked by listing again.
    assert store.sent[-2:] == ["TERMINATE TRANSACTIONS '11'", "SHOW TRANSACTIONS"]


def test_schema_state_leaves_out_counts_and_sees_triggers() -> None:
    store = FakeMemgraph({"SHOW INDEX INFO": IDX_TEXT_ROWS})
    d = mg.MemgraphDialect(V310)
    before = d.schema_state(store)  # type: ignore[arg-type]
    store.answers["SHOW INDEX INFO"] = [{**r, "count": 7} for r in IDX_TEXT_ROWS]
    assert d.schema_state(store) == before  # type: ignore[arg-type]
    store.answers["SHOW TRIGGERS"] = TRIGGER_ROWS
    assert d.schema_state(store) != before  # type: ignore[arg-type]


def test_refusals_are_query_errors_not_crashes() -> None:
    class Refusing(FakeMemgraph):
        def autocommit(self, query: str, params: Any = None) -> list[dict]:
            raise GraphQueryError(f"refused: {query}")

    d = mg.MemgraphDialect()
    d.on_connect(Refusing())  # type: ignore[arg-type]  # SHOW VERSION refused: plan for the pin
    assert d.version is None and d.planned_version == mg.PINNED_VERSION
    assert d.schema_state(Refusing())["indexes"] == {  # type: ignore[arg-type]
        "refused": "SHOW INDEX INFO",
        "by": "GraphQueryError",
    }


# --- vector indexes and search (dense retrieval), read at tag v3.10.1 ----------------------
# [VS-10] query_modules/vector_search_module.cpp @ v3.10.1: procedure search(index_name ::
#         String, result_set_size :: Int, query_vector :: List) -> (node, distance,
#         similarity); function cosine_similarity(vector1, vector2).
# [VI-10] src/query/frontend/opencypher/grammar/MemgraphCypher.g4 @ v3.10.1: createVectorIndex
#         : CREATE VECTOR INDEX indexName ON ':' labelName ( '(' propertyKeyName ')' )? WITH
#         CONFIG configsMap; src/query/interpreter.cpp VectorIndexConfigFromTypedMap: dimension
#         and capacity mandatory, metric default "l2sq"; MetricFromName
#         (src/storage/v2/indices/vector_index_utils.hpp): "cos" is cosine; a failed CREATE
#         answers with a notification ("Error while creating vector index ..."), not an error.


def test_vector_index_ddl_is_the_grammars_with_cosine_metric() -> None:
    stmt = mg.create_vector_index_statement("chunk_embedding", "Chunk", "embedding", 384, 500)
    assert stmt == (
        "CREATE VECTOR INDEX `chunk_embedding` ON :`Chunk`(`embedding`) WITH CONFIG "
        '{"dimension": 384, "capacity": 500, "metric": "cos"}'
    )
    assert mg.vector_index_name("Chunk", "embedding") == "chunk_embedding"


def test_vector_index_discovery_keeps_node_indexes_only() -> None:
    (only,) = mg.vector_indexes_from_rows(VECTOR_ROWS)  # [IN-10]: edge indexes listed too
    assert (only.name, only.label, only.prop, only.dims) == ("doc_vec", "Document", "emb", 384)


def test_a_vector_index_create_answered_by_a_notification_is_caught() -> None:
    # [VI-10]: the server "accepts" a CREATE it did not carry out; only the listing tells.
    fake = FakeMemgraph()
    with pytest.raises(GraphQueryError, match="does not list it"):
        mg.MemgraphDialect(V310).create_vector_index(fake, "Chunk", "embedding", 384, 10)  # type: ignore[arg-type]
    assert any(q.startswith("CREATE VECTOR INDEX `chunk_embedding`") for q in fake.sent)
    listed = {**VECTOR_ROWS[0], "index_name": "chunk_embedding", "label": "Chunk"}
    listed["property"] = "embedding"
    ready = FakeMemgraph({"SHOW VECTOR INDEX INFO": [listed]})
    mg.MemgraphDialect(V310).create_vector_index(ready, "Chunk", "embedding", 384, 10)  # type: ignore[arg-type]
    assert not [q for q in ready.sent if q.startswith("CREATE")], "an existing index is kept"


def test_dense_statements_use_the_modules_names_and_pass_the_dense_readers_guard() -> None:
    from eval_pipeline.retrieve.dense import search_statement
    from eval_pipeline.retrieve.readonly_guard import (
        DEFAULT_ALLOWED_FUNCTIONS,
        DEFAULT_ALLOWED_PROCEDURES,
        VECTOR_FUNCTIONS,
        VECTOR_PROCEDURES,
    )

    dialect = mg.MemgraphDialect(V310)
    chunk = next(s for s in ftq.SOURCE_KINDS if s.kind == "chunk")
    batch = search_statement(dialect, chunk, scoped=False)
    scoped = search_statement(dialect, chunk, scoped=True)
    # [VS-10]: three positional arguments; `similarity` is higher-is-closer.
    assert batch.startswith(
        "CALL vector_search.search($index, $k, $vector) YIELD node, similarity\n"
        "WITH node, similarity AS score\n"
    )
    assert "vector_search.cosine_similarity(node.embedding, $vector) AS score" in scoped
    assert "node.session_id IN $haystack" in scoped
    for statement in (batch, scoped):
        check_read_only(
            statement,
            allowed_procedures=DEFAULT_ALLOWED_PROCEDURES | VECTOR_PROCEDURES,
            allowed_functions=DEFAULT_ALLOWED_FUNCTIONS | VECTOR_FUNCTIONS,
        )


# --- issue 29: haystack ranking, batched reconciliation writes, dense (read at tag v3.10.1) ---
# [CV-10]  src/query/frontend/ast/cypher_main_visitor.cpp, visitSingleQuery (lines 1905-2003):
#          the clause-order rules eval_pipeline_tests/graph/memgraph_clauses.py applies (UNWIND
#          and MATCH not after an update of the same part, MATCH not after OPTIONAL MATCH,
#          RETURN last and once, an update or a RETURN required; a writing CALL subquery makes
#          the query an updating one without counting as an update of the outer part).
# [SQ-10]  src/query/plan/rule_based_planner.hpp HandleSubquery (1397-1399): a subquery whose
#          plan ends in EmptyResult (no RETURN) is planned with subquery_has_return false;
#          src/query/plan/operator.cpp Apply::ApplyCursor::Pull (8598-8621): then the outer row
#          is passed on once the subquery is exhausted, whatever it produced (a unit subquery
#          over an empty UNWIND keeps its row). rule_based_planner.hpp 492-494: after a subquery
#          that writes, an Accumulate with advance_command (root query) pulls every row and
#          advances the command, so a later subquery's MATCH (View::OLD) sees what it created.
#          tests/gql_behave/tests/memgraph_V1/features/subqueries.feature: "Advance command on
#          multiple subqueries" (a CREATE subquery, then a MATCH subquery finds the node) and
#          "Unit scoped CALL subquery preserves outer row count".
# [AG-10]  src/query/plan/operator.cpp AggregateCursor: Update skips an input that is Null
#          (6482-6483) and pushes any other value, a list holding nulls included, into collect's
#          list as it is; with no grouping key and no input row, one row of defaults (6183-6190;
#          collect: an empty list, DefaultAggregationOpValue); groups live in an unordered_map
#          (6343), so rows leave an aggregation in no particular order.
# [PM-10]  src/query/plan/preprocess.cpp Filters::CollectPatternFilters add_properties (403-417):
#          a node's property map becomes an EQUAL PropertyFilter per key (a map parameter is
#          refused: "Property map matching not supported"), which rewrite/index_lookup.hpp turns
#          into ScanAllByLabelProperties where a label+property index exists and the value's
#          symbols are bound (an UNWIND variable is).
# [MN-10]  src/query/plan/operator.cpp CreateLocalVertex (611-619): a null value in a MERGE
#          pattern's property map raises "Can't have null literal properties inside merge".
# [TX-10]  src/query/interpreter.cpp DetermineTxTimeout (3314-3329) and the BEGIN handler
#          (3353): --query-execution-timeout-sec bounds a whole explicit transaction from BEGIN
#          (the driver's transaction timeout can only shorten it); there is no per-query or
#          per-transaction size limit besides --memory-limit; Bolt messages are read chunk by
#          chunk with no total cap (src/communication/bolt/v1/decoder/chunked_decoder_buffer.hpp).
# [VX-10]  src/query/frontend/ast/ast.hpp (54-61): keys "metric", "dimension", "capacity",
#          "resize_coefficient", "scalar_kind"; defaults l2sq, 2, f32. src/query/interpreter.cpp
#          VectorIndexConfigFromTypedMap (2459-2495): dimension cast to std::uint16_t.
#          MemgraphCypher.g4 (624): configKeyValuePair : literal ':' ( literal | parameter ).
#          src/storage/v2/indices/vector_index_utils.hpp: MetricFromName accepts "cos" or
#          "angular" for cosine; SimilarityFromDistance (270-289) gives 1 - distance for cosine,
#          the value of query_modules/vector_search_module.cpp's cosine_similarity (dot product
#          over the norms), so batch (index) and question (function) scores share one scale.
#          src/query/typed_value.cpp (200-204): an indexed vector property reads back as a List.

WRITER_STATEMENTS = {
    name: getattr(writer, name)
    for name in (
        "CLEAR_SESSION",
        "WRITE_SESSION",
        "MERGE_ENTITIES",
        "WRITE_SESSIONS",
        "MARK_FAILED",
        "RECORD_MEMORY",
    )
}


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        ("CREATE (n) MATCH (m) RETURN m", "MATCH after an update or RETURN"),
        ("UNWIND [1] AS x CREATE (n) UNWIND [2] AS y CREATE (m)", "UNWIND after an update"),
        ("OPTIONAL MATCH (a) MATCH (b) RETURN b", "MATCH after OPTIONAL MATCH"),
        ("MATCH (n)", "neither an update nor a RETURN"),
        ("MATCH (n) RETURN n RETURN n", "a second RETURN"),
        ("CALL { MATCH (n) RETURN n QUERY MEMORY UNLIMITED } RETURN n", "memory limit"),
        ("CALL { WITH 1 AS x CREATE (n) MATCH (m) RETURN m } RETURN m", "in CALL {}: MATCH"),
    ],
)
def test_the_clause_checker_refuses_what_memgraphs_parser_refuses(statement, problem) -> None:
    # [CV-10]: each of these raises a SemanticException/SyntaxException there.
    assert any(problem in p for p in memgraph_clauses.problems(statement)), statement


@pytest.mark.parametrize(
    "statement",
    [
        # [SQ-10]'s feature scenarios, verbatim in substance.
        'CALL { CREATE (n:Movie {title: "Forrest Gump"}) } CALL { MATCH (n) RETURN n } '
        "RETURN n.title AS title",
        "MATCH (p:Player) CALL (p) { UNWIND range(1, 3) AS i CREATE (:Person {name: p.name}) } "
        "RETURN count(*)",
        "UNWIND [1] AS x CREATE (n) WITH n UNWIND [2] AS y CREATE (m)",
        "MERGE (n:A {k: 1}) ON CREATE SET n.x = 1 ON MATCH SET n.y = 2 RETURN n",
        "MATCH (n) WHERE n.a STARTS WITH 'x' OR n.b ENDS WITH 'y' RETURN n",
    ],
)
def test_the_clause_checker_accepts_what_memgraph_runs(statement: str) -> None:
    assert memgraph_clauses.problems(statement) == []


@pytest.mark.parametrize("name", sorted(WRITER_STATEMENTS))
def test_reconcile_writes_follow_memgraphs_clause_order(name: str) -> None:
    statement = WRITER_STATEMENTS[name]
    assert memgraph_clauses.clauses(statement), name
    assert memgraph_clauses.problems(statement) == [], name


def test_batched_writes_are_unit_subqueries_whose_matches_follow_the_creates() -> None:
    """[SQ-10]: a session whose lists are empty still reaches the final SET and RETURN (unit
    subqueries keep the outer row), and every MATCH of a node this statement creates comes in a
    later subquery than its CREATE (the Accumulate that advances the command sits between)."""
    for statement in (writer.WRITE_SESSION, writer.WRITE_SESSIONS):
        top = memgraph_clauses.clauses(statement)
        subqueries = [c for c in top if c.name == "CALL {}"]
        assert len(subqueries) >= 8
        assert [c.name for c in top[-2:]] == ["SET", "RETURN"]
        created: set[str] = set()
        for sub in subqueries:
            names = [c.name for c in sub.body]
            assert "RETURN" not in names, sub.text  # a unit subquery
            assert names[0] == "WITH", sub.text  # imports by a leading WITH
            matched = {
                label
                for c in sub.body
                if c.name == "MATCH"
                for label in re.findall(r"\(\w+:(\w+)", c.text)
            }
            made_here = {
                label
                for c in sub.body
                if c.name in {"CREATE", "MERGE"}
                for label in re.findall(r"\(\w*:(\w+) \{", c.text)
            }
            assert not (matched & made_here), sub.text
            mine = {reconcile_schema.CHUNK, reconcile_schema.FACT, reconcile_schema.EPISODE}
            assert (matched & mine) <= created, (matched, created)
            created |= made_here
        assert {reconcile_schema.CHUNK, reconcile_schema.FACT, reconcile_schema.EPISODE} <= created


def test_merge_patterns_never_carry_a_null() -> None:
    """[MN-10]: Memgraph raises on a null inside a MERGE pattern (a Neo4j-like engine merges or
    refuses alike): the only MERGE keys the writers send are an entity's `key` (a required
    str) and the configuration's pins key, which `record_memory` always passes."""
    from eval_pipeline.reconcile.models import MemoryEntity

    every = "\n".join(WRITER_STATEMENTS.values())
    merges = re.findall(r"MERGE \(\w+:\w+ \{(\w+): ([^}]+)\}\)", every)
    assert sorted(set(merges)) == [("key", "e.key"), ("pins_key", "$pins_key")]
    field = MemoryEntity.model_fields["key"]
    assert field.annotation is str and field.is_required()
    with pytest.raises(ValueError):
        MemoryEntity(key=None, name="x", type="person")  # type: ignore[arg-type]


def test_ids_matched_by_the_writes_and_picked_rows_are_indexed_on_memgraph() -> None:
    """[PM-10]: every `(n:Label {prop: value})` the batched writes and `picked_statement`
    match on is a label+property index the Memgraph dialect creates."""
    dialect = mg.MemgraphDialect(V310)
    ddl = set(dialect.create_index_statements(schema.PROPERTY_INDEXES))
    ddl |= set(dialect.reconcile_index_statements(reconcile_schema.INDEXES))
    statements = [writer.WRITE_SESSIONS, writer.MERGE_ENTITIES, writer.WRITE_SESSION]
    statements += [ftq.picked_statement(s) for s in ftq.SOURCE_KINDS]
    statements += [ftq.haystack_documents_statement(s) for s in ftq.SOURCE_KINDS]
    seen = set()
    for statement in statements:
        for clause in re.findall(r"\b(?:MATCH|MERGE) (\([^)]*\{[^)]*\))", statement):
            for label, prop in re.findall(r"\(\w*:(\w+) \{(\w+):", clause):
                seen.add((label, prop))
                assert f"CREATE INDEX ON :`{label}`(`{prop}`)" in ddl, (label, prop, statement)
    assert (schema.QUESTION, "question_id") in seen
    assert {(s.label, s.id_property) for s in ftq.SOURCE_KINDS} <= seen


@pytest.mark.parametrize("source", ftq.SOURCE_KINDS, ids=lambda s: s.kind)
def test_haystack_documents_collect_whole_lists_in_one_row(source) -> None:
    """[AG-10]: collect's argument is a list literal, never null itself, so Memgraph keeps every
    node's list with its nulls in place (fields stay in step with HAYSTACK_DOC_FIELDS), and the
    aggregation without a grouping key answers one row (`[]` when the haystack is empty): the
    reader's `max_rows=1` holds. [PM-10]: the walk starts at the indexed question id."""
    statement = ftq.haystack_documents_statement(source)
    assert memgraph_clauses.problems(statement) == []
    assert statement.startswith(f"MATCH (:{schema.QUESTION} {{question_id: $question_id}})-")
    ret = memgraph_clauses.clauses(statement)[-1]
    collected = re.fullmatch(r"RETURN collect\(\[([^\[\]]+)\]\) AS docs", ret.text)
    assert collected, ret.text
    fields = [f.strip() for f in collected.group(1).split(",")]
    names = [f.split(".", 1)[1] for f in fields]
    width = 5 if source.turn_link is None else 2
    assert len(fields) == width
    assert names[:2] == [source.id_property, source.text_property]
    assert ftq.HAYSTACK_DOC_FIELDS[2:width] == tuple(names[2:])
    assert "WITH DISTINCT node" in statement  # a node reached by two haystack sessions: once
    bounded = mg.bound_read(statement)
    check_read_only(bounded)
    assert bounded.endswith("\nQUERY MEMORY LIMIT 1024 MB")


@pytest.mark.parametrize("source", ftq.SOURCE_KINDS, ids=lambda s: s.kind)
def test_picked_rows_follow_memgraphs_clause_order_and_pass_the_guard(source) -> None:
    statement = ftq.picked_statement(source)
    assert memgraph_clauses.problems(statement) == []
    names = [c.name for c in memgraph_clauses.clauses(statement)]
    assert names[:3] == ["UNWIND", "MATCH", "WITH"]
    check_read_only(mg.bound_read(statement))


def test_ranking_does_not_rest_on_the_servers_row_order() -> None:
    """[AG-10]: after `_tail`'s collect, Memgraph returns a source's rows in hash order, not in
    the ORDER BY before it; the retriever ranks them itself (score, kind, id)."""
    from eval_pipeline.retrieve.fulltext import FulltextRetriever

    chunk = next(s for s in ftq.SOURCE_KINDS if s.kind == "chunk")
    rows = [
        {"id": f"c{i}", "session_id": "s1", "text": f"chunk {i}", "role": None,
         "timestamp": None, "turn_ids": [f"s1_t{i}"], "score": float(i % 3)}
        for i in range(6)
    ]  # fmt: skip
    retriever = object.__new__(FulltextRetriever)
    retriever.context_format = "text"
    ranked = [
        [item.node_ids[0] for item in retriever._rank([(chunk, r) for r in order], 4)[0]]
        for order in (rows, rows[::-1], rows[3:] + rows[:3])
    ]
    assert ranked[0] == ["c2", "c5", "c1", "c4"]
    assert ranked[0] == ranked[1] == ranked[2]


def test_batched_transactions_stay_within_memgraphs_bounds() -> None:
    """[TX-10]: nothing bounds a write transaction's size on Memgraph but the instance's
    --memory-limit and --query-execution-timeout-sec counted from BEGIN; the project runs in
    IN_MEMORY_TRANSACTIONAL (reconciliation refuses IN_MEMORY_ANALYTICAL) with docker-compose's
    300 s and 8 GiB. A batch is capped in sessions, and the vector writes in rows and bytes."""
    from pathlib import Path

    from eval_pipeline.graph import vectors
    from eval_pipeline.reconcile import runner

    compose = (Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text()
    timeout = re.search(r"--query-execution-timeout-sec=(\d+)", compose)
    assert timeout and int(timeout.group(1)) >= 300
    assert runner.WRITE_BATCH <= 100
    assert vectors.WRITE_ROWS * 384 * 24 < 64 << 20  # JSON floats: well under a few MB
    fake = FakeMemgraph(ANALYTICAL_INFO)
    with pytest.raises(GraphError, match="IN_MEMORY_ANALYTICAL"):
        mg.MemgraphDialect(V310).require_transactions(fake, "reconciliation")  # type: ignore[arg-type]


def test_vector_writes_and_index_config_at_the_tag() -> None:
    """[VX-10]: string-literal keys the grammar takes, mandatory dimension and capacity, cosine
    (so similarity = the module's cosine_similarity), f32 by default; a dimension a uint16
    cannot hold is refused before the server wraps it; the embedding write is plain Cypher."""
    import json

    from eval_pipeline.graph.vectors import VectorSource, _write_statement

    stmt = mg.create_vector_index_statement("turn_embedding", "Turn", "embedding", 384, 0)
    config = json.loads(stmt.split(" WITH CONFIG ", 1)[1])
    assert config == {"dimension": 384, "capacity": 1, "metric": "cos"}
    assert set(config) <= {"dimension", "capacity", "metric", "resize_coefficient", "scalar_kind"}
    for dims in (0, 65_536, 100_000):
        with pytest.raises(GraphError, match="1 to 65535 dimensions"):
            mg.create_vector_index_statement("x", "Turn", "embedding", dims, 10)
    assert "65535" in mg.create_vector_index_statement("x", "Turn", "embedding", 65_535, 10)
    for source in ftq.SOURCE_KINDS:
        vector_source = VectorSource(source.label, source.text_property, source.id_property)
        write = _write_statement(vector_source)
        assert memgraph_clauses.problems(write) == [], write
        assert [c.name for c in memgraph_clauses.clauses(write)] == ["UNWIND", "MATCH", "SET"]


def _every_statement() -> dict[str, str]:
    """Statements the pipeline sends to Memgraph besides the writers': injection's (one shape
    per turn count) and the module-level ones of graph.schema, and retrieval's reads."""
    from eval_pipeline.retrieve import dense

    dialect = mg.MemgraphDialect(V310)
    found = {f"sessions with {n} turns": schema.create_sessions_statement(n) for n in range(4)}
    for name, value in sorted(vars(schema).items()):
        if isinstance(value, str) and re.match(r"\s*(MATCH|UNWIND|MERGE|CREATE|OPTIONAL)", value):
            found[f"schema.{name}"] = value
    for source in ftq.SOURCE_KINDS:
        for scoped in (False, True):
            found[f"fulltext {source.kind} {scoped}"] = ftq.search_statement(
                dialect, source, scoped=scoped
            )
            found[f"dense {source.kind} {scoped}"] = dense.search_statement(
                dialect, source, scoped=scoped
            )
    found["fulltext successors"] = ftq.SUCCESSORS_STATEMENT
    found["haystack"] = ftq.HAYSTACK_STATEMENT
    return found


EVERY_STATEMENT = _every_statement()


@pytest.mark.parametrize("name", sorted(EVERY_STATEMENT))
def test_injection_and_retrieval_statements_follow_memgraphs_clause_order(name: str) -> None:
    # [CV-10], for the statements read before issue 29 too (cheap, and one checker for all).
    statement = EVERY_STATEMENT[name]
    assert memgraph_clauses.clauses(statement), name
    assert memgraph_clauses.problems(statement) == [], (name, statement)


def test_the_statement_list_covers_injection_and_both_retrievers() -> None:
    names = set(EVERY_STATEMENT)
    assert {"schema.CREATE_QUESTIONS", "fulltext turn True", "dense fact True"} <= names
    assert len(names) >= 25
