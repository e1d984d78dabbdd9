"""Reads that pin the server (issue 28, probe finding 3), on the session's embedded ArcadeDB.

Three ways an agent's read outlived its timeout and took the run with it:
- a deeply nested CASE keeps ArcadeDB's parser busy for minutes, and a statement is listed
  (hence terminable) only once parsed: the guard now refuses it before it is sent;
- a statement with a character outside the BMP before ArcadeDB's 1,024-unit cut of the listed
  text was never recognised by the cancel (Python counts code points, Java UTF-16 units):
  reads are now marked with an id the cancel looks for, and the text fallback counts units;
- the store ran reads on 8 fixed threads: 8 reads the server never answered, and every later
  read, `RETURN 1` included, queued behind them and looked like a lost server.

Runaway statements here are stopped on the server before each test ends (`_stop_all`), so a
failing test leaves no core busy on the shared server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.failures import infrastructure_cause
from eval_pipeline.graph import server
from eval_pipeline.graph.errors import GraphTimeoutError
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.retrieve.guarded_read import GuardedReader, QueryRejected
from eval_pipeline.retrieve.protocol import RetrievalTrace
from eval_pipeline.retrieve.readonly_guard import (
    MAX_CASE_EXPRESSIONS,
    MAX_NESTING,
    MAX_STATEMENT_CHARS,
    WriteRejected,
    check_read_only,
)
from eval_pipeline.retrieve.results import QueryRecord
from eval_pipeline_tests.conftest import HEAP, fresh_database

# A read that runs until stopped (9 * 10^12 rows), cheap to start and to terminate.
RUNAWAY = "UNWIND range(1,3000000) AS x UNWIND range(1,3000000) AS y RETURN count(*) AS c"


def nested_case(depth: int) -> str:
    """The probe's costly shape: each CASE in the THEN of the one around it."""
    expr = "1"
    for _ in range(depth):
        expr = f"CASE WHEN true THEN {expr} ELSE 0 END"
    return f"RETURN {expr} AS v"


def long_runaway(before: int, *, split: bool = False) -> str:
    """RUNAWAY with a string literal longer than ArcadeDB's listed cut, holding U+1F600 after
    `before` characters of the statement (at the cut itself when `split`)."""
    head = RUNAWAY + ", '"
    if split:  # the pair straddles UTF-16 units 1023 and 1024
        before = 1023
    pad = "x" * max(0, before - len(head))
    return head + pad + "\U0001f600" + "y" * 1200 + "' AS pad"


@pytest.fixture
def store(graph_dir: Path) -> Iterator[GraphStore]:
    """A database of this test's own on the session server; whatever still runs on it at the
    end is terminated."""
    store = GraphStore(data_dir=str(graph_dir), database=fresh_database("pin"), heap=HEAP)
    store.ensure_running()
    try:
        yield store
    finally:
        _stop_all(store)
        store.close()


def _running(store: GraphStore) -> list[dict[str, Any]]:
    http = store.http()
    assert http is not None
    return [q for q in server.running_queries(http, store.database) if q.get("protocol") == "bolt"]


def _stop_all(store: GraphStore) -> None:
    http = store.http()
    assert http is not None
    for query in _running(store):
        server.terminate_query(http, str(query["id"]))


def _wait_listed(store: GraphStore, count: int = 1, timeout_s: float = 5.0) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        listed = _running(store)
        if len(listed) >= count or time.monotonic() > deadline:
            return listed
        time.sleep(0.1)


def _gone(store: GraphStore, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while _running(store):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


class _NeverSent:
    """The real store for the server probe only: a statement the guard should refuse is
    recorded and fails the test here, instead of pinning the shared server's parser."""

    def __init__(self, store: GraphStore) -> None:
        self.real = store
        self.sent: list[str] = []

    def read(self, query: str, params=None, **kwargs: Any) -> list[dict]:
        if query == "RETURN 1 AS ok":
            return self.real.read(query, params, **kwargs)
        self.sent.append(query)
        raise AssertionError(f"sent to the server: {query[:60]}...")


# --- size and nesting: refused before the server parses them -----------------------------


def test_a_deeply_nested_case_is_refused_before_it_is_sent(store: GraphStore):
    """The probe's 150-deep CASE kept a parser thread busy for minutes after the timeout.
    Refused by the guard (a QueryRejected: the retriever's miss), and nothing reached the
    server; as many CASE expressions as allowed still run, in well under a read timeout."""
    never = _NeverSent(store)
    trace = RetrievalTrace()
    for depth in (150, MAX_CASE_EXPRESSIONS + 1):
        started = time.monotonic()
        with pytest.raises(QueryRejected, match="CASE expressions") as caught:
            GuardedReader(never, timeout_s=10).read(nested_case(depth), trace=trace)  # type: ignore[arg-type]
        assert time.monotonic() - started < 1
        assert infrastructure_cause(caught.value) is None  # the system's miss, never unscored
    assert never.sent == []
    assert [q.rows for q in trace.queries] == [None, None]
    assert all((q.error or "").startswith("rejected by the read-only guard") for q in trace.queries)

    started = time.monotonic()
    rows = GuardedReader(store, timeout_s=10).read(nested_case(MAX_CASE_EXPRESSIONS))
    elapsed = time.monotonic() - started
    print(f"CASE nested {MAX_CASE_EXPRESSIONS} deep: parsed and answered in {elapsed:.2f} s")
    assert rows == [{"v": 1}]
    assert elapsed < 5, elapsed


def test_size_and_nesting_bounds_count_code_only():
    at_limit = "RETURN " + "[" * MAX_NESTING + "1" + "]" * MAX_NESTING + " AS v"
    check_read_only(at_limit)
    for deeper in (
        "RETURN " + "(" * (MAX_NESTING + 1) + "1" + ")" * (MAX_NESTING + 1) + " AS v",
        "RETURN " + "{a: " * (MAX_NESTING + 1) + "1" + "}" * (MAX_NESTING + 1) + " AS v",
    ):
        with pytest.raises(WriteRejected, match=f"more than {MAX_NESTING} deep"):
            check_read_only(deeper)
    flat = " + ".join(["CASE WHEN true THEN 1 ELSE 0 END"] * (MAX_CASE_EXPRESSIONS + 1))
    with pytest.raises(WriteRejected, match="CASE expressions"):
        check_read_only(f"RETURN {flat} AS v")  # counted whether nested or not
    # Brackets and CASE inside strings, comments and backtick names are data.
    data = "'" + "(" * 100 + " CASE" * 100 + "'"
    check_read_only(f"RETURN {data} AS s, 1 AS `{'[' * 100}` // {'{' * 100} CASE CASE")
    check_read_only("RETURN 'x' AS s /* " + "CASE " * 100 + "*/")
    check_read_only("RETURN '" + "x" * (MAX_STATEMENT_CHARS - 20) + "' AS s")
    with pytest.raises(WriteRejected, match="characters long"):
        check_read_only("RETURN '" + "x" * MAX_STATEMENT_CHARS + "' AS s")


# --- cancel by id -----------------------------------------------------------------------------


def test_a_long_statement_with_a_non_bmp_character_is_cancelled(store: GraphStore):
    """U+1F600 within the first 1,024 characters, the text 2,000 long: the listed text is cut
    one character earlier than Python's cut, and the read used to run on to the server's
    300 s ceiling. Now it is stopped on the server at its timeout."""
    reader = GuardedReader(store, timeout_s=1.5)
    trace = RetrievalTrace()
    started = time.monotonic()
    with pytest.raises(GraphTimeoutError, match="stopped on the server") as caught:
        reader.read(long_runaway(before=200), trace=trace)
    assert time.monotonic() - started < 8
    assert _gone(store), "the read still runs on the server"
    assert infrastructure_cause(caught.value, graph_alive=lambda: True) is None
    (record,) = trace.queries
    assert isinstance(record, QueryRecord) and "stopped on the server" in (record.error or "")
    # What was recorded is the agent's statement, not the marked one.
    assert record.query == long_runaway(before=200)


@pytest.mark.parametrize("split", [False, True], ids=["pair-before-cut", "pair-at-cut"])
def test_the_listed_text_is_recognised_by_utf16_units(store: GraphStore, split: bool):
    """The fallback for a statement sent without a mark: ArcadeDB's listed text is predicted
    in UTF-16 units (a pair cut in two is listed as '?'), and the cancel finds it by text."""
    statement = long_runaway(before=300, split=split)
    submitted = time.time()
    with pytest.raises(GraphTimeoutError):
        store.read(statement, timeout_s=0.5)
    (listed,) = _wait_listed(store)
    assert listed["text"] == server.listed_text(statement)
    (stopped,) = store.dialect.cancel_query(store, statement, submitted)
    assert stopped.split()[0] == listed["id"]
    assert _gone(store)


def test_the_cancel_stops_only_the_read_it_was_given(store: GraphStore):
    """Two identical statements running: the id picks one, the other keeps running."""
    dialect = store.dialect
    first, _ = dialect.mark_read(RUNAWAY, "a" * 16)
    second, _ = dialect.mark_read(RUNAWAY, "b" * 16)
    for statement in (first, second):
        with pytest.raises(GraphTimeoutError):
            store.read(statement, timeout_s=0.3)
    assert len(_wait_listed(store, count=2)) == 2
    (stopped,) = dialect.cancel_query(store, first, time.time(), "a" * 16)
    time.sleep(0.5)
    still = _running(store)
    assert [q["text"].split("*/")[0] for q in still] == ["/* eval_pipeline read " + "b" * 16 + " "]
    assert stopped.split()[0] not in {q["id"] for q in still}


# --- the read pool -------------------------------------------------------------------------


def test_nine_stuck_reads_leave_the_server_answering(store: GraphStore):
    """Reads the cancel cannot reach (no canceller here, as for a statement still parsing):
    each times out as the query's own failure, and the store still answers at once. With 8
    fixed read threads the 9th read's probe queued behind the stuck ones: GraphServerLost,
    and every later question unscored."""
    reader = GuardedReader(store, timeout_s=0.5, canceller=None, probe_timeout_s=3)
    for n in range(9):
        with pytest.raises(GraphTimeoutError, match="server's own statement timeout") as caught:
            reader.read(RUNAWAY + f", {n} AS n")
        assert infrastructure_cause(caught.value, graph_alive=lambda: True) is None
    assert len(_running(store)) == 9  # all still running on the server
    started = time.monotonic()
    assert reader.read("RETURN 1 AS one") == [{"one": 1}]
    assert store.read("RETURN 2 AS two", timeout_s=3) == [{"two": 2}]
    assert time.monotonic() - started < 3
