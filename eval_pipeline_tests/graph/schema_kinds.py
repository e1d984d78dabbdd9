"""Every kind of schema object a backend holds, made one at a time, for the conformance suite's
wipe tests (test_conformance.py): the wipe must leave none of them, and "empty" must see each.

A kind is a name and the statements that make it. ArcadeDB's were probed on 26.10.x (SQL over
the server's HTTP API where Cypher cannot, `sql:` prefix). Memgraph's cannot run here: each is
written from the grammar and interpreter at tag v3.10.1 (memgraph/memgraph, commit 0e77b786:
src/query/frontend/opencypher/grammar/MemgraphCypher.g4 and Cypher.g4 for the forms,
src/query/interpreter.cpp for the vector index config keys `dimension`, `capacity`, `metric`
(src/query/frontend/ast/ast.hpp) and the index `order` config, src/storage/v2/constraints/
type_constraints_kind.hpp for the type kinds), and checked wherever EVAL_TEST_MEMGRAPH_URI is
set (the CI workflow .github/workflows/memgraph.yml).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class SchemaKind(NamedTuple):
    name: str
    statements: tuple[str, ...]  # `sql:` = ArcadeDB SQL over HTTP; else Cypher, auto-commit
    setup: tuple[str, ...] = ()  # what the kind needs first (its types): not the kind itself


ARCADEDB_KINDS: tuple[SchemaKind, ...] = (
    SchemaKind("vertex type with records", ("CREATE (:Probe {i: 1})",)),
    SchemaKind("empty vertex type", ("sql:CREATE VERTEX TYPE EmptyProbe",)),
    SchemaKind(
        "edge type",
        ("CREATE (:Probe {i: 1})-[:LINKS]->(:Probe {i: 2})",),
    ),
    SchemaKind(
        "document type with records",
        ("sql:CREATE DOCUMENT TYPE Invoice", "sql:INSERT INTO Invoice SET n = 1"),
    ),
    SchemaKind("range index", ("CREATE INDEX probe_i IF NOT EXISTS FOR (n:Probe) ON (n.i)",)),
    SchemaKind(
        "unique constraint",
        ("CREATE CONSTRAINT probe_key IF NOT EXISTS FOR (n:Probe) REQUIRE n.key IS UNIQUE",),
    ),
    SchemaKind(
        "full-text index",
        ("sql:CREATE INDEX IF NOT EXISTS ON Note (text) FULL_TEXT",),
        ("sql:CREATE VERTEX TYPE Note IF NOT EXISTS", "sql:CREATE PROPERTY Note.text STRING"),
    ),
    SchemaKind(
        "mandatory property",
        ("sql:CREATE PROPERTY Strict.p STRING (MANDATORY true)",),
        ("sql:CREATE VERTEX TYPE Strict",),
    ),
    # Triggers outlive `DROP TYPE ... UNSAFE` (probed on 26.10.x) and would fire again on a
    # type of the same name.
    SchemaKind(
        "trigger",
        (
            "sql:CREATE TRIGGER audit_probe AFTER CREATE ON TYPE Audited "
            "EXECUTE SQL 'INSERT INTO AuditLog SET seen = true'",
        ),
        ("sql:CREATE DOCUMENT TYPE AuditLog", "sql:CREATE VERTEX TYPE Audited"),
    ),
    SchemaKind(
        "trigger on a type of its own only",
        ("sql:CREATE TRIGGER watch_probe BEFORE DELETE ON TYPE Watched EXECUTE SQL 'SELECT 1'",),
        ("sql:CREATE VERTEX TYPE Watched",),
    ),
    SchemaKind(
        "vector index",
        (
            "sql:CREATE INDEX ON Doc (emb) LSM_VECTOR "
            "METADATA {dimensions: 2, similarity: 'COSINE'}",
        ),
        ("sql:CREATE VERTEX TYPE Doc", "sql:CREATE PROPERTY Doc.emb ARRAY_OF_FLOATS"),
    ),
    # A view's source type cannot be dropped while the view exists.
    SchemaKind(
        "materialized view",
        ("sql:CREATE MATERIALIZED VIEW doc_view AS SELECT FROM Doc",),
        ("CREATE (:Doc {i: 1})",),
    ),
    # The claim's type stays through the wipe; an index someone put on it does not.
    SchemaKind(
        "index on the kept claim type",
        ("sql:CREATE INDEX IF NOT EXISTS ON EvalPipelineClaim (probe) NOTUNIQUE",),
        ("sql:CREATE PROPERTY EvalPipelineClaim.probe IF NOT EXISTS STRING",),
    ),
)

_VECTOR_CONFIG = '{"dimension": 2, "capacity": 16, "metric": "cos"}'
MEMGRAPH_KINDS: tuple[SchemaKind, ...] = (
    SchemaKind("nodes and relationships", ("CREATE (:Probe {i: 1})-[:LINKS]->(:Probe {i: 2})",)),
    SchemaKind("label index", ("CREATE INDEX ON :Probe",)),
    SchemaKind("label+property index", ("CREATE INDEX ON :Probe(i)",)),
    SchemaKind("composite index", ("CREATE INDEX ON :Probe(i, j)",)),
    SchemaKind("nested property index", ("CREATE INDEX ON :Probe(meta.lang)",)),
    SchemaKind("descending index", ('CREATE INDEX ON :Probe(i) WITH CONFIG {"order": "DESC"}',)),
    SchemaKind("edge-type index", ("CREATE EDGE INDEX ON :LINKS",)),
    SchemaKind("edge-type+property index", ("CREATE EDGE INDEX ON :LINKS(w)",)),
    SchemaKind("global edge property index", ("CREATE GLOBAL EDGE INDEX ON :(w)",)),
    SchemaKind("point index", ("CREATE POINT INDEX ON :Probe(loc)",)),
    SchemaKind("text index", ("CREATE TEXT INDEX probe_text ON :Probe(text)",)),
    SchemaKind("text edge index", ("CREATE TEXT EDGE INDEX links_text ON :LINKS(text)",)),
    SchemaKind(
        "vector index",
        (f"CREATE VECTOR INDEX probe_vec ON :Probe(emb) WITH CONFIG {_VECTOR_CONFIG}",),
    ),
    SchemaKind(
        "vector edge index",
        (f"CREATE VECTOR EDGE INDEX links_vec ON :LINKS(emb) WITH CONFIG {_VECTOR_CONFIG}",),
    ),
    SchemaKind("existence constraint", ("CREATE CONSTRAINT ON (n:Probe) ASSERT EXISTS (n.i)",)),
    SchemaKind("unique constraint", ("CREATE CONSTRAINT ON (n:Probe) ASSERT n.i IS UNIQUE",)),
    SchemaKind(
        "composite unique constraint", ("CREATE CONSTRAINT ON (n:Probe) ASSERT n.i, n.j IS UNIQUE",)
    ),
    # The four kinds whose printed name is not the grammar's keyword, and one that is.
    *(
        SchemaKind(
            f"type constraint {kind}",
            (f"CREATE CONSTRAINT ON (n:Probe) ASSERT n.p_{kind.lower()} IS TYPED {kind}",),
        )
        for kind in ("BOOLEAN", "LOCALTIME", "LOCALDATETIME", "ZONEDDATETIME", "STRING")
    ),
    SchemaKind(
        "trigger", ("CREATE TRIGGER probe_trigger ON () CREATE AFTER COMMIT EXECUTE RETURN 1",)
    ),
)

KINDS: dict[str, tuple[SchemaKind, ...]] = {"arcadedb": ARCADEDB_KINDS, "memgraph": MEMGRAPH_KINDS}


def backend_kinds(backends: list[str]) -> list[tuple[str, SchemaKind]]:
    """(backend, kind) for every kind of each backend in `backends`."""
    return [(b, kind) for b in backends for kind in KINDS[b]]


def make(store: Any, kind: SchemaKind, *, setup: bool = True) -> None:
    """Run `kind`'s setup (unless `setup` is False) and statements against `store`."""
    for statement in (*(kind.setup if setup else ()), *kind.statements):
        if statement.startswith("sql:"):
            http = store.http()
            assert http is not None, "ArcadeDB's HTTP API is needed for SQL"
            http.sql(store.database, statement.removeprefix("sql:"))
        else:
            store.autocommit(statement)


def make_setup(store: Any, kind: SchemaKind) -> None:
    """Run only what `kind` needs first."""
    make(store, kind._replace(statements=()))
