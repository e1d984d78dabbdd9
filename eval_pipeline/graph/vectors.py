"""Passage embeddings written into the graph, and the server's vector index over them.

This is the one place dense retrieval writes: a preparation step run once per retrieval stage,
before the graph's read fingerprint is taken (`assets/retrieval.py`), never by a retriever
(a retriever's reads go through the read-only guard). For each source (a label and its text
property) every node with text gets `embedding` (the bundled e5's `passage:` vector,
`eval_pipeline.embed`) and `embedding_key` (model sha256 + text, `embed.passage_key`). A node
whose key is already current is left alone, so a second run on the same graph writes
nothing; vectors already computed elsewhere come from the machine's `PassageCache`. Then
the dialect creates its vector index over the property (`Dialect.create_vector_index`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipeline import embed
from eval_pipeline.graph.dialects.base import quote_name

log = logging.getLogger(__name__)

EMBEDDING_PROPERTY = "embedding"
KEY_PROPERTY = "embedding_key"
EMBED_BATCH = 32  # texts per model call
WRITE_ROWS = 500  # ~4 KB a row (384 floats): ~2 MB a statement
READ_TIMEOUT_S = 900.0
MAX_ROWS = 50_000_000


@dataclass(frozen=True)
class VectorSource:
    """Nodes whose text is embedded: a label, its text property and its id property."""

    label: str
    text_property: str
    id_property: str


def _texts_statement(source: VectorSource) -> str:
    label, text, node_id = (
        quote_name(source.label),
        quote_name(source.text_property),
        quote_name(source.id_property),
    )
    return (
        f"MATCH (n:{label}) WHERE n.{text} IS NOT NULL AND n.{text} <> ''\n"
        f"RETURN n.{node_id} AS id, n.{text} AS text, n.{KEY_PROPERTY} AS key"
    )


def _write_statement(source: VectorSource) -> str:
    return (
        f"UNWIND $rows AS r MATCH (n:{quote_name(source.label)} "
        f"{{{quote_name(source.id_property)}: r.id}})\n"
        f"SET n.{EMBEDDING_PROPERTY} = r.vector, n.{KEY_PROPERTY} = r.key"
    )


Embedder = Callable[[list[str]], Any]  # texts -> rows of passage vectors


def prepare_vectors(
    store: Any,
    sources: Sequence[VectorSource],
    *,
    cache: embed.PassageCache | None = None,
    embedder: Embedder = embed.embed_passages,
    note: Callable[[str], None] = log.info,
) -> dict[str, Any]:
    """Embed every source's texts not yet embedded under the current model, write them and
    create the vector indexes; what was done, per label (for the stage's facts)."""
    model = embed.identity()
    done: dict[str, Any] = {}
    for source in sources:
        started = time.perf_counter()
        rows = store.read(_texts_statement(source), timeout_s=READ_TIMEOUT_S, max_rows=MAX_ROWS)
        wanted = {str(r["id"]): str(r["text"]) for r in rows if r.get("id") is not None}
        stored = {str(r["id"]): r.get("key") for r in rows if r.get("id") is not None}
        keys = {i: embed.passage_key(t, model["sha256"]) for i, t in wanted.items()}
        stale = [i for i in sorted(wanted) if stored[i] != keys[i]]
        cached = cache.get_many([keys[i] for i in stale]) if cache is not None and stale else {}
        fresh = [i for i in stale if keys[i] not in cached]
        vectors: dict[str, list[float]] = {i: cached[keys[i]] for i in stale if keys[i] in cached}
        for start in range(0, len(fresh), EMBED_BATCH):
            part = fresh[start : start + EMBED_BATCH]
            rows_out = embedder([wanted[i] for i in part])
            made = [(i, [float(x) for x in row]) for i, row in zip(part, rows_out, strict=True)]
            vectors.update(made)
            if cache is not None:
                cache.put_many([(keys[i], v) for i, v in made])
            if start and start % (EMBED_BATCH * 20) == 0:
                note(f"embedding {source.label}: {start}/{len(fresh)}")
        if vectors:
            store.write_batches(
                _write_statement(source),
                ({"id": i, "vector": v, "key": keys[i]} for i, v in sorted(vectors.items())),
                batch_rows=WRITE_ROWS,
                batch_bytes=getattr(store, "batch_bytes", 8 << 20),
            )
        if wanted:
            store.dialect.create_vector_index(
                store, source.label, EMBEDDING_PROPERTY, model["dims"], len(wanted)
            )
        done[source.label] = {
            "nodes": len(wanted),
            "kept": len(wanted) - len(stale),
            "from_cache": len(cached),
            "embedded": len(fresh),
            "seconds": round(time.perf_counter() - started, 2),
        }
        note(f"embeddings of {source.label}: {done[source.label]}")
    return {"model": model, "sources": done}
