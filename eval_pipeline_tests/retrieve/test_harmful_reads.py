"""Reads that harm the server without writing (issue 13), on a real embedded ArcadeDB.

Two statements the guard accepts took the embedded server down: a string doubled 27 times ran
the JVM out of heap and it exited, and a 3-million-squared UNWIND kept a core busy for minutes
after the client gave up. Through `GuardedReader` both now fail alone: the server keeps its
pid and answers `RETURN 1` at once, and its CPU goes back to idle. Each is the system's own
failure (a miss). A server that really is gone makes the question unscored.

The server here is this module's own (a temp dir, 512 MB heap, as the other tests use), so
running it out of heap disturbs no other test.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.failures import infrastructure_cause
from eval_pipeline.graph import server
from eval_pipeline.graph.errors import (
    GraphError,
    GraphQueryError,
    GraphTimeoutError,
    GraphUnavailableError,
)
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.retrieve.guarded_read import GraphServerLost, GuardedReader
from eval_pipeline.retrieve.protocol import RetrievalOutput, RetrievalTrace
from eval_pipeline.retrieve.reader import ExtractiveReader
from eval_pipeline.retrieve.runner import QuestionInput, RetrievalRunner

# A server of its own, stopped and killed on purpose: the full suite runs it, `make test-fast` not.
pytestmark = pytest.mark.slow

# The two statements of issue 13, verbatim.
HUGE_STRING = "RETURN size(reduce(a='xxxxxxxxxxxxxxxx', i IN range(1,27) | a+a))"
RUNAWAY = "UNWIND range(1,3000000) AS x UNWIND range(1,3000000) AS y RETURN count(*)"
HEAP = "512m"


@pytest.fixture(scope="module")
def harm_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("harmful_reads_arcadedb")
    yield root
    server.stop(root)


@pytest.fixture(scope="module")
def module_store(harm_dir: Path) -> Iterator[GraphStore]:
    store = GraphStore(data_dir=str(harm_dir), database="harm", heap=HEAP)
    store.ensure_running()
    yield store
    store.close()


@pytest.fixture
def store(module_store: GraphStore) -> GraphStore:
    module_store.ensure_running()  # a test that killed the server leaves it to be restarted
    return module_store


def _pid(harm_dir: Path) -> int:
    info = server.running_info(harm_dir)
    assert info is not None, "the embedded server is not running"
    return info.pid


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _answers_at_once(store: GraphStore) -> float:
    started = time.monotonic()
    assert store.read("RETURN 1 AS ok", timeout_s=5) == [{"ok": 1}]
    return time.monotonic() - started


def _alive(store: GraphStore):
    def probe() -> bool:
        try:
            store.read("RETURN 1 AS ok", timeout_s=5)
        except Exception:
            return False
        return True

    return probe


def test_a_value_too_big_for_the_heap_fails_alone(store: GraphStore, harm_dir: Path):
    """A 16 x 2^27-character string cannot fit the heap: the statement fails, the server
    stays. Five times over: a killed Bolt thread used to keep its query admission slot, and
    four of them wedged every later query (HTTP too)."""
    pid = _pid(harm_dir)
    reader = GuardedReader(store, timeout_s=20)
    for attempt in range(5):
        trace = RetrievalTrace()
        started = time.monotonic()
        with pytest.raises(GraphQueryError, match="dropped the connection") as caught:
            reader.read(HUGE_STRING, trace=trace)
        elapsed = time.monotonic() - started
        print(f"huge string #{attempt + 1}: refused in {elapsed:.2f} s, RSS {_rss_mb(pid):.0f} MB")
        assert elapsed < 10, elapsed
        assert _answers_at_once(store) < 2
        assert _pid(harm_dir) == pid, "the server restarted"
        # The agent's own query failed, the server did not: a miss, never unscored.
        assert infrastructure_cause(caught.value, graph_alive=_alive(store)) is None
        assert trace.queries[-1].error and "dropped the connection" in trace.queries[-1].error
    http = store.http()
    assert http is not None and http.sql(store.database, "SELECT 1 AS one") == [{"one": 1}]


def test_a_runaway_read_is_stopped_on_the_server(store: GraphStore, harm_dir: Path):
    """9 * 10^12 rows: the read times out on the client and is terminated on the server at
    the same moment, so no core stays busy after it."""
    pid = _pid(harm_dir)
    rss_before = _rss_mb(pid)
    reader = GuardedReader(store, timeout_s=3)
    trace = RetrievalTrace()
    started = time.monotonic()
    with pytest.raises(GraphTimeoutError, match="stopped on the server") as caught:
        reader.read(RUNAWAY, trace=trace)
    elapsed = time.monotonic() - started
    assert elapsed < 8, elapsed
    assert _answers_at_once(store) < 2
    assert _pid(harm_dir) == pid
    http = store.http()
    assert http is not None
    deadline = time.monotonic() + 5
    # The statement as sent starts with its read's mark (Dialect.mark_read): look for its text.
    while any(RUNAWAY in str(q.get("text")) for q in server.running_queries(http, store.database)):
        assert time.monotonic() < deadline, "the runaway read still runs on the server"
        time.sleep(0.1)
    cpu_before = _cpu_s(pid)
    time.sleep(2)
    busy = _cpu_s(pid) - cpu_before
    print(
        f"runaway read: refused in {elapsed:.2f} s, server CPU {busy:.2f} s in the next 2 s, "
        f"RSS {rss_before:.0f} -> {_rss_mb(pid):.0f} MB"
    )
    assert busy < 0.5, f"the server kept {busy:.2f} CPU-seconds busy in 2 s"
    assert infrastructure_cause(caught.value, graph_alive=_alive(store)) is None
    assert "stopped on the server" in (trace.queries[-1].error or "")


class _AgentLike:
    """Runs one statement through GuardedReader and, like graph_agent, tells a GraphError to
    its agent (here: a note) instead of raising it."""

    name = "agent_like"

    def __init__(self, store: GraphStore, statement: str) -> None:
        self.reader = GuardedReader(store, timeout_s=3)
        self.statement = statement

    def retrieve(self, request, trace: RetrievalTrace) -> RetrievalOutput:
        try:
            self.reader.read(self.statement, trace=trace)
        except GraphError as exc:
            trace.note(f"agent was told: {exc}")
        return RetrievalOutput(items=[], context=[])

    def pins(self) -> dict:
        return {}


def _run(store: GraphStore, statement: str):
    runner = RetrievalRunner(
        _AgentLike(store, statement),
        ExtractiveReader(),
        scope="batch",
        top_k=5,
        count_tokens=lambda ctx: len(ctx),
        graph_alive=_alive(store),
    )
    question = QuestionInput(question_id="q1", question="Where is my bike?", question_date="d")
    (result,) = runner.run([question])
    return result


def test_each_harmful_read_is_the_systems_miss(store: GraphStore):
    for statement in (HUGE_STRING, RUNAWAY):
        result = _run(store, statement)
        assert result.infra_failures == [], statement
        assert result.payload_tokens == 0  # scored: an empty payload, a miss
        assert result.queries and result.queries[0].error


def test_a_connection_left_stale_by_a_restart_is_not_the_querys_fault(
    store: GraphStore, harm_dir: Path
):
    """The server restarted under the store (same ports): its pooled connections are dead.
    The read still succeeds (the driver reconnects, or GuardedReader tries once more)."""
    store.read("RETURN 1 AS ok")  # a pooled connection to this server process
    assert server.stop(harm_dir)
    server.ensure_running(harm_dir, database=store.database, heap=HEAP)
    rows = GuardedReader(store, timeout_s=10).read("RETURN 2 AS two")
    assert rows == [{"two": 2}]


def test_a_server_that_is_gone_leaves_the_question_unscored(store: GraphStore, harm_dir: Path):
    """Last in this module: it kills the server (the next `store` restarts it)."""
    assert server.kill(harm_dir)
    reader = GuardedReader(store, timeout_s=3, probe_timeout_s=2)
    with pytest.raises(GraphServerLost) as caught:
        reader.read("MATCH (n) RETURN n LIMIT 1")
    assert not isinstance(caught.value, GraphError), "a retriever would swallow it"
    assert infrastructure_cause(caught.value) == "graph_server"
    result = _run(store, "MATCH (n) RETURN n LIMIT 1")
    assert [f.cause for f in result.infra_failures] == ["graph_server"]
    assert result.payload_tokens is None  # unscored


class _Dropping:
    """A store whose statements lose their connection `drops` times; RETURN 1 probes answer
    while `alive`."""

    def __init__(self, drops: int, alive: bool = True) -> None:
        self.drops = drops
        self.alive = alive
        self.sent: list[str] = []

    def read(self, query: str, params=None, **kwargs) -> list[dict]:
        if query == "RETURN 1 AS ok":
            if not self.alive:
                raise GraphUnavailableError("graph server at x does not answer")
            return [{"ok": 1}]
        self.sent.append(query)
        if self.drops > 0:
            self.drops -= 1
            raise GraphUnavailableError("graph server at x does not answer (defunct connection)")
        return [{"n": 1}]


def test_a_dropped_connection_is_tried_once_more_then_blamed_on_the_query():
    once = _Dropping(drops=1)
    assert GuardedReader(once, canceller=None).read("RETURN 1 AS n") == [{"n": 1}]
    assert once.sent == ["RETURN 1 AS n"] * 2
    always = _Dropping(drops=9)
    with pytest.raises(GraphQueryError, match="dropped the connection") as caught:
        GuardedReader(always, canceller=None).read("RETURN 1 AS n")
    assert always.sent == ["RETURN 1 AS n"] * 2
    assert infrastructure_cause(caught.value, graph_alive=lambda: True) is None
    gone = _Dropping(drops=9, alive=False)
    with pytest.raises(GraphServerLost):
        GuardedReader(gone, canceller=None).read("RETURN 1 AS n")
    assert gone.sent == ["RETURN 1 AS n"]
