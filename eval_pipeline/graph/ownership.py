"""`Ownership`: whether an instance is the pipeline's, and who wrote what since.

The instance is dedicated to evaluation: `claim()` marks an empty instance as ours, and
`wipe()` refuses to touch a non-empty instance without that mark unless `disposable`.
"Empty" is the dialect's inventory with nothing in it: no node, relationship, document record,
type, index, constraint or trigger (our lease aside).

Data someone else wrote after the claim is caught by checkpoints: every write of ours goes
through the store (Cypher, batches, transactions, and SQL over ArcadeDB's HTTP API), and the
store announces each one here (`note_write`, `heard_sql`), so a write phase is known when it
begins — it lists itself in the claim node before its first write — and records, when the
phase ends (`checkpoint()`, called by the store's `close()` and so at the end of every step),
what the instance then holds: its inventory (counts and schema names) and a digest of its
content (`state.py`: every node and relationship with its internal id, labels and properties;
our lease and claim left out). The claim of a chain and the wipe compare the
instance with the last checkpoint: more records, types, indexes, constraints or triggers than
that, or the same counts with another digest (a property edited, records deleted and
re-created), with no write phase of ours open, were written by someone else, and they refuse
with one line (unless `disposable`): at the claim, before any stage runs, which the CLI
reports as a refusal (exit 3). A phase opening also compares, so that its checkpoint never
absorbs what someone else wrote before it: that finding is kept in the claim for the next
wipe.

Limits: writes of ours in a phase that never reached its checkpoint (a killed process) cannot
be told apart from someone else's, so the next wipe goes ahead and logs it; nor can a foreign
write made while a write phase of ours is open; a delete alone is not refused (a deleted
record is not someone else's data to protect) unless the digest was recorded, and then it is.
ArcadeDB document records are counted, not hashed. The lease's own writes (heartbeat) are ours
and not a write phase: the lease node is left out of every inventory and digest.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from eval_pipeline.graph import lease, schema
from eval_pipeline.graph.dialects.base import KEPT_LABELS, Dialect, Inventory
from eval_pipeline.graph.dialects.store_protocol import DialectStore
from eval_pipeline.graph.errors import ForeignDataError, GraphQueryError
from eval_pipeline.graph.state import graph_state

log = logging.getLogger(__name__)

# The lease's statements are ours but not a write phase: a chain holds (and renews) its lease
# for hours, and that must not keep a window open in which any change passes for ours.
_LEASE_STATEMENTS = frozenset(
    {lease.CREATE_LEASE, lease.TAKE_LEASE, lease.RENEW_LEASE, lease.DELETE_LEASE}
)
# SQL commands (ArcadeDB's HTTP API) that only read; any other is a write of ours.
_SQL_READ = re.compile(r"^\s*(SELECT|MATCH|TRAVERSE|EXPLAIN|PROFILE)\b", re.IGNORECASE)
# Write phases of ours open in this process: a wipe here keeps their entries in the claim.
_OPEN_HERE: set[str] = set()
_OPEN_LOCK = threading.Lock()
_BOOKKEEPING_RETRIES = 5

Bookkeeping = Callable[[str, Mapping[str, Any]], list[dict]]


class OwnedStore(DialectStore, Protocol):
    """What the ownership needs of its store: the dialect's view of the instance."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def disposable(self) -> bool: ...


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Ownership:
    """The claim and write phases of one store. `bookkeeping` runs a statement on the claim
    node without announcing it (the claim's own writes are never a write phase)."""

    def __init__(self, store: OwnedStore, bookkeeping: Bookkeeping) -> None:
        self._store = store
        self._run_bookkeeping = bookkeeping
        # The write phase this store has open (its entry in the claim's `writers`), if any.
        self._writer: str | None = None
        self._phase_lock = threading.Lock()
        self._quiet = 0  # > 0 while the wipe runs: its writes open no phase
        self._wipe_note: str | None = None

    # --- what the instance holds --------------------------------------------------------

    def claim_record(self) -> dict | None:
        rows = self._store.read(schema.READ_CLAIM)
        return rows[0] if rows else None

    def inventory(self) -> Inventory:
        """What the instance holds, our lease and claim left out (the dialect's view)."""
        return self._store.dialect.inventory(self._store).without(KEPT_LABELS)

    def foreign_content(self) -> Inventory:
        """What an unclaimed instance holds that is not ours: the inventory less our
        bookkeeping types when they hold no record (the lease and claim always)."""
        return self.inventory().without((), empty_types=schema.BOOKKEEPING_LABELS)

    def is_empty(self) -> bool:
        """No node, relationship, document record, type, index, constraint or trigger (our
        lease and claim aside). An inventory that cannot see everything is not empty."""
        found = self.foreign_content()
        return found.complete and found.is_empty()

    @property
    def wipe_note(self) -> str | None:
        """Why the last wipe went ahead over changes it could not attribute, if it did."""
        return self._wipe_note

    @property
    def writer(self) -> str | None:
        """This store's open write phase (its entry in the claim), if one is open."""
        return self._writer

    # --- claim --------------------------------------------------------------------------

    def claim(self, *, check_changes: bool = False) -> None:
        """Mark the instance as the pipeline's own; refuse one that holds someone's data. With
        `check_changes` (a chain taking its instances), refuse one of ours that someone else
        changed since our last checkpoint too: before the first stage, not by the wipe inside
        it (a full content digest: a chain asks once, not every step)."""
        record = self.claim_record()
        if record is not None:
            if check_changes and not self._store.disposable:
                self._refuse_foreign_writes(record, action="run on")
            return
        self._refuse_unclaimed("claim")
        self._write_claim()

    def _refuse_unclaimed(self, action: str) -> None:
        if self._store.disposable:
            return
        found = self.foreign_content()
        where = self._store.where
        if not found.is_empty():
            raise ForeignDataError(
                f"refusing to {action} {where}: it holds {found.describe()} and no "
                "eval_pipeline claim: someone else's data; point --graph-uri at a dedicated "
                "instance, or mark this one disposable if it may be erased"
            )
        if not found.complete:
            raise ForeignDataError(
                f"refusing to {action} {where}: it has no eval_pipeline claim and its "
                "emptiness cannot be checked (ArcadeDB shows document records, types and "
                "indexes only over its HTTP API: set --graph-http-url), or mark it disposable "
                "if it may be erased"
            )

    def _write_claim(self) -> None:
        now = _now()
        params = {"claimed_at": now, "checkpoint_at": now, **self._checkpoint_params()}
        self._bookkeeping(schema.WRITE_CLAIM, params)
        self.forget_phase()

    def _inventory_json(self) -> str:
        return self.inventory().model_dump_json()

    def _content(self) -> str:
        """Digest of every node and relationship, our lease and claim left out (the claim
        records this very digest). Not the schema: our lease and claim types appear in it
        when first written; the inventory names the schema objects someone else adds."""
        return graph_state(self._store, skip=KEPT_LABELS, schema=lambda: None).content_fingerprint

    def _checkpoint_params(self) -> dict[str, str]:
        return {"checkpoint": self._inventory_json(), "content": self._content()}

    def _bookkeeping(self, query: str, params: Mapping[str, Any]) -> list[dict]:
        """A write to the claim node (ours, never a write phase), retried on a conflict with
        another writer of ours touching it at the same moment."""
        for attempt in range(_BOOKKEEPING_RETRIES):
            try:
                return self._run_bookkeeping(query, params)
            except GraphQueryError:
                if attempt + 1 == _BOOKKEEPING_RETRIES:
                    raise
                time.sleep(0.1 * (attempt + 1))
        raise AssertionError("unreachable")

    # --- write phases -------------------------------------------------------------------

    def heard_sql(self, command: str) -> None:
        """An SQL command of ours (ArcadeDB's HTTP API): a write unless it only reads."""
        if not _SQL_READ.match(command):
            self.note_write(command)

    def note_write(self, query: str) -> None:
        """Before a write of ours: open this store's write phase if none is open, listing it
        in the claim first (so that a phase cut short is known to have been ours)."""
        if self._writer is not None or self._quiet or query in _LEASE_STATEMENTS:
            return
        with self._phase_lock:
            if self._writer is not None:
                return
            record = self.claim_record()
            if record is None:
                return  # nothing to record in; claiming takes what is there as the start
            writer = f"{socket.gethostname()} pid {os.getpid()} {secrets.token_hex(4)} {_now()}"
            params: dict[str, Any] = {"writer": writer, "foreign": None, "foreign_since": None}
            if not record.get("writers") and not record.get("foreign"):
                # No phase of ours is open, so whatever changed since the checkpoint is
                # someone else's: keep it for the next wipe rather than let our checkpoint
                # absorb it.
                found = self._changed_since(record)
                if found is not None:
                    params["foreign"] = found.model_dump_json()
                    params["foreign_since"] = record.get("checkpoint_at")
            self._bookkeeping(schema.OPEN_WRITER, params)
            with _OPEN_LOCK:
                _OPEN_HERE.add(writer)
            self._writer = writer

    def forget_phase(self) -> None:
        """Forget this store's write phase here (it ended, or what it wrote is gone); its
        entry in the claim is the caller's to update."""
        with _OPEN_LOCK:
            _OPEN_HERE.discard(self._writer or "")
        self._writer = None

    def checkpoint(self) -> None:
        """End this store's write phase: what the instance holds now is ours."""
        writer = self._writer
        if writer is None:
            return
        params = {**self._checkpoint_params(), "checkpoint_at": _now(), "writer": writer}
        self._bookkeeping(schema.RECORD_CHECKPOINT, params)
        self.forget_phase()

    def _added_since(self, record: Mapping[str, Any]) -> Inventory | None:
        raw = record.get("checkpoint")
        if not raw:
            return None  # a claim from before checkpoints: nothing to compare with
        return self.inventory().added_since(Inventory.model_validate_json(raw))

    def _changed_since(self, record: Mapping[str, Any]) -> Inventory | None:
        """What changed since the checkpoint with no phase of ours open: what grew, else (the
        counts as they were) a content digest unlike the recorded one; None when nothing."""
        added = self._added_since(record)
        if added is None:
            return None
        if not added.is_empty():
            return added
        recorded = record.get("content")
        if recorded and self._content() != recorded:
            return Inventory(content_changed=True)
        return None

    # --- wipe ---------------------------------------------------------------------------

    def _refuse_foreign_writes(self, record: Mapping[str, Any], action: str = "wipe") -> None:
        kept = record.get("foreign")
        where = self._store.where
        if kept:
            found, since = Inventory.model_validate_json(kept), record.get("foreign_since")
        else:
            writers = list(record.get("writers") or [])
            if writers or self._writer is not None:
                # A write phase of ours is open (this one, one in this process, or one that
                # never reached its checkpoint): what changed cannot be told apart from ours.
                added = self._added_since(record)
                if added is None or added.is_empty():
                    return
                with _OPEN_LOCK:
                    elsewhere = [w for w in writers if w not in _OPEN_HERE]
                if elsewhere:  # not ours to vouch for from here: say so
                    self._wipe_note = (
                        f"{added.describe()} added since {record.get('checkpoint_at')} taken "
                        f"for ours: a write phase of ours never recorded its end "
                        f"({'; '.join(elsewhere)})"
                    )
                    log.warning("wiping %s: %s", where, self._wipe_note)
                return
            changed = self._changed_since(record)
            if changed is None or self._phase_began(record):
                return
            found, since = changed, record.get("checkpoint_at")
        verb = "was" if found.items() == 1 and not found.content_changed else "were"
        raise ForeignDataError(
            f"refusing to {action} {where}: {found.describe()} {verb} written here by someone "
            f"else since {since} (the end of the pipeline's last write); point --graph-uri at "
            "a dedicated instance, or mark this one disposable if it may be erased"
        )

    def _phase_began(self, record: Mapping[str, Any]) -> bool:
        """Whether a write phase of ours began (or ended) while we compared: another chain of
        ours writing is not someone else (its lease refuses us, with its own message)."""
        now = self.claim_record() or {}
        return bool(now.get("writers")) or now.get("checkpoint_at") != record.get("checkpoint_at")

    def wipe(self) -> None:
        """Remove every node, relationship, type, index, constraint and trigger (ours or a
        reconciler's), then reset the claim. Refused on an unclaimed instance that is not
        empty, and on a claimed one someone else wrote to since our last checkpoint, unless
        `disposable`."""
        self._wipe_note = None
        record = self.claim_record()
        if record is None:
            self._refuse_unclaimed("wipe")
        elif not self._store.disposable:
            self._refuse_foreign_writes(record)
        self._quiet += 1
        try:
            self._store.dialect.wipe(self._store)
        finally:
            self._quiet -= 1
        self.forget_phase()  # what this store wrote is gone: its phase ends here
        if record is None:
            self._write_claim()
            return
        with _OPEN_LOCK:  # other phases of ours under way in this process stay listed
            still_open = [w for w in record.get("writers") or [] if w in _OPEN_HERE]
        params = {**self._checkpoint_params(), "checkpoint_at": _now()}
        rows = self._bookkeeping(schema.RESET_CLAIM, {**params, "writers": still_open})
        if not rows or not rows[0]["claims"]:
            self._write_claim()
