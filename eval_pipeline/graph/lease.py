"""One chain per graph instance at a time: a lease kept in the instance itself.

Dagster pools serialise steps, not chains, and `execute_in_process` (the CLI) bypasses the
run queue; two chains on one instance would wipe, reconcile and read each other's graph. So
every graph-touching step holds the instance's lease, and a second chain waits for it (up to
`wait_s`) or is refused with one line naming the holder. The lease lives in the graph (one
`EvalPipelineLease` node, never removed by the wipe), so it works whatever launched the run
and wherever the run executes (the CLI, `dagster dev`, a `dagster-docker` container).

A lease is held while its holder renews it (a heartbeat thread, every HEARTBEAT_S) and for
TTL_S after the last renewal; releasing it removes the node. It is stale — free to take —
when it expired, when its holder ran on this host in a process that is gone (or in this
process, no longer holding it), or when the Dagster instance knows the holder's run and that
run has finished.

Taking over an existing lease is compare-and-set on its random token, re-read after commit
(both servers refuse the second of two conflicting writes to one node, so two acquirers cannot
both win). Creating the lease node is where racers could meet: each creator waits SETTLE_S,
reads every lease node back, and the smallest token wins — the same rule over the same rows for
every racer; the others delete their node and are refused (or wait). A racer slower than
SETTLE_S between its read and its create is the residual risk.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from eval_pipeline.graph import schema
from eval_pipeline.graph.errors import GraphError, GraphQueryError
from eval_pipeline.processes import signal_reaches

TTL_S = 300.0
HEARTBEAT_S = 30.0
POLL_S = 2.0
SETTLE_S = 0.5  # after creating the lease node, how long racers get to show theirs

READ_LEASES = f"""
MATCH (l:{schema.LEASE})
RETURN l.token AS token, l.holder AS holder, l.run_id AS run_id, l.host AS host,
       l.pid AS pid, l.what AS what, l.acquired_at AS acquired_at,
       l.expires_at AS expires_at
"""
CREATE_LEASE = f"""
CREATE (:{schema.LEASE} {{token: $token, holder: $holder, run_id: $run_id, host: $host,
                          pid: $pid, what: $what, acquired_at: $acquired_at,
                          expires_at: $expires_at}})
"""
# Compare-and-set: only the lease whose token we read is taken over.
TAKE_LEASE = f"""
MATCH (l:{schema.LEASE}) WHERE l.token = $seen
SET l.token = $token, l.holder = $holder, l.run_id = $run_id, l.host = $host, l.pid = $pid,
    l.what = $what, l.acquired_at = $acquired_at, l.expires_at = $expires_at
RETURN count(l) AS taken
"""
RENEW_LEASE = f"""
MATCH (l:{schema.LEASE}) WHERE l.token = $token
SET l.expires_at = $expires_at
RETURN count(l) AS renewed
"""
# Released = removed: an instance nobody holds carries no lease node at all.
DELETE_LEASE = f"MATCH (l:{schema.LEASE}) WHERE l.token = $token DELETE l"

# Holders currently held by this process (a lease of this pid not listed here is stale).
_HELD_HERE: dict[str, int] = {}
_HELD_LOCK = threading.Lock()


class LeaseHeld(GraphError):
    """Another chain holds the instance; the message names it."""


class Lease(BaseModel):
    """Who holds (or wants) the instance."""

    holder: str  # the chain: a Dagster run id, or the CLI invocation that runs several
    run_id: str | None = None  # the Dagster run, when the holder is a run
    what: str = ""  # a short description for the message, e.g. "eval_chain run"
    host: str = Field(default_factory=socket.gethostname)
    pid: int = Field(default_factory=os.getpid)  # taken when made: a forked child is another


class LeaseRow(BaseModel):
    token: str | None = None
    holder: str | None = None
    run_id: str | None = None
    host: str | None = None
    pid: int | None = None
    what: str | None = None
    acquired_at: str | None = None
    expires_at: float | None = None

    def describe(self, now: float) -> str:
        left = max(0.0, (self.expires_at or 0.0) - now)
        who = f"run {self.run_id}" if self.run_id else f"chain {self.holder}"
        what = f" ({self.what})" if self.what else ""
        return (
            f"{who}{what} on host {self.host}, pid {self.pid}, since {self.acquired_at}; "
            f"its lease runs out in {left:.0f} s unless renewed"
        )


RunFinished = Callable[[str], bool | None]  # run id -> finished? (None: unknown run)


def is_stale(row: LeaseRow, now: float, run_finished: RunFinished | None = None) -> bool:
    if row.holder is None or (row.expires_at or 0.0) < now:
        return True
    if row.host == socket.gethostname() and row.pid is not None:
        if not signal_reaches(row.pid):
            return True
        if row.pid == os.getpid():
            with _HELD_LOCK:
                if row.holder not in _HELD_HERE:
                    return True
    if run_finished is not None and row.run_id:
        return run_finished(row.run_id) is True
    return False


def read_leases(store: Any) -> list[LeaseRow]:
    return [LeaseRow.model_validate(r) for r in store.read(READ_LEASES)]


def _params(me: Lease, token: str, now: float) -> dict[str, Any]:
    return {
        "token": token,
        "holder": me.holder,
        "run_id": me.run_id,
        "host": me.host,
        "pid": me.pid,
        "what": me.what,
        "acquired_at": datetime.fromtimestamp(now, UTC).isoformat(),
        "expires_at": now + TTL_S,
    }


def _try_acquire(
    store: Any, me: Lease, run_finished: RunFinished | None
) -> tuple[str | None, LeaseRow | None]:
    """(token, None) when `me` now holds the lease, (None, holder) when someone else does,
    (None, None) when a racing acquirer changed it meanwhile (look again)."""
    now = time.time()
    rows = read_leases(store)
    mine = [r for r in rows if r.holder == me.holder and r.token]
    others = [r for r in rows if r.holder != me.holder and not is_stale(r, now, run_finished)]
    if others:
        return None, others[0]
    if mine:
        token = str(mine[0].token)
        store.write(RENEW_LEASE, {"token": token, "expires_at": now + TTL_S})
    else:
        token = secrets.token_hex(16)
        params = _params(me, token, now)
        if rows:
            taken = store.write(TAKE_LEASE, {**params, "seen": rows[0].token})
            if not taken or not taken[0]["taken"]:
                return None, None
        else:
            store.write(CREATE_LEASE, params)
            # A racer that saw no lease either creates its own within moments: wait long
            # enough to see it, then every racer applies the same rule to the same rows.
            time.sleep(SETTLE_S)
    # Read back: the commit of a racing acquirer may have won.
    after = read_leases(store)
    now = time.time()
    if not any(r.token == token for r in after):
        return None, None
    rivals = [
        r
        for r in after
        if r.token != token and r.holder != me.holder and not is_stale(r, now, run_finished)
    ]
    if rivals:  # acquirers created lease nodes at once: the smallest token wins, for all
        ours = next(r for r in after if r.token == token)
        winner = min([ours, *rivals], key=lambda r: r.token or "")
        if winner.token != token:
            store.write(DELETE_LEASE, {"token": token})
            return None, winner
    for extra in after:  # stale leftovers and the losers of such a race
        if extra.token != token:
            store.write(DELETE_LEASE, {"token": extra.token})
    return token, None


MAX_CONFLICTS = 5


def acquire(
    store: Any,
    me: Lease,
    *,
    wait_s: float = 0.0,
    run_finished: RunFinished | None = None,
    where: str = "the graph instance",
) -> str:
    """Take (or renew) the lease for `me`; wait up to `wait_s`, then raise LeaseHeld."""
    deadline = time.monotonic() + wait_s
    conflicts = 0
    while True:
        try:
            token, holder = _try_acquire(store, me, run_finished)
        except GraphQueryError:
            # A write-write conflict with a racing acquirer (MVCC): look again, a few times.
            conflicts += 1
            if conflicts > MAX_CONFLICTS:
                raise
            token, holder = None, None
        if token is not None:
            return token
        if holder is not None and time.monotonic() >= deadline:
            raise LeaseHeld(
                f"{where} is in use by {holder.describe(time.time())}: one chain per graph "
                "instance at a time; wait for it (--wait-for-graph SECONDS) or use another "
                "instance"
            )
        time.sleep(POLL_S if holder is not None else 0.05)


def release(store: Any, token: str) -> None:
    store.write(DELETE_LEASE, {"token": token})


@contextlib.contextmanager
def hold(
    store: Any,
    me: Lease,
    *,
    wait_s: float = 0.0,
    run_finished: RunFinished | None = None,
    release_after: bool = False,
    where: str = "the graph instance",
) -> Iterator[str]:
    """Hold the lease for the block, renewing it in the background."""
    token = acquire(store, me, wait_s=wait_s, run_finished=run_finished, where=where)
    with _HELD_LOCK:
        _HELD_HERE[me.holder] = _HELD_HERE.get(me.holder, 0) + 1
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(HEARTBEAT_S):
            with contextlib.suppress(Exception):  # a missed beat only shortens the lease
                store.write(RENEW_LEASE, {"token": token, "expires_at": time.time() + TTL_S})

    beat = threading.Thread(target=heartbeat, name="graph-lease", daemon=True)
    beat.start()
    try:
        yield token
    finally:
        stop.set()
        beat.join(timeout=5)
        with _HELD_LOCK:
            count = _HELD_HERE.get(me.holder, 1) - 1
            if count > 0:
                _HELD_HERE[me.holder] = count
            else:
                _HELD_HERE.pop(me.holder, None)
        if release_after:
            with contextlib.suppress(Exception):
                release(store, token)


@contextlib.contextmanager
def hold_all(
    stores: list[Any], me: Lease, *, wait_s: float, run_finished: RunFinished | None = None
) -> Iterator[None]:
    """Every store's instance started (or reached) and claimed, and its lease held for the
    block under one holder: a chain over K instances takes all K before it wipes any, and a
    refusal on one releases those already taken."""

    # K embedded servers start at once (each JVM takes seconds), then all K are claimed and
    # leased at once too: a claim of an instance we used before takes a full content digest
    # and a new lease waits SETTLE_S, so one after the other they were K times that.
    def take(store: Any) -> contextlib.AbstractContextManager:
        store.ensure_running()
        store.claim(check_changes=True)  # someone else's edits refused before any stage
        held = hold(
            store,
            me,
            wait_s=wait_s,
            run_finished=run_finished,
            release_after=True,
            where=store.where,
        )
        held.__enter__()
        return held

    with ThreadPoolExecutor(max_workers=max(1, len(stores))) as taking:
        futures = [taking.submit(take, store) for store in stores]
    with contextlib.ExitStack() as stack:
        failed = None
        for future in futures:
            if future.exception() is None:
                stack.push(future.result().__exit__)
            elif failed is None:
                failed = future.exception()  # the first store's (in order) refusal
        if failed is not None:
            raise failed  # those already taken are released on the way out
        yield


def holder_of(store: Any, run_finished: RunFinished | None = None) -> LeaseRow | None:
    """The live holder of the instance's lease, or None when it is free."""
    now = time.time()
    live = [r for r in read_leases(store) if not is_stale(r, now, run_finished)]
    return live[0] if live else None
