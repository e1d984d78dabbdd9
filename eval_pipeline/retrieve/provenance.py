"""Evidence through provenance: a retrieved memory node counts for the turns it came from.

A memory system may rewrite what it stores ("The user's sister lives in Zürich." for "My
sister just moved to Zürich!"), so matching retrieved text against evidence turns would score
it 0. Instead every memory node keeps provenance edges to its turns, and a retrieved item that
names nodes (`RetrievedItem.node_ids`) gets those turns added to its `turn_ids`, which is what
evidence recall ranks (`score.retrieval_metrics`). It works for any node whose label, id
property and provenance relationship are declared: the built-in memory labels
(`reconcile.schema.PROVENANCE`) and whatever a memory system's ingest schema declares
(`eval_pipeline.memory_system.IngestSchema.provenance`, recorded in the graph with its pins).

Resolution happens at retrieval time, while the graph is there; the scoring stage only reads
the result. Lookups are by id property (indexed for the built-ins), one query per source.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipeline.graph.schema import TURN
from eval_pipeline.reconcile import schema as reconcile_schema
from eval_pipeline.retrieve.results import RetrievedItem

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_IDS_PER_QUERY = 2_000


@dataclass(frozen=True)
class ProvenanceSource:
    """Nodes of `label`, identified by `id_property`, lead to turns through `link`."""

    label: str
    id_property: str
    link: str

    def __post_init__(self) -> None:
        for part in (self.label, self.id_property, self.link):
            if not _NAME.match(part):
                raise ValueError(f"provenance source names must be plain identifiers: {part!r}")

    def statement(self) -> str:
        return (
            f"MATCH (n:{self.label}) WHERE n.{self.id_property} IN $ids\n"
            f"MATCH (n)-[:{self.link}]->(t:{TURN})\n"
            f"RETURN n.{self.id_property} AS id, collect(DISTINCT t.turn_id) AS turn_ids"
        )


BUILTIN_SOURCES: tuple[ProvenanceSource, ...] = (
    ProvenanceSource(reconcile_schema.CHUNK, "chunk_id", reconcile_schema.PROVENANCE["Chunk"]),
    ProvenanceSource(reconcile_schema.FACT, "fact_id", reconcile_schema.PROVENANCE["Fact"]),
    ProvenanceSource(
        reconcile_schema.EPISODE, "episode_id", reconcile_schema.PROVENANCE["Episode"]
    ),
)


def declared_sources(pins_json: Iterable[Any]) -> list[ProvenanceSource]:
    """Sources a memory system declared in its pins (`schema.provenance`), as the graph's
    `EvalPipelineMemory` nodes hold them (JSON text or maps); malformed entries are skipped."""
    out: list[ProvenanceSource] = []
    for raw in pins_json:
        pins = json.loads(raw) if isinstance(raw, str) else raw
        declared = ((pins or {}).get("schema") or {}).get("provenance") or []
        for entry in declared:
            try:
                out.append(ProvenanceSource(*entry))
            except (TypeError, ValueError):
                continue
    return out


def _turn_key(turn_id: str) -> tuple[str, int]:
    session, _, index = turn_id.rpartition("#")
    return (session, int(index)) if index.isdigit() else (turn_id, -1)


class ProvenanceResolver:
    """Adds provenance turns to retrieved items, reading the graph through `store.read`."""

    def __init__(self, store: Any, sources: Sequence[ProvenanceSource] | None = None) -> None:
        self.store = store
        self._sources = list(sources) if sources is not None else None

    def sources(self) -> list[ProvenanceSource]:
        if self._sources is None:
            rows = self.store.read(
                f"MATCH (m:{reconcile_schema.MEMORY}) RETURN m.pins AS pins", timeout_s=60
            )
            extra = declared_sources(r["pins"] for r in rows)
            self._sources = list(dict.fromkeys([*BUILTIN_SOURCES, *extra]))
        return self._sources

    def turns_of(self, node_ids: Iterable[str]) -> dict[str, list[str]]:
        ids = sorted({str(i) for i in node_ids if i})
        found: dict[str, set[str]] = {}
        if not ids:
            return {}
        for source in self.sources():
            for start in range(0, len(ids), MAX_IDS_PER_QUERY):
                rows = self.store.read(
                    source.statement(), {"ids": ids[start : start + MAX_IDS_PER_QUERY]}
                )
                for r in rows:
                    found.setdefault(str(r["id"]), set()).update(
                        str(t) for t in r["turn_ids"] or [] if t
                    )
        return {i: sorted(turns, key=_turn_key) for i, turns in found.items()}

    def __call__(self, items: list[RetrievedItem]) -> list[RetrievedItem]:
        turns = self.turns_of(i for item in items for i in item.node_ids)
        if not turns:
            return items
        out = []
        for item in items:
            extra = [t for i in item.node_ids for t in turns.get(i, [])]
            if not extra:
                out.append(item)
                continue
            turn_ids = list(dict.fromkeys([*item.turn_ids, *extra]))
            sessions = list(
                dict.fromkeys([*item.session_ids, *(t.rpartition("#")[0] for t in extra)])
            )
            out.append(item.model_copy(update={"turn_ids": turn_ids, "session_ids": sessions}))
        return out
