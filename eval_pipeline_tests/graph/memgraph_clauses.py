"""Memgraph's clause-order rules, applied to a statement without a server.

Memgraph refuses, at parse time, clause sequences that other engines accept; the rules below
are those of `CypherMainVisitor::visitSingleQuery` (src/query/frontend/ast/
cypher_main_visitor.cpp @ v3.10.1, lines 1905-2003), checked per single query and, recursively,
inside every `CALL { ... }` body:

- RETURN comes once, last: nothing but the end of the query follows it (no CALL, UNWIND,
  MATCH, update clause, WITH or second RETURN);
- UNWIND and MATCH never follow an update clause of the same query part (a WITH in between
  starts a new part); a writing CALL subquery does not count as an update of the outer part;
- MATCH never follows OPTIONAL MATCH in the same part;
- a query creates or updates something (itself or in a subquery), or returns, or is a
  standalone CALL of a procedure.

The split is lexical: strings, backtick names and comments are skipped, and only words outside
(), [] and map braces are clauses; `ON CREATE SET` / `ON MATCH SET` belong to MERGE and
`STARTS WITH` / `ENDS WITH` are operators.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

UPDATES = frozenset({"CREATE", "MERGE", "SET", "DELETE", "REMOVE", "FOREACH"})
_CLAUSE_WORDS = UPDATES | {"MATCH", "OPTIONAL", "UNWIND", "WITH", "RETURN", "CALL", "UNION"}
_TOKEN = re.compile(
    r"(?P<skip>\s+|//[^\n]*|/\*.*?\*/|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|(?:`[^`]*`)+)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<other>.)",
    re.DOTALL,
)


@dataclass
class Clause:
    name: str  # MATCH, OPTIONAL MATCH, UNWIND, WITH, RETURN, CREATE, ..., CALL, CALL {}
    text: str  # the clause's own text (a subquery's: its body)
    body: list[Clause] = field(default_factory=list)  # CALL {}: the subquery's clauses


def _tokens(statement: str) -> list[tuple[str, int, int]]:
    """(upper-cased word or character, start, end) of each code token."""
    out = []
    for match in _TOKEN.finditer(statement):
        if match.lastgroup == "skip":
            continue
        out.append((match.group().upper(), match.start(), match.end()))
    return out


def _closing(tokens: list[tuple[str, int, int]], i: int) -> int:
    """Index of the token closing the bracket at `i`."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = []
    for j in range(i, len(tokens)):
        text = tokens[j][0]
        if text in pairs:
            stack.append(pairs[text])
        elif stack and text == stack[-1]:
            stack.pop()
            if not stack:
                return j
    raise ValueError(f"unbalanced {tokens[i][0]!r} at offset {tokens[i][1]}")


def clauses(statement: str) -> list[Clause]:
    """The clauses of `statement` in order (a `UNION` separates single queries)."""
    tokens = _tokens(statement)
    starts: list[tuple[str, int, int | None]] = []  # (name, token index, subquery's '{')
    i = 0
    while i < len(tokens):
        word = tokens[i][0]
        before = [t[0] for t in tokens[max(0, i - 2) : i]]
        if word in "([{":
            if word == "{" and starts and starts[-1][0] == "CALL" and starts[-1][1] == i - 1:
                starts[-1] = ("CALL {}", starts[-1][1], i)
            i = _closing(tokens, i) + 1
            continue
        clause = word in _CLAUSE_WORDS
        if word in {"CREATE", "MATCH"} and before[-1:] == ["ON"]:
            clause = False  # MERGE's ON CREATE / ON MATCH
        if word == "SET" and before in (["ON", "CREATE"], ["ON", "MATCH"]):
            clause = False
        if word == "WITH" and before[-1:] in (["STARTS"], ["ENDS"]):
            clause = False
        if word == "MATCH" and before[-1:] == ["OPTIONAL"]:
            clause = False
        if word == "DELETE" and before[-1:] == ["DETACH"]:
            clause = False
        if word == "DETACH":
            word, clause = "DELETE", True
        if word == "OPTIONAL":
            word = "OPTIONAL MATCH"
        if clause:
            starts.append((word, i, None))
        i += 1
    out = []
    for n, (name, at, brace) in enumerate(starts):
        end = tokens[starts[n + 1][1]][1] if n + 1 < len(starts) else len(statement)
        if brace is not None:
            close = _closing(tokens, brace)
            body = statement[tokens[brace][2] : tokens[close][1]]
            out.append(Clause(name, body, clauses(body)))
        else:
            out.append(Clause(name, statement[tokens[at][1] : end].strip()))
    return out


def problems(statement: str) -> list[str]:
    """What Memgraph's parser would refuse in `statement` (empty: nothing)."""
    return _query_problems(clauses(statement))[0]


def _query_problems(query: list[Clause]) -> tuple[list[str], bool]:
    """Each single query of a UNION on its own; whether any of them updates."""
    singles: list[list[Clause]] = [[]]
    for clause in query:
        if clause.name == "UNION":
            singles.append([])
        else:
            singles[-1].append(clause)
    found: list[str] = []
    updates = False
    for single in singles:
        inner, writes = _single_problems(single)
        found += inner
        updates |= writes
    return found, updates


def _single_problems(query: list[Clause]) -> tuple[list[str], bool]:
    """(problems, whether the query updates: its last part itself, or any subquery), as the
    visitor's `has_update || subquery_has_update`."""
    found: list[str] = []
    has_update = has_return = has_optional = subquery_update = False
    for clause in query:
        name = clause.name
        if name in {"CALL", "CALL {}"}:
            if has_return:
                found.append(f"{name} after RETURN")
            if name == "CALL {}":
                inner, updates = _query_problems(clause.body)
                found += [f"in CALL {{}}: {p}" for p in inner]
                if re.search(r"\bQUERY\s+MEMORY\b", clause.text, re.IGNORECASE):
                    found.append("in CALL {}: a memory limit inside a subquery")
                subquery_update |= updates
        elif name == "UNWIND":
            if has_update or has_return:
                found.append("UNWIND after an update or RETURN")
        elif name in {"MATCH", "OPTIONAL MATCH"}:
            if has_update or has_return:
                found.append(f"{name} after an update or RETURN")
            if name == "OPTIONAL MATCH":
                has_optional = True
            elif has_optional:
                found.append("MATCH after OPTIONAL MATCH")
        elif name in UPDATES:
            if has_return:
                found.append(f"{name} after RETURN")
            has_update = True
        elif name == "RETURN":
            if has_return:
                found.append("a second RETURN")
            has_return = True
        elif name == "WITH":
            if has_return:
                found.append("WITH after RETURN")
            has_update = has_return = has_optional = False
    standalone_call = len(query) == 1 and query[0].name == "CALL"
    if not (has_update or subquery_update or has_return or standalone_call):
        found.append("neither an update nor a RETURN")
    return found, has_update or subquery_update
