"""Read-only guard for Cypher written by a retrieval agent.

One half of "read-only, enforced twice" (issue 5). The other half, running the query in a read
transaction, does not hold on its own: ArcadeDB's Bolt server ignores the access mode
(DESIGN.md section 5). So this guard is what keeps the graph under test unchanged.

It is a scanner, not a parser. It lexes just enough Cypher to tell code apart from string
literals, comments and backtick-quoted names, then refuses anything that is not plainly a read:

- write and admin keywords anywhere in code, in any letter case (CREATE, MERGE, SET, DELETE,
  DETACH, REMOVE, DROP, LOAD, FOREACH, ... see `FORBIDDEN_KEYWORDS`). The same words inside a
  string literal, a comment or backticks are data or names and are allowed;
- `CALL procedure` unless the procedure is on an allow-list (`DEFAULT_ALLOWED_PROCEDURES`).
  `CALL { ... }` and `CALL (x) { ... }` subqueries are fine: their bodies are scanned like the
  rest of the query;
- namespaced function calls outside the built-in temporal, spatial and vector namespaces:
  APOC-style functions (`apoc.cypher.runFirstColumn`, ...) run a query held in a string, which
  this guard deliberately does not look into. Plain functions (`toLower`, `size`) are fine;
- more than one statement (one trailing `;` is fine), and statements that do not start like a
  query (MATCH, OPTIONAL MATCH, WITH, UNWIND, RETURN, CALL, optionally after EXPLAIN/PROFILE).
  This catches the admin commands of both servers (SHOW, ANALYZE GRAPH, STORAGE MODE, BEGIN...)
  without listing them all;
- text it cannot read the way the servers read it: unterminated strings, names or comments,
  nested block comments, non-ASCII characters in code (fullwidth or homoglyph letters and
  Unicode spaces could hide a keyword from us but not from the server), line breaks inside a
  `//` comment that the servers disagree on, NUL characters, backslashes in backtick names.

Comments are read twice, once as a space (what the servers do) and once as nothing (what a tool
that strips comments before parsing would do); a query must pass both readings. So
`DE/**/TACH` is rejected even though the servers see two harmless words.

When in doubt it rejects: a false rejection costs the agent one step (the reason is written for
it to read), a false acceptance silently corrupts the graph under test.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

__all__ = [
    "DEFAULT_ALLOWED_FUNCTION_NAMESPACES",
    "DEFAULT_ALLOWED_PROCEDURES",
    "FORBIDDEN_KEYWORDS",
    "WriteRejected",
    "check_read_only",
    "is_read_only",
]


class WriteRejected(Exception):
    """The guard refused a query; `reason` says why, in words meant for the agent."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Procedures a retrieval agent may CALL (compared case-insensitively: ArcadeDB resolves
# procedure names without regard to case). Extend per call with `allowed_procedures=`.
DEFAULT_ALLOWED_PROCEDURES = frozenset(
    {
        # Full-text search, ArcadeDB (and Neo4j) dialect.
        "db.index.fulltext.queryNodes",
        "db.index.fulltext.queryRelationships",
        # Full-text search, Memgraph dialect.
        "text_search.search",
        "text_search.search_all",
        "text_search.regex_search",
        # Schema introspection.
        "db.labels",
        "db.relationshipTypes",
        "db.propertyKeys",
    }
)

# Namespaces whose functions may be called as `ns.fn(...)`: Cypher's own temporal, spatial and
# vector functions (date.truncate, duration.between, point.distance, vector.similarity.cosine).
DEFAULT_ALLOWED_FUNCTION_NAMESPACES = frozenset(
    {"date", "datetime", "localdatetime", "localtime", "time", "duration", "point", "vector"}
)

# Words that are never part of a read query, with the reason the agent is told. Checked on
# every unquoted word, wherever it sits: `n.set` or a label `:Delete` is rejected too (write
# such names in backticks), because telling a property key from a clause needs a real parser.
FORBIDDEN_KEYWORDS = {
    "CREATE": "it creates nodes, relationships, indexes or constraints",
    "MERGE": "it creates nodes or relationships that do not exist",
    "SET": "it writes properties, labels or settings",
    "DELETE": "it deletes nodes or relationships",
    "DETACH": "DETACH DELETE deletes nodes and their relationships",
    "NODETACH": "NODETACH DELETE deletes nodes",
    "REMOVE": "it removes properties or labels",
    "DROP": "it drops indexes, constraints or data",
    "LOAD": "LOAD CSV imports data",
    "FOREACH": "FOREACH exists to run updating clauses",
    "INSERT": "INSERT is GQL's CREATE",
    "ALTER": "it is an administration command",
    "RENAME": "it is an administration command",
    "GRANT": "it is an administration command",
    "REVOKE": "it is an administration command",
    "DENY": "it is an administration command",
    "TERMINATE": "it is an administration command",
    "SHOW": "SHOW commands are administration; the schema description has what you need",
    "USE": "switching databases is not allowed",
    "TRANSACTIONS": "CALL { ... } IN TRANSACTIONS commits in batches",
    "PERIODIC": "USING PERIODIC COMMIT commits in batches",
}

# Procedure name prefixes known to write or administer. Only used to explain a rejection:
# the allow-list alone decides.
_KNOWN_WRITING_PROCEDURES = (
    "apoc.create.",
    "apoc.merge.",
    "apoc.refactor.",
    "apoc.periodic.",
    "apoc.cypher.",
    "apoc.do.",
    "apoc.schema.",
    "apoc.trigger.",
    "apoc.nodes.",
    "apoc.load.",
    "apoc.import.",
    "apoc.export.",
    "apoc.atomic.",
    "apoc.lock.",
    "dbms.",
    "mg.",
    "gds.",
    "periodic.",
    "merge.",
    "create.",
    "do.",
    "refactor.",
    "schema.",
    "import_util.",
    "export_util.",
    "migrate.",
)

_QUERY_STARTS = frozenset({"MATCH", "OPTIONAL", "WITH", "UNWIND", "RETURN", "CALL"})
_QUERY_PREFIXES = frozenset({"EXPLAIN", "PROFILE"})

# The only characters allowed in code (outside strings, comments and backtick names). Anything
# else is either invalid Cypher or a Unicode look-alike we must not guess about.
_CODE_CHARS = frozenset(
    string.ascii_letters + string.digits + "_ \t\r\n" + "()[]{}<>=!+-*/%^.,:;|&?$~"
)

# Characters that some lexers take as a line break and others do not. Inside a `//` comment
# they decide where code resumes, so the guard could end up reading different code than the
# server: refuse them there.
_AMBIGUOUS_BREAKS = frozenset("\x0b\x0c\x1c\x1d\x1e\x1f\x85\u2028\u2029")

# Placeholders for quoted things in the masked code; control characters cannot occur in code.
_STRING = "\x01"
_NAME = "\x02"

_TOKEN = re.compile(r"[ \t\r\n]+|[A-Za-z_][A-Za-z0-9_]*|[0-9]+|.", re.DOTALL)
_LINE_COMMENT_BODY = re.compile(r"[^\r\n]*")


def check_read_only(
    query: str,
    *,
    allowed_procedures: Iterable[str] = DEFAULT_ALLOWED_PROCEDURES,
    allowed_function_namespaces: Iterable[str] = DEFAULT_ALLOWED_FUNCTION_NAMESPACES,
) -> None:
    """Return if `query` is plainly a single read query, else raise `WriteRejected`.

    `allowed_procedures` are the procedure names `CALL` may name (case-insensitive);
    `allowed_function_namespaces` the roots `ns` of the `ns.fn(...)` calls allowed.
    """
    if not isinstance(query, str):
        raise WriteRejected(f"a query must be a string, not {type(query).__name__}")
    if "\x00" in query:
        raise WriteRejected("the query contains a NUL character")
    # Lower-cased for the comparison, as written for the messages.
    procedures = {name.lower(): name for name in allowed_procedures}
    namespaces = frozenset(name.lower() for name in allowed_function_namespaces)

    spaced, glued = _mask(query)
    _check_code(_tokens(spaced), procedures, namespaces)
    if glued == spaced:
        return  # no comments: one reading
    try:
        _check_code(_tokens(glued), procedures, namespaces)
    except WriteRejected as rejected:
        raise WriteRejected(
            f"{rejected.reason} (reading the comments as nothing; do not put comments inside words)"
        ) from None


def is_read_only(
    query: str,
    *,
    allowed_procedures: Iterable[str] = DEFAULT_ALLOWED_PROCEDURES,
    allowed_function_namespaces: Iterable[str] = DEFAULT_ALLOWED_FUNCTION_NAMESPACES,
) -> bool:
    """True when `check_read_only` accepts `query`."""
    try:
        check_read_only(
            query,
            allowed_procedures=allowed_procedures,
            allowed_function_namespaces=allowed_function_namespaces,
        )
    except WriteRejected:
        return False
    return True


# --- lexing -------------------------------------------------------------------------------


def _mask(query: str) -> tuple[str, str]:
    """The code of `query`, with each string literal and backtick name replaced by a placeholder.

    Returned twice: with every comment read as a space, and with every comment read as nothing.
    The rules follow the Cypher lexers of both servers (Cypher 25 grammar in ArcadeDB, openCypher
    plus a hand-written pre-lexer in Memgraph); where they differ, the text is refused.
    """
    spaced: list[str] = []
    glued: list[str] = []
    i, n = 0, len(query)
    while i < n:
        char = query[i]
        if char in "'\"":
            i = _end_of_string(query, i)
            spaced.append(_STRING)
            glued.append(_STRING)
        elif char == "`":
            i = _end_of_name(query, i)
            spaced.append(_NAME)
            glued.append(_NAME)
        elif query.startswith("//", i):
            i = _end_of_line_comment(query, i)
            spaced.append(" ")
        elif query.startswith("/*", i):
            i = _end_of_block_comment(query, i)
            spaced.append(" ")
        else:
            if char not in _CODE_CHARS:
                raise WriteRejected(_describe_bad_char(char, i))
            spaced.append(char)
            glued.append(char)
            i += 1
    return "".join(spaced), "".join(glued)


def _end_of_string(query: str, start: int) -> int:
    # A backslash escapes whatever follows it (the Cypher 25 lexer accepts any character there),
    # so `'it\'s'` is one literal and `'a\\'` ends at its second quote.
    quote = query[start]
    i = start + 1
    while i < len(query):
        char = query[i]
        if char == "\\":
            i += 2
        elif char == quote:
            return i + 1
        else:
            i += 1
    raise WriteRejected(f"unterminated string literal starting at offset {start}")


def _end_of_name(query: str, start: int) -> int:
    # A doubled backtick inside a name reads as two adjacent names here, which covers the same
    # text as the servers' single name, so nothing can hide in between.
    end = query.find("`", start + 1)
    if end < 0:
        raise WriteRejected(f"unterminated backtick-quoted name starting at offset {start}")
    if "\\" in query[start + 1 : end]:
        # Backslashes are literal in backtick names, but a lexer that took them as escapes
        # would end the name elsewhere. Names never need them.
        raise WriteRejected(f"backslash inside the backtick-quoted name at offset {start}")
    return end + 1


def _end_of_line_comment(query: str, start: int) -> int:
    end = _LINE_COMMENT_BODY.match(query, start).end()
    odd = _AMBIGUOUS_BREAKS.intersection(query[start:end])
    if odd:
        code = ", ".join(f"U+{ord(c):04X}" for c in sorted(odd))
        raise WriteRejected(
            f"the // comment at offset {start} contains {code},"
            " which some lexers read as a line break"
        )
    if end < len(query) and query[end] == "\r" and query[end + 1 : end + 2] != "\n":
        # Memgraph ends a // comment only at \n or \r\n; a lone \r ends it in Cypher 25.
        raise WriteRejected(f"the // comment at offset {start} ends with a lone carriage return")
    return end  # the line break itself is whitespace in code


def _end_of_block_comment(query: str, start: int) -> int:
    end = query.find("*/", start + 2)
    if end < 0:
        raise WriteRejected(f"unterminated /* comment starting at offset {start}")
    if "/*" in query[start + 2 : end]:
        # Cypher block comments do not nest; a reader that thought they did would see code
        # where we see comment.
        raise WriteRejected(f"nested /* inside the comment starting at offset {start}")
    return end + 2


def _describe_bad_char(char: str, offset: int) -> str:
    if ord(char) > 127:
        return (
            f"non-ASCII character U+{ord(char):04X} at offset {offset} outside a string, comment"
            " or backtick name (keywords are ASCII; a look-alike letter or space could hide one)"
        )
    return f"unexpected character {char!r} at offset {offset}"


def _tokens(masked: str) -> list[str]:
    """Split masked code into words, numbers, placeholders and single punctuation characters.

    Digits and letters are split apart (`1CREATE` gives `1`, `CREATE`): Memgraph's pre-lexer
    splits them the same way, so the word must be checked.
    """
    return [t for t in _TOKEN.findall(masked) if not t.isspace()]


# --- checks --------------------------------------------------------------------------------


def _is_word(token: str) -> bool:
    return token[0].isalpha() or token[0] == "_"


def _check_code(tokens: list[str], procedures: dict[str, str], namespaces: frozenset[str]) -> None:
    for i, token in enumerate(tokens):
        if not _is_word(token):
            continue
        word = token.upper()
        if word in FORBIDDEN_KEYWORDS:
            raise WriteRejected(
                f"{word} is not allowed in a read-only query: {FORBIDDEN_KEYWORDS[word]}"
            )
        previous = tokens[i - 1] if i > 0 else ""
        if word == "CALL":
            _check_call(tokens, i, procedures)
        elif previous not in (".", "$") and previous.upper() != "CALL":
            _check_function_call(tokens, i, namespaces)

    if ";" in tokens[:-1]:
        raise WriteRejected("only one statement is allowed (a ';' separates two statements)")
    statement = tokens[:-1] if tokens and tokens[-1] == ";" else tokens
    if not statement:
        raise WriteRejected("the query is empty")
    first = 1 if statement[0].upper() in _QUERY_PREFIXES else 0
    if first >= len(statement) or statement[first].upper() not in _QUERY_STARTS:
        raise WriteRejected(
            "a read query must start with MATCH, OPTIONAL MATCH, WITH, UNWIND, RETURN or CALL"
        )


def _dotted_name(tokens: list[str], start: int) -> tuple[str, int]:
    """The name `a.b.c` starting at `tokens[start]`, and the index just after it."""
    parts = [tokens[start]]
    i = start + 1
    while i + 1 < len(tokens) and tokens[i] == "." and _is_word(tokens[i + 1]):
        parts.append(tokens[i + 1])
        i += 2
    return ".".join(parts), i


def _check_call(tokens: list[str], i: int, procedures: dict[str, str]) -> None:
    following = tokens[i + 1] if i + 1 < len(tokens) else ""
    if following in ("{", "("):
        return  # a subquery, CALL { ... } or CALL (x) { ... }: its body is scanned as usual
    if following == _NAME:
        raise WriteRejected("procedure names must not be backtick-quoted")
    if not following or not _is_word(following):
        raise WriteRejected("CALL must be followed by a procedure name or a { subquery }")
    name, end = _dotted_name(tokens, i + 1)
    if end + 1 < len(tokens) and tokens[end] == "." and tokens[end + 1] == _NAME:
        raise WriteRejected("procedure names must not be backtick-quoted")
    if name.lower() in procedures:
        return
    if name.lower().startswith(_KNOWN_WRITING_PROCEDURES):
        why = "it writes or administers the database"
    elif procedures:
        why = "only these read procedures may be called: " + ", ".join(sorted(procedures.values()))
    else:
        why = "no procedure may be called"
    raise WriteRejected(f"procedure {name} is not allowed: {why}")


def _check_function_call(tokens: list[str], i: int, namespaces: frozenset[str]) -> None:
    name, end = _dotted_name(tokens, i)
    if "." not in name or end >= len(tokens) or tokens[end] != "(":
        return  # a variable, a property access or a plain built-in function
    if name.split(".", 1)[0].lower() in namespaces:
        return
    raise WriteRejected(
        f"function {name}() is not allowed: namespaced functions may run a query given as a"
        " string; only built-in functions and " + ", ".join(sorted(namespaces)) + ".* may be used"
    )
