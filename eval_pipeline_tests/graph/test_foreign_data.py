"""Someone else's data is never wiped: on the real embedded ArcadeDB.

"Empty" means no vertex, edge, document record, user-defined type or index; an instance we
claimed is refused when someone else wrote to it after our last recorded write. Every refusal
leaves the data where it was. The foreign writer here is a plain neo4j driver or a plain
HTTP client (not a GraphStore): it knows nothing of the claim.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eval_pipeline.graph.errors import ForeignDataError
from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.lease import Lease, hold
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.reconcile.indexes import ensure_fulltext_indexes, ensure_reconcile_schema
from eval_pipeline.reconcile.models import (
    MemoryChunk,
    MemoryEntity,
    MemoryFact,
    SessionMemory,
    entity_key,
)
from eval_pipeline.reconcile.writer import record_memory, write_session_memory
from eval_pipeline_tests.foreign_writer import Foreigner

_dbs = itertools.count()


@pytest.fixture
def db(store: GraphStore) -> str:
    """A fresh database name (created on first use); `store` makes sure the server runs."""
    return f"foreign{next(_dbs)}"


@pytest.fixture
def open_store(graph_dir: Path) -> Iterator[Callable[..., GraphStore]]:
    stores: list[GraphStore] = []

    def make(database: str, **kw) -> GraphStore:
        s = GraphStore(data_dir=str(graph_dir), database=database, heap="512m", **kw)
        s.ensure_running()
        stores.append(s)
        return s

    yield make
    for s in stores:
        s.close()


@pytest.fixture
def foreigner(graph_dir: Path, db: str, open_store) -> Iterator[Foreigner]:
    open_store(db)  # creates the database
    f = Foreigner(graph_dir, db)
    yield f
    f.close()


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


# --- "empty" means empty --------------------------------------------------------------------


def test_a_fresh_database_is_empty(open_store, db: str) -> None:
    fresh = open_store(db)
    assert fresh.foreign_content().model_dump(exclude={"complete"}) == {
        "nodes": 0,
        "labels": {},
        "relationships": 0,
        "relationship_types": {},
        "documents": {},
        "types": [],
        "indexes": [],
        "constraints": [],
        "triggers": [],
        "content_changed": False,
    }
    assert fresh.is_empty()
    fresh.claim()
    assert fresh.claim_record() is not None


def test_a_document_only_database_is_refused_and_left_intact(
    open_store, db: str, foreigner: Foreigner, fixtures_file: Path
) -> None:
    foreigner.sql("CREATE DOCUMENT TYPE Invoice")
    foreigner.sql("CREATE PROPERTY Invoice.number INTEGER")
    foreigner.sql("CREATE INDEX ON Invoice (number) UNIQUE")
    for n in range(3):
        foreigner.sql(f"INSERT INTO Invoice SET number = {n}, total = 9.5")
    ours = open_store(db)
    # No vertex at all: the old "MATCH (n)" emptiness said empty here.
    assert ours.read("MATCH (n) RETURN count(n) AS n") == [{"n": 0}]
    assert not ours.is_empty()
    with pytest.raises(ForeignDataError) as refused:
        ours.wipe()
    message = one_line(refused)
    assert "holds 3 document records of type Invoice and 1 index (Invoice[number])" in message
    assert "someone else's data" in message
    with pytest.raises(ForeignDataError):
        ours.claim()
    with pytest.raises(ForeignDataError):
        inject_fixtures(ours, fixtures_file)
    assert foreigner.count("Invoice") == 3
    assert foreigner.indexes() == ["Invoice[number]"]
    assert ours.claim_record() is None


@pytest.mark.parametrize(
    ("make_schema", "found"),
    [
        (
            [
                "CREATE DOCUMENT TYPE Ledger",
                "CREATE PROPERTY Ledger.code STRING",
                "CREATE INDEX ON Ledger (code) NOTUNIQUE",
            ],
            "1 type (Ledger) and 1 index (Ledger[code])",
        ),
        (
            ["CREATE VERTEX TYPE Person", "CREATE PROPERTY Person.email STRING"],
            "1 type (Person)",
        ),
    ],
    ids=["type-with-index", "vertex-type-only"],
)
def test_a_schema_only_database_is_refused_and_left_intact(
    open_store, db: str, foreigner: Foreigner, make_schema: list[str], found: str
) -> None:
    for command in make_schema:
        foreigner.sql(command)
    before = (foreigner.types(), foreigner.indexes())
    ours = open_store(db)
    with pytest.raises(ForeignDataError) as refused:
        ours.wipe()
    assert f"holds {found} and no eval_pipeline claim" in one_line(refused)
    with pytest.raises(ForeignDataError):
        ours.claim()
    assert (foreigner.types(), foreigner.indexes()) == before
    assert ours.claim_record() is None


def test_a_cypher_index_alone_is_not_empty(open_store, db: str, foreigner: Foreigner) -> None:
    foreigner.cypher("CREATE INDEX FOR (n:Customer) ON (n.id)")
    ours = open_store(db)
    with pytest.raises(ForeignDataError) as refused:
        ours.claim()
    assert "1 type (Customer) and 1 index (Customer[id])" in one_line(refused)
    assert foreigner.indexes() == ["Customer[id]"]


def test_disposable_still_wipes_a_foreign_database(
    open_store, db: str, foreigner: Foreigner
) -> None:
    foreigner.sql("CREATE DOCUMENT TYPE Invoice")
    foreigner.sql("INSERT INTO Invoice SET number = 1")
    foreigner.cypher("CREATE (:Customer {id: 1})-[:OWNS]->(:Account {id: 2})")
    disposable = open_store(db, disposable=True)
    disposable.wipe()
    assert disposable.is_empty()
    assert set(foreigner.types()) == {"EvalPipelineClaim"}
    assert disposable.claim_record() is not None


# --- data written after the claim -------------------------------------------------------------


def ours_injected(open_store, db: str, fixtures_file: Path) -> GraphStore:
    """One chain's graph steps: claimed, injected, reconciled, each under the lease (whose
    heartbeat writes are ours), then closed: the write phase's checkpoint is recorded."""
    run = open_store(db)
    run.claim()
    with hold(run, Lease(holder="run-1"), release_after=True):
        inject_fixtures(run, fixtures_file)
        reconcile_like(run)
    run.close()
    return run


def reconcile_like(store: GraphStore) -> None:
    """What the reconciliation stage writes, through the real writer: its constraints and
    indexes, one session's memory (chunk, entity, fact), the memory record, and the
    full-text indexes (SQL DDL over HTTP)."""
    assert ensure_reconcile_schema(store) == []
    key = entity_key("place", "Rome")
    memory = SessionMemory(
        session_id="sess_0003",
        reconciler="test",
        chunks=(
            MemoryChunk(chunk_id="sess_0003:c0", index=0, text="Rome", turn_ids=("sess_0003#0",)),
        ),
        entities=(MemoryEntity(key=key, name="Rome", type="place"),),
        facts=(
            MemoryFact(
                fact_id="sess_0003:f0",
                text="went to Rome",
                fact_type="event",
                valid_at=None,
                turn_ids=("sess_0003#1",),
                entity_keys=(key,),
            ),
        ),
    )
    write_session_memory(store, memory, version="1", replace=False, pins_key="pins-1")
    record_memory(store, "pins-1", {"name": "test"}, "2026-01-01T00:00:00")
    assert ensure_fulltext_indexes(store, {"Chunk", "Fact"}) == []


FOREIGN_WRITES = {
    "nodes": (
        ["CREATE (:Customer {id: 1}), (:Customer {id: 2}), (:Customer {id: 3})"],
        [],
        "3 nodes of type Customer were written here by someone else since",
    ),
    "relationships-between-our-nodes": (
        [
            "MATCH (a:Turn), (b:Turn) WHERE a.turn_id = 'sess_0003#0' "
            "AND b.turn_id = 'sess_0002#0' CREATE (a)-[:SEE_ALSO]->(b)"
        ],
        [],
        "1 relationship of type SEE_ALSO was written here by someone else since",
    ),
    "document-records": (
        [],
        ["CREATE DOCUMENT TYPE AuditLog", "INSERT INTO AuditLog SET what = 'x'"],
        "1 document record of type AuditLog was written here by someone else since",
    ),
    "an-index-on-our-type": (
        [],
        ["CREATE PROPERTY Turn.role IF NOT EXISTS STRING", "CREATE INDEX ON Turn (role) NOTUNIQUE"],
        "1 index (Turn[role]) was written here by someone else since",
    ),
    "an-empty-type": (
        [],
        ["CREATE VERTEX TYPE Scratch"],
        "1 type (Scratch) was written here by someone else since",
    ),
}


@pytest.mark.parametrize("kind", list(FOREIGN_WRITES))
def test_a_claimed_instance_someone_else_wrote_to_is_refused_and_left_intact(
    open_store, db: str, foreigner: Foreigner, fixtures_file: Path, kind: str
) -> None:
    ours_injected(open_store, db, fixtures_file)
    cypher, sql, expected = FOREIGN_WRITES[kind]
    for query in cypher:
        foreigner.cypher(query)
    for command in sql:
        foreigner.sql(command)
    before = (foreigner.types(), foreigner.indexes())

    next_run = open_store(db)
    with pytest.raises(ForeignDataError) as refused:
        next_run.wipe()
    message = one_line(refused)
    assert expected in message and "disposable" in message
    with pytest.raises(ForeignDataError):
        inject_fixtures(next_run, fixtures_file)
    assert (foreigner.types(), foreigner.indexes()) == before  # ours and theirs, untouched

    # Whoever may erase it says so.
    open_store(db, disposable=True).wipe()
    assert open_store(db).is_empty()


def test_someone_elses_writes_survive_a_later_write_phase_of_ours(
    open_store, db: str, foreigner: Foreigner, fixtures_file: Path
) -> None:
    """A reconcile-only run after someone else wrote must not absorb their data into its
    checkpoint: the next wipe still refuses."""
    ours_injected(open_store, db, fixtures_file)
    foreigner.cypher("CREATE (:Customer {id: 1}), (:Customer {id: 2})")
    rerun = open_store(db)
    rerun.write("MATCH (s:Session {session_id: 'sess_0001'}) SET s.reconcile_status = 'done'")
    rerun.close()
    with pytest.raises(ForeignDataError) as refused:
        open_store(db).wipe()
    assert "2 nodes of type Customer were written here by someone else" in one_line(refused)
    assert foreigner.count("Customer") == 2


def test_our_own_cycle_wipes_and_injects_again(
    open_store, db: str, foreigner: Foreigner, fixtures_file: Path
) -> None:
    ours_injected(open_store, db, fixtures_file)
    second = open_store(db)
    with hold(second, Lease(holder="run-2"), release_after=True):
        report = inject_fixtures(second, fixtures_file)  # wipes our own graph, no refusal
        assert second.wipe_note is None
        reconcile_like(second)
        # The same store, still writing, wipes again: its open phase is its own writes.
        inject_fixtures(second, fixtures_file)
    second.close()
    third = open_store(db)
    inject_fixtures(third, fixtures_file)
    assert foreigner.count("Turn") == report.counts.turns
    record = third.claim_record()
    assert record is not None and record["writers"] != []  # third's phase is open
    third.close()
    record = open_store(db).claim_record()
    assert record is not None and record["writers"] == [] and record["checkpoint"]


def test_a_write_phase_cut_short_is_not_taken_for_someone_else(
    open_store, db: str, foreigner: Foreigner, fixtures_file: Path
) -> None:
    crashed = open_store(db)
    inject_fixtures(crashed, fixtures_file)
    crashed.write("CREATE (:Entity {key: 'x'})")
    # The process dies: no checkpoint. (Forget it as this process's open phase, too.)
    crashed._ownership.forget_phase()
    after = open_store(db)
    after.wipe()  # the listed, never-closed phase was ours: it goes ahead, and says why
    assert after.wipe_note is not None and "taken for ours" in after.wipe_note
    assert after.is_empty()
    # The crashed phase is no longer listed: someone else's writes are caught again.
    foreigner.cypher("CREATE (:Customer {id: 1})")
    with pytest.raises(ForeignDataError, match="1 node of type Customer was written"):
        open_store(db).wipe()


# --- edits that keep every count (issue 28, finding 6) ----------------------------------------

FOREIGN_EDITS = {
    "a-turn-text-edited": ["MATCH (t:Turn {turn_id: 'sess_0001#0'}) SET t.text = 'forged'"],
    "a-session-property-added": [
        "MATCH (s:Session {session_id: 'sess_0002'}) SET s.planted = true"
    ],
    "a-turn-deleted-and-re-created": [
        "MATCH (t:Turn {turn_id: 'sess_0003#1'}) DETACH DELETE t",
        "MATCH (s:Session {session_id: 'sess_0003'}), (a:Turn {turn_id: 'sess_0003#0'}), "
        "(b:Turn {turn_id: 'sess_0003#2'}) "
        "CREATE (s)-[:HAS_TURN]->(t:Turn {turn_id: 'sess_0003#1', session_id: 'sess_0003', "
        "role: 'assistant', text: 'forged', index: 1, timestamp: '2023-05-30T23:40:01'}), "
        "(a)-[:NEXT]->(t), (t)-[:NEXT]->(b)",
    ],
}


@pytest.mark.parametrize("kind", list(FOREIGN_EDITS))
def test_someone_elses_edit_that_keeps_every_count_is_refused_and_left_intact(
    open_store, db: str, foreigner: Foreigner, fixtures_file: Path, kind: str
) -> None:
    """Counts alone missed these: the claim records a digest of the content at each
    checkpoint, and the chain's claim and the wipe compare it."""
    ours_injected(open_store, db, fixtures_file)
    before = open_store(db).inventory()
    for query in FOREIGN_EDITS[kind]:
        foreigner.cypher(query)
    assert open_store(db).inventory().added_since(before).is_empty()  # no count grew

    chain = open_store(db)
    with pytest.raises(ForeignDataError) as refused:
        chain.claim(check_changes=True)  # what a chain does before its first stage
    message = one_line(refused)
    assert message.startswith("refusing to run on ")
    assert "changes to records already there" in message and "someone else" in message
    with pytest.raises(ForeignDataError, match="refusing to wipe .* changes to records"):
        open_store(db).wipe()
    edited = foreigner.cypher(
        "MATCH (n) WHERE n.text = 'forged' OR n.planted = true RETURN count(n) AS n"
    )
    assert edited == [{"n": 1}]  # their edit survived both refusals


def test_an_edit_before_a_write_phase_of_ours_is_not_absorbed(
    open_store, db: str, foreigner: Foreigner, fixtures_file: Path
) -> None:
    ours_injected(open_store, db, fixtures_file)
    foreigner.cypher("MATCH (t:Turn {turn_id: 'sess_0001#0'}) SET t.text = 'forged'")
    rerun = open_store(db)
    rerun.write("MATCH (s:Session {session_id: 'sess_0001'}) SET s.reconcile_status = 'done'")
    rerun.close()  # its checkpoint records the edited content: the finding was kept first
    with pytest.raises(ForeignDataError, match="changes to records already there"):
        open_store(db).wipe()


def test_our_own_phases_never_read_as_someone_elses_edit(
    open_store, db: str, fixtures_file: Path
) -> None:
    """Our writes (injection, memory, a status update) each end in a checkpoint: a chain's
    claim after them finds nothing to refuse."""
    ours_injected(open_store, db, fixtures_file)
    again = open_store(db)
    again.write("MATCH (s:Session {session_id: 'sess_0001'}) SET s.reconcile_status = 'done'")
    again.close()
    open_store(db).claim(check_changes=True)
    open_store(db).wipe()
