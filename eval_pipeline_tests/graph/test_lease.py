"""The graph instance's lease, on the real embedded server: one chain at a time, a clear
refusal naming the holder, stale leases taken over, the wipe leaving a held lease alone."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.graph import lease
from eval_pipeline.graph.lease import Lease, LeaseHeld, acquire, hold, holder_of, read_leases
from eval_pipeline.graph.store import GraphStore

_dbs = itertools.count()


@pytest.fixture
def graph(graph_dir: Path, session_store: GraphStore) -> Iterator[GraphStore]:
    store = GraphStore(data_dir=str(graph_dir), database=f"lease{next(_dbs)}", heap="512m")
    store.ensure_running()
    store.claim()
    yield store
    store.close()


def test_a_second_chain_is_refused_with_one_line_naming_the_holder(graph):
    a = Lease(holder="chain-a", run_id="run-a", what="eval_chain run")
    with hold(graph, a, release_after=True):
        with pytest.raises(LeaseHeld) as refused:
            acquire(graph, Lease(holder="chain-b"), where=graph.where)
        message = str(refused.value)
        assert "\n" not in message and "run run-a (eval_chain run)" in message
        assert "pid" in message and "--wait-for-graph" in message
        # The same chain renews instead (a CLI chain's runs share its lease).
        assert acquire(graph, Lease(holder="chain-a")) == read_leases(graph)[0].token
    assert read_leases(graph) == []  # released: no lease node left


def test_a_waiting_chain_gets_the_lease_when_the_holder_lets_go(graph, monkeypatch):
    monkeypatch.setattr(lease, "POLL_S", 0.1)
    got: list[float] = []
    with hold(graph, Lease(holder="first"), release_after=True):
        t = threading.Thread(
            target=lambda: got.append(
                acquire(graph, Lease(holder="second"), wait_s=30) and time.monotonic()
            )
        )
        t.start()
        time.sleep(1.0)
        assert not got  # still waiting
        released_at = time.monotonic()
    t.join(timeout=30)
    assert got and got[0] >= released_at
    assert [r.holder for r in read_leases(graph)] == ["second"]


def test_stale_leases_are_taken_over(graph, monkeypatch):
    # Expired: its holder stopped renewing.
    monkeypatch.setattr(lease, "TTL_S", 0.5)
    acquire(graph, Lease(holder="crashed", host="another-host"))
    time.sleep(1.0)
    monkeypatch.setattr(lease, "TTL_S", 300.0)
    acquire(graph, Lease(holder="next"))
    assert [r.holder for r in read_leases(graph)] == ["next"]
    # Its process on this host is gone.
    acquire(graph, Lease(holder="gone", pid=2**22 + 12345), run_finished=lambda r: True)
    acquire(graph, Lease(holder="after-gone"))
    # The Dagster instance says its run finished.
    acquire(
        graph,
        Lease(holder="run-x", run_id="run-x", host="another-host"),
        run_finished=lambda r: True,
    )
    after = Lease(holder="after-run", host="another-host")
    acquire(graph, after, run_finished=lambda r: r == "run-x")
    with pytest.raises(LeaseHeld):  # a live holder on another host whose run is unknown
        acquire(graph, Lease(holder="late"), run_finished=lambda r: None)
    assert [r.holder for r in read_leases(graph)] == ["after-run"]
    # In this process, a holder that no longer holds (its `hold` block ended) is stale.
    graph.write("MATCH (l:EvalPipelineLease) DELETE l")
    with hold(graph, Lease(holder="mine"), run_finished=lambda r: True):
        assert holder_of(graph).holder == "mine"
    assert holder_of(graph) is None


def test_racing_acquirers_yield_exactly_one_holder(graph):
    winners: list[str] = []
    barrier = threading.Barrier(4)

    def race(name: str) -> None:
        barrier.wait()
        try:
            acquire(graph, Lease(holder=name, host="host-" + name))
            winners.append(name)
        except LeaseHeld:
            pass

    threads = [threading.Thread(target=race, args=(f"c{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(winners) == 1
    assert [r.holder for r in read_leases(graph)] == winners


def test_the_wipe_keeps_a_held_lease_and_an_instance_with_only_a_lease_is_empty(graph):
    with hold(graph, Lease(holder="wiper")):
        graph.write("CREATE (:Note {text: 'data'})")
        graph.wipe()
        assert [r.holder for r in read_leases(graph)] == ["wiper"]
        labels = graph.counts()["labels"]
        assert set(labels) == {"EvalPipelineClaim", "EvalPipelineLease"}
    graph.write("MATCH (c:EvalPipelineClaim) DELETE c")
    with hold(graph, Lease(holder="x")):
        assert graph.is_empty()  # our lease alone is not someone's data
