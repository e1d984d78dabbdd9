"""Backend conformance: the store, injection and the wipe, on every backend.

Each test runs once per backend of `backend_store` (eval_pipeline_tests/conftest.py): the
embedded ArcadeDB always, a Memgraph server when EVAL_TEST_MEMGRAPH_URI is set. What a backend
does differently is the dialect's (eval_pipeline.graph.dialects.DIFFERENCES); these tests hold
every backend to the same observable behaviour: every statement kind the pipeline sends —
claim, wipe (of every index, constraint, trigger and type kind: schema_kinds.py), injection,
fingerprint, lease, full-text indexes and search, the guard's accepted reads and their
cancellation, and the writers (here and in reconcile/test_conformance_writer.py,
retrieve/test_conformance_retrieval.py). The CI workflow (.github/workflows/memgraph.yml) runs
it against Memgraph 3.10.1 and checks how many tests it collected.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from eval_pipeline.graph import lease, schema
from eval_pipeline.graph.checks import (
    counts_report,
    evidence_markers,
    fingerprint_report,
    graph_holds,
)
from eval_pipeline.graph.dialects.base import KEPT_LABELS
from eval_pipeline.graph.errors import GraphError, GraphQueryError, GraphRowLimitError
from eval_pipeline.graph.inject import graph_counts, inject_fixtures
from eval_pipeline.graph.state import graph_state
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.retrieve.guarded_read import GuardedReader
from eval_pipeline_tests.conftest import conformance_backends
from eval_pipeline_tests.graph.conftest import write_fixtures
from eval_pipeline_tests.graph.schema_kinds import (
    KINDS,
    SchemaKind,
    backend_kinds,
    make,
    make_setup,
)

pytestmark = pytest.mark.conformance


def test_the_server_is_known_and_supported(backend_store: GraphStore, backend: str):
    version = backend_store.server_version()
    assert version.lower().startswith(backend), version
    if backend == "memgraph":
        dialect = backend_store.dialect
        assert dialect.version is not None and dialect.version >= (3, 5, 0)  # type: ignore[attr-defined]


def test_writes_reads_and_the_row_cap(backend_store: GraphStore):
    store = backend_store
    store.claim()
    store.write("UNWIND range(1, 5) AS i CREATE (:Probe {i: i})")
    rows = store.read("MATCH (p:Probe) RETURN p.i AS i ORDER BY i")
    assert [r["i"] for r in rows] == [1, 2, 3, 4, 5]
    with pytest.raises(GraphRowLimitError):
        store.read("MATCH (p:Probe) RETURN p.i AS i", max_rows=2)


def test_a_failing_write_transaction_leaves_nothing(backend_store: GraphStore):
    store = backend_store
    store.claim()
    with pytest.raises(GraphError):
        store.write_transaction([("CREATE (:Probe {i: 1})", {}), ("THIS IS NOT CYPHER", {})])
    assert store.read("MATCH (p:Probe) RETURN count(p) AS n")[0]["n"] == 0
    store.write_transaction([("CREATE (:Probe {i: 1})", {}), ("CREATE (:Probe {i: 2})", {})])
    assert store.read("MATCH (p:Probe) RETURN count(p) AS n")[0]["n"] == 2


def test_injection_loads_exactly_the_fixtures_and_indexes_turn_text(
    backend_store: GraphStore, tmp_path: Path
):
    store = backend_store
    fixtures = write_fixtures(tmp_path / "fixtures.jsonl")
    report = inject_fixtures(store, fixtures)
    counts, _ = graph_counts(store)
    assert counts == report.counts
    assert store.dialect.name == report.backend
    hits = store.fulltext_search("café", limit=5)
    assert hits and all(h["turn_id"] and h["score"] > 0 for h in hits)
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    names = [i.name for i in store.dialect.text_indexes(store)]
    assert store.dialect.text_index_name(*schema.FULLTEXT_PROPERTY) in names


def test_the_wipe_leaves_an_empty_instance(backend_store: GraphStore, tmp_path: Path):
    store = backend_store
    inject_fixtures(store, write_fixtures(tmp_path / "fixtures.jsonl"))
    assert not store.is_empty()
    store.wipe()
    assert store.foreign_content().is_empty(), store.foreign_content().describe()
    assert store.dialect.text_indexes(store) == []
    # The claim survives the wipe: the instance stays ours.
    assert store.claim_record() is not None


def test_text_indexes_are_created_once_and_dropped(backend_store: GraphStore):
    store = backend_store
    store.claim()
    store.write("CREATE (:Chunk {chunk_id: 'c1', text: 'a red bike in Paris'})")
    dialect = store.dialect
    dialect.create_text_index(store, "Chunk", "text")
    dialect.create_text_index(store, "Chunk", "text")  # exists already: fine
    listed = [i for i in dialect.text_indexes(store) if i.covers("Chunk", "text")]
    assert [i.name for i in listed] == [dialect.text_index_name("Chunk", "text")]
    dialect.drop_text_index(store, "Chunk", "text")
    dialect.drop_text_index(store, "Chunk", "text")  # gone already: fine
    assert not [i for i in dialect.text_indexes(store) if i.covers("Chunk", "text")]


# --- the wipe, kind by kind -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "kind"),
    backend_kinds(conformance_backends()),
    ids=[f"{b}-{k.name}" for b, k in backend_kinds(conformance_backends())],
)
def test_every_schema_kind_is_seen_and_wiped(backend_store: GraphStore, kind: SchemaKind):
    """Each kind of schema object shows in the inventory ("empty" sees it, apart from what it
    needs first), and the dialect's wipe leaves none of it (schema_kinds.py says where each
    form comes from)."""
    store = backend_store
    store.claim()
    dialect = store.dialect
    make_setup(store, kind)
    before = dialect.inventory(store)
    make(store, kind, setup=False)
    added = dialect.inventory(store).added_since(before)
    assert not added.is_empty(), f"{kind.name} is not in the inventory"
    dialect.wipe(store)
    left = dialect.inventory(store).without(KEPT_LABELS)
    assert left.is_empty(), f"{kind.name}: {left.describe()}"
    assert store.claim_record() is not None  # the claim's type and node stay


def _kind(backend: str, name: str) -> SchemaKind:
    return next(k for k in KINDS[backend] if k.name == name)


def test_a_trigger_is_part_of_the_schema_fingerprint(backend_store: GraphStore, backend: str):
    store = backend_store
    store.claim()
    trigger = _kind(backend, "trigger")
    make_setup(store, trigger)
    before = graph_state(store).schema_fingerprint
    assert graph_state(store).schema_fingerprint == before  # nothing changed, nothing moved
    make(store, trigger, setup=False)
    assert graph_state(store).schema_fingerprint != before


# --- claim, lease, fingerprint ----------------------------------------------------------------


def test_the_claim_makes_an_empty_instance_ours_once(backend_store: GraphStore):
    store = backend_store
    assert store.claim_record() is None
    store.claim()
    first = store.claim_record()
    store.claim()  # claiming again keeps the one claim
    assert first is not None and store.claim_record()["owner"] == first["owner"]
    assert store.read(f"MATCH (c:{schema.CLAIM}) RETURN count(c) AS n")[0]["n"] == 1
    assert store.is_empty()  # our own claim is no content


def test_the_lease_is_exclusive_renewable_and_released(backend_store: GraphStore):
    store = backend_store
    store.claim()
    with lease.hold(store, lease.Lease(holder="chain-a", run_id="run-a"), release_after=True):
        token = lease.read_leases(store)[0].token
        with pytest.raises(lease.LeaseHeld, match="run run-a"):
            lease.acquire(store, lease.Lease(holder="chain-b"))
        assert lease.acquire(store, lease.Lease(holder="chain-a")) == token  # renewed
        store.wipe()  # the wipe leaves the lease alone: it names the wiping chain
        assert lease.holder_of(store).holder == "chain-a"  # type: ignore[union-attr]
    assert lease.holder_of(store) is None and lease.read_leases(store) == []


def test_the_fingerprint_names_the_fixtures_the_graph_holds(
    backend_store: GraphStore, tmp_path: Path
):
    store = backend_store
    fixtures = write_fixtures(tmp_path / "fixtures.jsonl")
    inject_fixtures(store, fixtures)
    same, details = fingerprint_report(store, fixtures)
    assert same, details
    holds, why = graph_holds(store, details["fixtures_fingerprint"])
    assert holds, why
    other = write_fixtures(tmp_path / "other.jsonl", sessions=5)
    assert not fingerprint_report(store, other)[0]
    assert not graph_holds(store, fingerprint_report(store, other)[1]["fixtures_fingerprint"])[0]


def test_injection_leaves_no_evidence_marker_and_exact_counts(
    backend_store: GraphStore, tmp_path: Path
):
    store = backend_store
    fixtures = write_fixtures(tmp_path / "fixtures.jsonl")
    inject_fixtures(store, fixtures)
    assert evidence_markers(store) == []
    problems, expected = counts_report(store, fixtures)
    assert problems == [] and expected["turns"] > 0


def test_injection_replaces_the_previous_graph(backend_store: GraphStore, tmp_path: Path):
    store = backend_store
    inject_fixtures(store, write_fixtures(tmp_path / "big.jsonl", sessions=24))
    report = inject_fixtures(store, write_fixtures(tmp_path / "small.jsonl", sessions=6))
    counts, _ = graph_counts(store)
    assert counts == report.counts and counts.sessions == 6


# --- full-text indexes are verified -----------------------------------------------------------


def test_a_text_index_the_server_does_not_list_is_an_error(backend_store: GraphStore):
    store = backend_store
    store.claim()
    with pytest.raises(GraphQueryError, match="does not list it"):
        store.dialect.require_text_index(store, "NoSuchLabel", "text")


# --- reads the guard accepts, and stopping them -----------------------------------------------

ACCEPTED_READS = {
    "aggregation": (
        "MATCH (s:Session)-[:HAS_TURN]->(t:Turn) "
        "RETURN s.session_id AS s, count(t) AS n ORDER BY s LIMIT 3"
    ),
    "optional match": "OPTIONAL MATCH (q:Question {question_id: 'nope'}) RETURN q IS NULL AS none",
    "string literal naming the memory clause": (
        "MATCH (t:Turn) WHERE t.text CONTAINS 'query memory' RETURN count(t) AS n"
    ),
    "unwind and with": "UNWIND [1, 2, 3] AS x WITH x WHERE x > 1 RETURN collect(x) AS xs",
    "path along NEXT": (
        "MATCH (a:Turn)-[:NEXT]->(b:Turn) RETURN a.turn_id AS a, b.turn_id AS b ORDER BY a LIMIT 2"
    ),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED_READS))
def test_reads_the_guard_accepts_run_bounded(backend_store: GraphStore, tmp_path: Path, name: str):
    store = backend_store
    inject_fixtures(store, write_fixtures(tmp_path / "fixtures.jsonl"))
    before = graph_state(store).fingerprint
    rows = GuardedReader(store).read(ACCEPTED_READS[name])
    assert rows, name
    assert graph_state(store).fingerprint == before


def test_the_schema_descriptions_search_example_runs_through_the_guard(
    backend_store: GraphStore, tmp_path: Path
):
    store = backend_store
    inject_fixtures(store, write_fixtures(tmp_path / "fixtures.jsonl"))
    label, prop = schema.FULLTEXT_PROPERTY
    example = store.dialect.fulltext_example(store.dialect.text_index_name(label, prop), prop)
    example = example.replace("word1 OR word2", "café")
    rows = GuardedReader(store).read(example)
    assert rows


def test_cancelling_a_read_that_already_ended_stops_nothing(backend_store: GraphStore):
    store = backend_store
    statement = store.dialect.bound_read("RETURN 1 AS ok")
    submitted = time.time()
    assert store.read(statement) == [{"ok": 1}]
    assert store.dialect.cancel_query(store, statement, submitted) == []


# --- the writers: session-level and namespaced ------------------------------------------------


def test_the_none_reconciler_registers_its_memory_and_writes_nothing_else(
    backend_store: GraphStore, tmp_path: Path
):
    from eval_pipeline.reconcile import load_reconciler, reconcile_pending
    from eval_pipeline.reconcile.reader import read_statuses

    store = backend_store
    inject_fixtures(store, write_fixtures(tmp_path / "fixtures.jsonl"))
    counts_before, _ = graph_counts(store)
    report = reconcile_pending(store, load_reconciler("none"), concurrency=2)
    assert report.failures == [] and set(read_statuses(store).values()) == {"done"}
    assert graph_counts(store)[0] == counts_before
    for label in ("Chunk", "Fact", "Entity", "Episode"):
        assert store.read(f"MATCH (n:{label}) RETURN count(n) AS n")[0]["n"] == 0, label


@pytest.fixture
def consolidated(backend_store: GraphStore, tmp_path: Path) -> GraphStore:
    from eval_pipeline.reconcile import load_reconciler, reconcile_pending
    from eval_pipeline_tests.reconcile.namespace_fixtures import write_namespace_fixtures

    inject_fixtures(backend_store, write_namespace_fixtures(tmp_path / "fixtures.jsonl"))
    report = reconcile_pending(backend_store, load_reconciler("consolidating"), concurrency=2)
    assert report.failures == []
    return backend_store


def test_namespaces_are_written_apart_and_pass_the_memory_checks(consolidated: GraphStore):
    from eval_pipeline.reconcile import memory_checks
    from eval_pipeline.reconcile import schema as memory_schema

    store = consolidated
    spaces = store.read(f"MATCH (m:{memory_schema.NAMESPACE}) RETURN m.namespace AS ns ORDER BY ns")
    assert spaces and all(r["ns"] for r in spaces)
    shared = store.read(
        "MATCH (f:Fact)-[:ABOUT]->(e:Entity) WHERE f.namespace <> e.namespace RETURN count(f) AS n"
    )
    assert shared[0]["n"] == 0
    for check in (
        memory_checks.duplicate_entities,
        memory_checks.supersession_complete,
        memory_checks.provenance_complete,
    ):
        assert check(store).problems == [], check.__name__
    assert memory_checks.provenance_complete(store).counts["Fact"] > 0


def test_facts_are_searched_in_full_text_and_lead_back_to_their_turns(
    consolidated: GraphStore, backend: str
):
    from eval_pipeline.retrieve.fulltext import FulltextRetriever
    from eval_pipeline.retrieve.protocol import RetrievalEnv
    from eval_pipeline.retrieve.provenance import ProvenanceResolver

    store = consolidated
    retriever = FulltextRetriever(RetrievalEnv(store=store, backend=backend))
    assert "fact" in {s.source.kind for s in retriever.sources()}
    fact = store.read("MATCH (f:Fact)-[:FROM_TURN]->(t:Turn) RETURN f.fact_id AS id LIMIT 1")
    turns = ProvenanceResolver(store).turns_of([fact[0]["id"]])
    assert turns.get(fact[0]["id"]), turns
