"""The graph schema as a retrieval agent needs it: with REAL property values.

A bare list of labels made the reference agent invent values ("status: 'active'") and answer
"not in memory". So for every label we profile its properties on the live graph and say what
to do with each:

- low-cardinality properties are enumerated with their exact values and counts (match these);
- identifiers get a few real examples and their format (match exactly);
- free text gets real examples and is marked "search, don't match", with the backend's exact
  full-text call when an index covers it (CONTAINS on lower-cased text otherwise);
- numbers, ISO timestamps and dates get their real range.

Computed once per run with plain Cypher that both backends run (a sample per label for the
shape, exact DISTINCT/min/max queries for the values shown).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, Field

from eval_pipeline.graph import schema
from eval_pipeline.graph.dialects.base import quote_name
from eval_pipeline.retrieve import fulltext_queries as ftq
from eval_pipeline.retrieve.protocol import GraphReader

# Bookkeeping of the pipeline itself: nothing a memory query should touch.
HIDDEN_LABELS = frozenset(schema.BOOKKEEPING_LABELS)

SAMPLE_NODES = 400
ENUM_MAX = 20
EXAMPLE_CHARS = 160
PROFILE_TIMEOUT_S = 120.0

PropertyKind = Literal[
    "identifier",
    "enum",
    "free_text",
    "timestamp",
    "date_text",
    "number",
    "boolean",
    "list",
    "other",
]

_ISO_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?$")
_UPSTREAM_DATE = re.compile(r"^\d{4}/\d{2}/\d{2}\b")


class PropertyProfile(BaseModel):
    name: str
    kind: PropertyKind
    present: int  # sampled nodes carrying it
    sampled: int
    values: list[Any] = Field(default_factory=list)  # enum: every value; else examples
    counts: list[int] = Field(default_factory=list)  # enum: nodes per value
    minimum: Any = None
    maximum: Any = None
    fulltext_call: str | None = None  # how to search it, when an index covers it


class LabelProfile(BaseModel):
    label: str
    count: int
    properties: list[PropertyProfile]


class RelationshipProfile(BaseModel):
    type: str
    count: int
    patterns: list[tuple[str, str]]  # (from label, to label)


class SchemaDescription(BaseModel):
    backend: str
    labels: list[LabelProfile]
    relationships: list[RelationshipProfile]
    fulltext: list[str]  # ready-to-use CALL examples

    def render(self) -> str:
        return render_description(self)


# --- profiling ----------------------------------------------------------------------------


def _read(store: GraphReader, query: str, params: dict | None = None, rows: int = 10_000) -> list:
    return store.read(query, params or {}, timeout_s=PROFILE_TIMEOUT_S, max_rows=rows)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "other"


def _classify(name: str, values: list[Any]) -> PropertyKind:
    types = Counter(_type_name(v) for v in values)
    main = types.most_common(1)[0][0] if types else "other"
    if main == "boolean":
        return "boolean"
    if main == "list":
        return "list"
    if main == "number":
        return "number"
    if main != "string":
        return "other"
    strings = [v for v in values if isinstance(v, str)]
    if name == "id" or name.endswith("_id") or name in {"key", "id"}:
        return "identifier"
    if strings and all(_ISO_TIMESTAMP.match(s) for s in strings):
        return "timestamp"
    if strings and all(_UPSTREAM_DATE.match(s) for s in strings):
        return "date_text"
    mean_len = sum(len(s) for s in strings) / max(1, len(strings))
    spaced = sum(1 for s in strings if " " in s.strip()) / max(1, len(strings))
    if mean_len >= 40 or spaced >= 0.5:
        return "free_text"
    return "other"


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > EXAMPLE_CHARS:
        return value[: EXAMPLE_CHARS - 1].rstrip() + "…"
    return value


def _examples(values: list[Any], n: int) -> list[Any]:
    seen: dict[str, Any] = {}
    for v in values:
        key = json.dumps(v, sort_keys=True, default=str)
        if key not in seen and v not in ("", None):
            seen[key] = _clip(v)
        if len(seen) >= n:
            break
    return list(seen.values())


def _profile_property(
    store: GraphReader, label: str, name: str, values: list[Any], sampled: int
) -> PropertyProfile:
    kind = _classify(name, values)
    node, prop = quote_name(label), quote_name(name)
    profile = PropertyProfile(name=name, kind=kind, present=len(values), sampled=sampled)
    distinct_in_sample = len({json.dumps(v, sort_keys=True, default=str) for v in values})
    enum_candidate = kind in {"other", "number", "boolean"} and distinct_in_sample <= ENUM_MAX
    if enum_candidate:
        rows = _read(
            store,
            f"MATCH (n:{node}) WHERE n.{prop} IS NOT NULL "
            f"RETURN n.{prop} AS v, count(*) AS c ORDER BY c DESC LIMIT {ENUM_MAX + 1}",
        )
        if len(rows) <= ENUM_MAX:
            profile.kind = "enum"
            profile.values = [r["v"] for r in rows]
            profile.counts = [int(r["c"]) for r in rows]
            return profile
    if kind in {"number", "timestamp", "date_text"}:
        # Upstream dates ("2023/05/30 (Tue) 23:40") sort as text by their leading yyyy/mm/dd.
        rows = _read(
            store,
            f"MATCH (n:{node}) WHERE n.{prop} IS NOT NULL "
            f"RETURN min(n.{prop}) AS lo, max(n.{prop}) AS hi",
        )
        if rows:
            profile.minimum, profile.maximum = rows[0]["lo"], rows[0]["hi"]
    profile.values = _examples(values, 2 if kind == "free_text" else 3)
    return profile


def _fulltext_call(dialect: Any, source: ftq.FulltextSource) -> str:
    return dialect.fulltext_example(source.index, source.source.text_property)


def describe_graph(
    store: GraphReader,
    backend: str,
    *,
    fulltext_sources: list[ftq.FulltextSource] | None = None,
    sample: int = SAMPLE_NODES,
) -> SchemaDescription:
    """Profile the live graph. `fulltext_sources`: indexes to advertise (turns by default)."""
    sources = fulltext_sources if fulltext_sources is not None else [ftq.turn_source(backend)]
    dialect = ftq.dialect_for(backend, store)
    searchable = {(s.source.label, s.source.text_property): s for s in sources}
    label_rows = _read(store, "MATCH (n) UNWIND labels(n) AS label RETURN label, count(*) AS n")
    labels: list[LabelProfile] = []
    for row in sorted(label_rows, key=lambda r: str(r["label"])):
        label = str(row["label"])
        if label in HIDDEN_LABELS:
            continue
        nodes = _read(
            store,
            f"MATCH (n:{quote_name(label)}) WITH n LIMIT $n RETURN properties(n) AS p",
            {"n": sample},
        )
        by_key: dict[str, list[Any]] = {}
        for node in nodes:
            for key, value in (node["p"] or {}).items():
                if value is not None:
                    by_key.setdefault(key, []).append(value)
        props = []
        for key in sorted(by_key):
            profile = _profile_property(store, label, key, by_key[key], len(nodes))
            source = searchable.get((label, key))
            if source is not None:
                profile.kind = "free_text"
                profile.fulltext_call = _fulltext_call(dialect, source)
            props.append(profile)
        labels.append(LabelProfile(label=label, count=int(row["n"]), properties=props))

    rel_rows = _read(store, "MATCH ()-[r]->() RETURN type(r) AS type, count(*) AS n")
    relationships: list[RelationshipProfile] = []
    for row in sorted(rel_rows, key=lambda r: str(r["type"])):
        rel = str(row["type"])
        pattern_rows = _read(
            store,
            f"MATCH (a)-[r:{quote_name(rel)}]->(b) WITH a, b LIMIT 2000 "
            "RETURN DISTINCT labels(a) AS f, labels(b) AS t",
        )
        patterns = sorted(
            {
                (str(p["f"][0]) if p["f"] else "?", str(p["t"][0]) if p["t"] else "?")
                for p in pattern_rows
            }
        )
        relationships.append(RelationshipProfile(type=rel, count=int(row["n"]), patterns=patterns))
    return SchemaDescription(
        backend=backend,
        labels=labels,
        relationships=relationships,
        fulltext=[_fulltext_call(dialect, s) for s in sources],
    )


# --- rendering ----------------------------------------------------------------------------


def _lit(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _render_property(p: PropertyProfile) -> list[str]:
    coverage = "" if p.present >= p.sampled else f" (on {p.present} of {p.sampled} sampled)"
    if p.kind == "enum":
        listed = ", ".join(f"{_lit(v)} ({c})" for v, c in zip(p.values, p.counts, strict=False))
        return [f"  .{p.name}: exactly one of {listed}{coverage}"]
    if p.kind == "identifier":
        ex = ", ".join(_lit(v) for v in p.values)
        return [f"  .{p.name}: identifier, match exactly; e.g. {ex}{coverage}"]
    if p.kind == "free_text":
        lines = [f"  .{p.name}: FREE TEXT: search it, never compare it with = {coverage}"]
        if p.fulltext_call:
            lines.append(f"      full-text indexed: {p.fulltext_call}")
        else:
            lines.append(f"      no index: WHERE toLower(n.{p.name}) CONTAINS 'word'")
        lines += [f"      e.g. {_lit(v)}" for v in p.values]
        return lines
    if p.kind == "timestamp":
        return [
            f"  .{p.name}: ISO 8601 text, compare as strings; from {_lit(p.minimum)} "
            f"to {_lit(p.maximum)}{coverage}"
        ]
    if p.kind == "date_text":
        ex = ", ".join(_lit(v) for v in p.values[:2])
        return [
            f"  .{p.name}: date as text (yyyy/mm/dd (Day) hh:mm), e.g. {ex}; from "
            f"{_lit(p.minimum)} to {_lit(p.maximum)}{coverage}"
        ]
    if p.kind == "number":
        return [f"  .{p.name}: number from {p.minimum} to {p.maximum}{coverage}"]
    ex = ", ".join(_lit(v) for v in p.values)
    return [f"  .{p.name}: {p.kind}, e.g. {ex}{coverage}"]


def render_description(desc: SchemaDescription) -> str:
    lines = [
        f"Graph schema ({desc.backend}, Cypher). Counts are exact; every value shown is a real "
        "value from this graph.",
        "",
        "Nodes:",
    ]
    for label in desc.labels:
        lines.append(f"(:{label.label}) {label.count} nodes")
        for prop in label.properties:
            lines += _render_property(prop)
    lines += ["", "Relationships:"]
    for rel in desc.relationships:
        for src, dst in rel.patterns:
            lines.append(f"(:{src})-[:{rel.type}]->(:{dst})  {rel.count} in total")
    if desc.fulltext:
        lines += ["", "Full-text search (BM25 ranked; OR between words; best for free text):"]
        lines += [f"  {call}" for call in desc.fulltext]
    return "\n".join(lines)
