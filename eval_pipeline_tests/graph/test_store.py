"""GraphStore against the real server: claim before wipe, reads with caps, batching."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from eval_pipeline.graph.errors import (
    ForeignDataError,
    GraphPayloadError,
    GraphQueryError,
    GraphRowLimitError,
    GraphTimeoutError,
)
from eval_pipeline.graph.store import MAX_ROW_BYTES, GraphStore


def other_database(graph_dir: Path, name: str, **kw) -> GraphStore:
    """A store on another database of the same server (created over HTTP on first use)."""
    store = GraphStore(data_dir=str(graph_dir), database=name, **kw)
    store.ensure_running()
    return store


def test_empty_instance_is_claimed(store: GraphStore, graph_dir: Path) -> None:
    fresh = other_database(graph_dir, "fresh_db")
    try:
        assert fresh.claim_record() is None and fresh.is_empty()
        fresh.claim()
        fresh.claim()  # idempotent
        assert fresh.counts()["labels"] == {"EvalPipelineClaim": 1}
        fresh.wipe()
        assert fresh.claim_record() is not None
    finally:
        fresh.close()


def test_foreign_data_survives_a_wipe_attempt(store: GraphStore, graph_dir: Path) -> None:
    foreign = other_database(graph_dir, "foreign_db")
    try:
        foreign.write("UNWIND range(1, 5) AS i CREATE (:Customer {id: i})-[:OWNS]->(:Account)")
        before = foreign.counts()
        with pytest.raises(ForeignDataError, match="someone else's data"):
            foreign.wipe()
        with pytest.raises(ForeignDataError):
            foreign.claim()
        assert foreign.counts() == before
        assert foreign.claim_record() is None
    finally:
        foreign.close()

    disposable = other_database(graph_dir, "foreign_db", disposable=True)
    try:
        disposable.wipe()
        assert disposable.counts()["labels"] == {"EvalPipelineClaim": 1}
    finally:
        disposable.close()


def test_wipe_removes_everything_including_reconciler_writes(store: GraphStore) -> None:
    store.wipe()
    store.write(
        "CREATE (:Entity {name: 'Ada'})-[:MENTIONED_IN {weight: 1}]->(:Episode {summary: 's'})"
    )
    store.autocommit("CREATE INDEX IF NOT EXISTS FOR (e:Entity) ON (e.name)")
    assert store.read("SHOW INDEXES YIELD name RETURN name")
    store.wipe()
    assert store.counts() == {
        "nodes": 1,
        "relationships": 0,
        "labels": {"EvalPipelineClaim": 1},
        "relationship_types": {},
    }
    assert store.read("SHOW INDEXES YIELD name RETURN name") == []


def test_read_caps_rows(store: GraphStore) -> None:
    rows = store.read("UNWIND range(1, 10) AS x RETURN x", max_rows=10)
    assert [r["x"] for r in rows] == list(range(1, 11))
    with pytest.raises(GraphRowLimitError, match="more than 9 rows"):
        store.read("UNWIND range(1, 10) AS x RETURN x", max_rows=9)


def test_read_times_out_client_side(store: GraphStore) -> None:
    # ~4 s of work on the server; ArcadeDB ignores the transaction timeout, we do not.
    slow = "UNWIND range(1, 1000000) AS x UNWIND range(1, 10) AS y WITH x WHERE x < 0 RETURN x"
    start = time.monotonic()
    with pytest.raises(GraphTimeoutError, match="did not finish within 0.5 s"):
        store.read(slow, timeout_s=0.5)
    assert time.monotonic() - start < 2.0


def test_write_batches_splits_by_rows_and_bytes(store: GraphStore) -> None:
    store.wipe()
    rows = [{"i": i, "pad": "x" * 1000} for i in range(50)]
    query = "UNWIND $rows AS r CREATE (:Pad {i: r.i, pad: r.pad})"
    by_rows = store.write_batches(query, rows[:20], batch_rows=7, batch_bytes=10**9)
    assert by_rows.batches == 3 and by_rows.rows == 20
    by_bytes = store.write_batches(query, rows[20:], batch_rows=10**6, batch_bytes=5_500)
    assert by_bytes.batches == 6 and by_bytes.rows == 30  # 5 rows of ~1 KB per batch
    assert store.read("MATCH (p:Pad) RETURN count(p) AS n") == [{"n": 50}]


def test_an_oversize_row_is_refused_before_sending(store: GraphStore) -> None:
    huge = [{"text": "x" * (MAX_ROW_BYTES + 1)}]
    with pytest.raises(GraphPayloadError, match="split it"):
        store.write_batches(
            "UNWIND $rows AS r CREATE (:Big {t: r.text})", huge, batch_rows=1, batch_bytes=10**9
        )


def test_map_properties_are_mapped_to_a_clear_error(store: GraphStore) -> None:
    with pytest.raises(GraphQueryError, match="JSON-encode"):
        store.write("CREATE (:Doc {meta: $m})", {"m": {"a": 1}})
    encoded = store.encode_value({"a": 1})
    store.write("CREATE (:Doc {meta: $m})", {"m": encoded})
    assert store.read("MATCH (d:Doc) RETURN d.meta AS m") == [{"m": '{"a": 1}'}]


def test_syntax_errors_are_one_line(store: GraphStore) -> None:
    with pytest.raises(GraphQueryError) as err:
        store.write("THIS IS NOT CYPHER")
    assert "\n" not in str(err.value) and "refused a statement" in str(err.value)
