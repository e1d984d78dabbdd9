"""Rows sent as `UNWIND $rows` batches small enough for one Bolt message each.

ArcadeDB's default Bolt message limit is 16 MiB and a message over it hangs the client with
no error (DESIGN.md section 5): a batch closes before it would exceed its byte budget, and a
single row that could not fit is refused before anything is sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from eval_pipeline.graph.errors import GraphPayloadError

# One row must fit well under the limit even on a server we did not configure.
MAX_ROW_BYTES = 12 * 1024 * 1024


def row_bytes(row: Mapping[str, Any]) -> int:
    """A row's size as a batch counts it (JSON, an upper bound of its Bolt encoding)."""
    return len(json.dumps(row))


def row_problem(row: Mapping[str, Any]) -> str | None:
    """Why `row` cannot be sent (over MAX_ROW_BYTES), or None: checked by `write_batches`, and
    by a caller that must know before it changes anything (injection, before the wipe)."""
    size = row_bytes(row)
    if size > MAX_ROW_BYTES:
        return (
            f"one row is {size / 1e6:.1f} MB, over the {MAX_ROW_BYTES / 1e6:.0f} MB "
            "a Bolt message may carry here; split it"
        )
    return None


class BatchStats(BaseModel):
    batches: int = 0
    rows: int = 0
    bytes: int = 0

    def __add__(self, other: BatchStats) -> BatchStats:
        return BatchStats(
            batches=self.batches + other.batches,
            rows=self.rows + other.rows,
            bytes=self.bytes + other.bytes,
        )


def write_batches(
    send: Callable[[str, Mapping[str, Any]], None],
    query: str,
    rows: Iterable[Mapping[str, Any]],
    *,
    batch_rows: int,
    batch_bytes: int,
    row_cost: Callable[[Mapping[str, Any]], int] | None = None,
    param: str = "rows",
) -> BatchStats:
    """Send `rows` as `$<param>` of `query` through `send`, one statement per batch.

    A batch closes at `batch_rows` (counted by `row_cost`, 1 per row by default) or before
    it would exceed `batch_bytes` (JSON size, an upper bound of the Bolt encoding). A single
    row over MAX_ROW_BYTES is refused: an oversize Bolt message hangs the client.
    """
    stats = BatchStats()
    batch: list[Mapping[str, Any]] = []
    cost = size = 0

    def flush() -> None:
        send(query, {param: batch})
        stats.batches += 1
        stats.rows += len(batch)
        stats.bytes += size

    for row in rows:
        nbytes = row_bytes(row)
        if nbytes > MAX_ROW_BYTES:
            raise GraphPayloadError(row_problem(row) or "")
        if batch and size + nbytes > batch_bytes:
            flush()
            batch, cost, size = [], 0, 0
        batch.append(row)
        size += nbytes
        cost += row_cost(row) if row_cost else 1
        if cost >= batch_rows:
            flush()
            batch, cost, size = [], 0, 0
    if batch:
        flush()
    return stats
