"""Memory-formation guarantees, read from the graph: what any reconciler's memory must satisfy.

- no duplicate entities: within a namespace (or among entities with none), no two nodes of one
  type share a normalised name, and no entity's alias is another entity of its namespace;
- supersession complete: a fact with `superseded_by` has `invalid_at` and a SUPERSEDED_BY edge
  to exactly that successor, in its own namespace; no such edge without the property;
- provenance complete: every fact and chunk has FROM_TURN edges, to turns of its own session.

Each returns `CheckOutcome(problems, counts)`: `problems` is a bounded list of one-line
descriptions naming the nodes (empty = the guarantee holds), `counts` what was looked at.
Every query is a plain aggregate or an index lookup, so they stay cheap on a 20k-session graph.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from eval_pipeline.graph.schema import TURN
from eval_pipeline.reconcile import schema

MAX_PROBLEMS = 20
_TIMEOUT_S = 600


class CheckOutcome(NamedTuple):
    problems: list[str]
    counts: dict[str, int]


DUPLICATE_NAMES = f"""
MATCH (e:{schema.ENTITY})
WITH coalesce(e.namespace, '') AS ns, e.type AS type, coalesce(e.norm, e.key) AS norm,
     count(*) AS n, collect(e.key) AS keys
WHERE n > 1
RETURN ns, type, norm, n, keys ORDER BY ns, type, norm LIMIT {MAX_PROBLEMS}
"""

ALIAS_COLLISIONS = f"""
MATCH (b:{schema.ENTITY})
WHERE b.namespace IS NOT NULL AND size(coalesce(b.aliases, [])) > 0
UNWIND b.aliases AS alias
WITH b, b.namespace + '|' + alias AS other_key
MATCH (a:{schema.ENTITY} {{key: other_key}})
WHERE a.key <> b.key
RETURN b.key AS entity, a.key AS duplicate ORDER BY entity, duplicate LIMIT {MAX_PROBLEMS}
"""

COUNT_ENTITIES = f"MATCH (e:{schema.ENTITY}) RETURN count(e) AS n"

SUPERSEDED_WITHOUT_SUCCESSOR = f"""
MATCH (f:{schema.FACT})
WHERE f.superseded_by IS NOT NULL
OPTIONAL MATCH (f)-[:SUPERSEDED_BY]->(g:{schema.FACT})
WITH f, collect(g) AS successors
WITH f, successors, [g IN successors WHERE g.fact_id = f.superseded_by
                     AND coalesce(g.namespace, '') = coalesce(f.namespace, '')] AS right
WHERE size(right) <> 1 OR size(successors) <> 1 OR f.invalid_at IS NULL
RETURN f.fact_id AS fact, f.superseded_by AS superseded_by, f.invalid_at AS invalid_at,
       [g IN successors | g.fact_id] AS successors
ORDER BY fact LIMIT {MAX_PROBLEMS}
"""

EDGE_WITHOUT_PROPERTY = f"""
MATCH (f:{schema.FACT})-[:SUPERSEDED_BY]->(g:{schema.FACT})
WHERE f.superseded_by IS NULL
RETURN f.fact_id AS fact, g.fact_id AS successor ORDER BY fact LIMIT {MAX_PROBLEMS}
"""

COUNT_SUPERSEDED = f"MATCH (f:{schema.FACT}) WHERE f.superseded_by IS NOT NULL RETURN count(f) AS n"

WITHOUT_PROVENANCE = """
MATCH (n:{label})
WHERE NOT (n)-[:{link}]->(:{turn})
RETURN n.{id} AS id ORDER BY id LIMIT {limit}
"""

COUNT_WITHOUT_PROVENANCE = """
MATCH (n:{label}) WHERE NOT (n)-[:{link}]->(:{turn}) RETURN count(n) AS n
"""

FOREIGN_PROVENANCE = """
MATCH (n:{label})-[:{link}]->(t:{turn})
WHERE t.session_id <> n.session_id
RETURN n.{id} AS id, t.turn_id AS turn_id ORDER BY id, turn_id LIMIT {limit}
"""

COUNT_LABEL = "MATCH (n:{label}) RETURN count(n) AS n"

# Labels whose every node must lead back to turns: (label, id property).
PROVENANCE_LABELS: tuple[tuple[str, str], ...] = (
    (schema.FACT, "fact_id"),
    (schema.CHUNK, "chunk_id"),
)


def _read(store: Any, statement: str) -> list[dict[str, Any]]:
    return list(store.read(statement, timeout_s=_TIMEOUT_S, max_rows=MAX_PROBLEMS + 1))


def _count(store: Any, statement: str) -> int:
    rows = _read(store, statement)
    return int(rows[0]["n"]) if rows else 0


def duplicate_entities(store: Any) -> CheckOutcome:
    problems = [
        f"{r['n']} entities of type {r['type']} named {r['norm']!r}"
        + (f" in namespace {r['ns']!r}" if r["ns"] else "")
        + f": {sorted(r['keys'])[:5]}"
        for r in _read(store, DUPLICATE_NAMES)
    ]
    problems += [
        f"entity {r['entity']!r} has alias {r['duplicate']!r}, which is a separate entity"
        for r in _read(store, ALIAS_COLLISIONS)
    ]
    return CheckOutcome(problems[:MAX_PROBLEMS], {"entities": _count(store, COUNT_ENTITIES)})


def supersession_complete(store: Any) -> CheckOutcome:
    problems = []
    for r in _read(store, SUPERSEDED_WITHOUT_SUCCESSOR):
        if r["invalid_at"] is None:
            why = "has no invalid_at"
        else:
            why = f"has SUPERSEDED_BY edges to {r['successors']}"
        problems.append(f"fact {r['fact']!r} is superseded by {r['superseded_by']!r} but {why}")
    problems += [
        f"fact {r['fact']!r} has a SUPERSEDED_BY edge to {r['successor']!r} but no superseded_by"
        for r in _read(store, EDGE_WITHOUT_PROPERTY)
    ]
    return CheckOutcome(problems[:MAX_PROBLEMS], {"superseded": _count(store, COUNT_SUPERSEDED)})


def provenance_complete(store: Any) -> CheckOutcome:
    problems: list[str] = []
    counts: dict[str, int] = {}
    for label, id_property in PROVENANCE_LABELS:
        fill = {
            "label": label,
            "link": schema.PROVENANCE[label],
            "turn": TURN,
            "id": id_property,
            "limit": MAX_PROBLEMS,
        }
        missing = _count(store, COUNT_WITHOUT_PROVENANCE.format(**fill))
        counts[label] = _count(store, COUNT_LABEL.format(label=label))
        counts[f"{label}_without_provenance"] = missing
        if missing:
            ids = [r["id"] for r in _read(store, WITHOUT_PROVENANCE.format(**fill))]
            problems.append(f"{missing} {label} node(s) lead to no turn: {ids[:5]}")
        problems += [
            f"{label} {r['id']!r} cites turn {r['turn_id']!r} of another session"
            for r in _read(store, FOREIGN_PROVENANCE.format(**fill))
        ]
    return CheckOutcome(problems[:MAX_PROBLEMS], counts)
