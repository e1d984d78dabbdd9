"""Fingerprint of the fixtures a graph was built from.

It covers exactly what reaches the graph (session id, dates, turns, haystack membership) plus
the schema version: a change to corpus-side bookkeeping such as `holds_evidence` leaves the
graph valid, a change to any turn or a schema bump does not. Sessions are hashed one by one
and the digests sorted, so line order does not matter.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from eval_pipeline.graph.schema import SCHEMA_VERSION

_DOMAIN = b"eval_pipeline/graph-fingerprint/v1\n"


def session_digest(row: Mapping[str, Any]) -> bytes:
    """Digest of one session row (`inject.session_row`: turns sorted, question ids unique)."""
    graph_part = [
        row["session_id"],
        row["date"],
        row["started_at"],
        sorted(row["question_ids"]),
        [[t["index"], t["role"], t["text"]] for t in row["turns"]],
    ]
    line = json.dumps(graph_part, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(line.encode("utf-8")).digest()


def fixtures_fingerprint(rows: Iterable[Mapping[str, Any]]) -> str:
    h = hashlib.sha256(_DOMAIN)
    h.update(f"schema={SCHEMA_VERSION}\n".encode())
    for digest in sorted(session_digest(row) for row in rows):
        h.update(digest)
    return "sha256:" + h.hexdigest()
