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
- namespaced function calls not on an allow-list of exact names (`DEFAULT_ALLOWED_FUNCTIONS`:
  Cypher's own temporal, spatial and vector functions). APOC-style functions
  (`apoc.cypher.runFirstColumn`, ...) run a query held in a string, which this guard
  deliberately does not look into, and a namespace is no promise: ArcadeDB's `vector.*` holds
  dozens of SQL functions besides Cypher's two. Plain functions (`toLower`, `size`) are fine;
- any call whose last name part is `eval` (`eval(...)`, `date.eval(...)`, `$x.eval(...)`):
  ArcadeDB's Cypher reaches its SQL functions (`sql.eval('1 = 1')` runs on 26.10), and SQL's
  `eval()` parses a string and evaluates it; other servers or versions may expose it under
  another name. Calls hanging off a parameter or an expression (`$f(...)`, `'a'.f(...)`) too;
- called names are read the way the servers read them: parts may be backtick-quoted (a doubled
  backtick is a backtick), separated by dots, whitespace and comments, and are unquoted and
  joined before the allow-lists are asked. A called name written with backticks is then refused
  even when allowed: the servers need not agree on whether a dot inside backticks separates
  parts, and no read needs the quotes;
- more than one statement (one trailing `;` is fine), and statements that do not start like a
  query (MATCH, OPTIONAL MATCH, WITH, UNWIND, RETURN, CALL, optionally after EXPLAIN/PROFILE).
  This catches the admin commands of both servers (SHOW, ANALYZE GRAPH, STORAGE MODE, BEGIN...)
  without listing them all;
- statements that would keep the server's parser busy past any timeout (`MAX_STATEMENT_CHARS`,
  `MAX_NESTING`, `MAX_CASE_EXPRESSIONS`): a server cannot stop a statement it is still parsing
  (ArcadeDB lists it, and so can terminate it, only once parsed), so its size is bounded here;
- text it cannot read the way the servers read it: unterminated strings, names or comments,
  nested block comments, non-ASCII characters in code (fullwidth or homoglyph letters and
  Unicode spaces could hide a keyword from us but not from the server), line breaks inside a
  `//` comment that the servers disagree on, NUL characters, backslashes in backtick names,
  and numbers run into letters or underscores (`LIMIT 0x1SET`, `1_0MERGE`, `1e0SET`): lexers
  split such text differently (`1_0MERGE` is `1_0` and `MERGE` where numbers take digit
  separators, `1` and `_0MERGE` where they do not; ArcadeDB 26.10 refuses these forms), so it
  is never read past.

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
from dataclasses import dataclass

__all__ = [
    "DEFAULT_ALLOWED_FUNCTIONS",
    "DEFAULT_ALLOWED_PROCEDURES",
    "FORBIDDEN_KEYWORDS",
    "MAX_CASE_EXPRESSIONS",
    "MAX_NESTING",
    "MAX_STATEMENT_CHARS",
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

# Namespaced functions that may be called as `ns.fn(...)`, by exact name (compared
# case-insensitively, as the servers resolve function names): Cypher's own temporal, spatial and
# vector functions. Exact, not by namespace: ArcadeDB's `vector.` namespace also holds dozens of
# SQL functions (`vector.neighbors`, ...), and whatever a server adds under `date.` tomorrow is
# not read by anyone here today. Extend per call with `allowed_functions=`.
DEFAULT_ALLOWED_FUNCTIONS = frozenset(
    {
        *(
            f"{kind}.{fn}"
            for kind in ("date", "datetime", "localdatetime", "localtime", "time")
            for fn in ("truncate", "realtime", "statement", "transaction")
        ),
        "datetime.fromepoch",
        "datetime.fromepochmillis",
        "duration.between",
        "duration.inMonths",
        "duration.inDays",
        "duration.inSeconds",
        "point.distance",
        "point.withinBBox",
        "vector.similarity.cosine",
        "vector.similarity.euclidean",
    }
)

# What dense retrieval's own reads call (`retrieve/dense.py`), allowed for its reader only:
# the vector index searches (ArcadeDB's Neo4j-style procedure; Memgraph's
# `vector_search.search`, query_modules/vector_search_module.cpp @ v3.10.1) and Memgraph's
# exact cosine function of the same module. All read-only; the agent's lists stay as they are.
VECTOR_PROCEDURES = frozenset({"db.index.vector.queryNodes", "vector_search.search"})
VECTOR_FUNCTIONS = frozenset({"vector.similarity.cosine", "vector_search.cosine_similarity"})

# The last part of a called name that is refused whatever comes before it: ArcadeDB's Cypher
# reaches its SQL functions (`sql.eval(...)`), and SQL's eval() parses and evaluates a string.
_EVAL = "eval"

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

# What one read may ask a server to parse (issue 28). Parsing cannot be stopped: ArcadeDB
# 26.10.2 lists a statement (`list queries`, hence `terminate query`) only once it is parsed, and
# its command timeout starts then too, so a statement that parses for minutes pins a core for
# minutes whatever our timeout says. Measured on the embedded server (2 shared cores, load 3-6;
# fresh text each time, so no plan cache; `eval_pipeline_tests/retrieve/test_pinning_reads.py`):
# - CASE nested in THEN is the costly shape, about cubic in depth: depth 8 0.05 s, 16 0.2-0.3 s,
#   24 0.4-0.7 s (2.6 s on a JVM just started), 32 0.5-0.7 s, 48 1.4-2 s, 64 4-6 s, 90 about
#   3 s before it was even listed; and additive: 10 nests of depth 24 in one statement 4.4 s,
#   20 of depth 16 6.2 s, 60 of depth 8 3.7 s. So the bound is on CASE expressions per
#   statement, nested or not: 24 keep the worst shape (one nest of 24) under a second warm and
#   a few seconds cold, inside a read's 10 s. Nested in WHEN or ELSE, or in parentheses,
#   CASE parses in linear time (depth 150: 0.15 s);
# - brackets are cheap (64 deep, any kind: under 0.1 s); 24 levels is far more than a read
#   needs and keeps both servers' recursive parsers and planners shallow;
# - size: a flat 16,000-character list 1.2 s, 18,000 characters of 24-deep brackets 3.7 s;
#   20,000 characters keep any statement within the bounds above well under a read timeout
#   (10 s). ArcadeDB already refuses a run of more than ~250 chained operators itself.
MAX_STATEMENT_CHARS = 20_000
MAX_NESTING = 24
MAX_CASE_EXPRESSIONS = 24

_OPENERS = frozenset("([{")
_CLOSERS = frozenset(")]}")

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
# As a token, a backtick name is `_NAME` followed by the name it spells (unquoted).
_STRING = "\x01"
_NAME = "\x02"

_TOKEN = re.compile(
    r"[ \t\r\n]+"
    r"|[A-Za-z_][A-Za-z0-9_]*"
    # Anything that starts like a number runs on through letters, digits, underscores, a dot
    # before a digit and an exponent's sign, so `0x1SET` is one token (then refused), not `0`
    # and a harmless-looking word `x1SET`.
    r"|(?:[0-9]|\.[0-9])(?:[A-Za-z0-9_]|\.(?=[0-9])|(?<=[eE])[+-](?=[0-9]))*"
    r"|.",
    re.DOTALL,
)
# Numbers every Cypher lexer reads the same way, as one number. Underscores (Cypher 25 digit
# separators, an identifier's start to Memgraph) and anything glued on are not among them.
_PLAIN_NUMBER = re.compile(
    r"0x[0-9A-Fa-f]+|0o[0-7]+|(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
)
_LINE_COMMENT_BODY = re.compile(r"[^\r\n]*")


def check_read_only(
    query: str,
    *,
    allowed_procedures: Iterable[str] = DEFAULT_ALLOWED_PROCEDURES,
    allowed_functions: Iterable[str] = DEFAULT_ALLOWED_FUNCTIONS,
) -> None:
    """Return if `query` is plainly a single read query, else raise `WriteRejected`.

    `allowed_procedures` are the procedure names `CALL` may name, `allowed_functions` the
    namespaced functions `ns.fn(...)` that may be called: exact names, case-insensitive.
    """
    if not isinstance(query, str):
        raise WriteRejected(f"a query must be a string, not {type(query).__name__}")
    if "\x00" in query:
        raise WriteRejected("the query contains a NUL character")
    if len(query) > MAX_STATEMENT_CHARS:
        raise WriteRejected(
            f"the query is {len(query):,} characters long; at most {MAX_STATEMENT_CHARS:,} are"
            " allowed (ask for less at a time, or pass long values as parameters)"
        )
    # Lower-cased for the comparison, as written for the messages.
    allowed = _Allowed(
        procedures={name.lower(): name for name in allowed_procedures},
        functions={name.lower(): name for name in allowed_functions},
    )

    spaced, glued, names = _mask(query)
    _check_code(_tokens(spaced, names), allowed)
    if glued == spaced:
        return  # no comments: one reading
    try:
        _check_code(_tokens(glued, names), allowed)
    except WriteRejected as rejected:
        raise WriteRejected(
            f"{rejected.reason} (reading the comments as nothing; do not put comments inside words)"
        ) from None


def is_read_only(
    query: str,
    *,
    allowed_procedures: Iterable[str] = DEFAULT_ALLOWED_PROCEDURES,
    allowed_functions: Iterable[str] = DEFAULT_ALLOWED_FUNCTIONS,
) -> bool:
    """True when `check_read_only` accepts `query`."""
    try:
        check_read_only(
            query,
            allowed_procedures=allowed_procedures,
            allowed_functions=allowed_functions,
        )
    except WriteRejected:
        return False
    return True


# --- lexing -------------------------------------------------------------------------------


def _mask(query: str) -> tuple[str, str, list[str]]:
    """The code of `query`, with each string literal and backtick name replaced by a placeholder.

    Returned twice: with every comment read as a space, and with every comment read as nothing;
    then the unquoted backtick names, in order (both readings hold the same names).
    The rules follow the Cypher lexers of both servers (Cypher 25 grammar in ArcadeDB, openCypher
    plus a hand-written pre-lexer in Memgraph); where they differ, the text is refused.
    """
    spaced: list[str] = []
    glued: list[str] = []
    names: list[str] = []
    i, n = 0, len(query)
    while i < n:
        char = query[i]
        if char in "'\"":
            i = _end_of_string(query, i)
            spaced.append(_STRING)
            glued.append(_STRING)
        elif char == "`":
            i, name = _end_of_name(query, i)
            names.append(name)
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
    return "".join(spaced), "".join(glued), names


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


def _end_of_name(query: str, start: int) -> tuple[int, str]:
    """The end of the backtick name at `start`, and the name it spells.

    As in both servers' grammars (`('`' ~[`]* '`')+`), a backtick right after the closing one
    continues the name with a literal backtick: `` `a``b` `` is the one name a`b.
    """
    end = start
    while True:
        close = query.find("`", end + 1)
        if close < 0:
            raise WriteRejected(f"unterminated backtick-quoted name starting at offset {start}")
        end = close
        if query[end + 1 : end + 2] != "`":
            break
        end += 1  # a doubled backtick: look for the closing one after it
    if "\\" in query[start + 1 : end]:
        # Backslashes are literal in backtick names, but a lexer that took them as escapes
        # would end the name elsewhere. Names never need them.
        raise WriteRejected(f"backslash inside the backtick-quoted name at offset {start}")
    return end + 1, query[start + 1 : end].replace("``", "`")


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


def _tokens(masked: str, names: list[str]) -> list[str]:
    """Split masked code into words, numbers, strings, names and single punctuation characters.

    A name comes back as the placeholder followed by the name it spells. A number is whatever
    starts like one and runs on through letters and digits (`1CREATE` is one token): such a token
    is refused unless it is a plain number, so a word glued to a number is never looked past.
    """
    tokens = [t for t in _TOKEN.findall(masked) if not t.isspace()]
    spelled = iter(names)
    return [_NAME + next(spelled) if t == _NAME else t for t in tokens]


# --- checks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Allowed:
    """The allow-lists of one check, keyed by lower-cased name (values as written)."""

    procedures: dict[str, str]
    functions: dict[str, str]


@dataclass(frozen=True)
class _CalledName:
    """A procedure or function name as the servers read it: parts unquoted, joined by dots."""

    name: str
    quoted: bool  # some part was written in backticks
    start: int  # index of its first token
    end: int  # index just after its last token

    @property
    def last_part(self) -> str:
        return self.name.rsplit(".", 1)[-1]


def _is_word(token: str) -> bool:
    return token[0].isalpha() or token[0] == "_"


def _is_name_part(token: str) -> bool:
    return _is_word(token) or token[0] == _NAME


def _is_number(token: str) -> bool:
    return token[0].isdigit() or (token[0] == "." and len(token) > 1)


def _check_code(tokens: list[str], allowed: _Allowed) -> None:
    _check_shape(tokens)
    for i, token in enumerate(tokens):
        if _is_word(token):
            word = token.upper()
            if word in FORBIDDEN_KEYWORDS:
                raise WriteRejected(
                    f"{word} is not allowed in a read-only query: {FORBIDDEN_KEYWORDS[word]}"
                )
            if word == "CALL":
                _check_call(tokens, i, allowed)
        elif _is_number(token):
            _check_number(token)
        elif token == "(":
            _check_function_call(tokens, i, allowed)

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


def _check_shape(tokens: list[str]) -> None:
    """Refuse nesting and CASE counts past the bounds (`MAX_NESTING`, `MAX_CASE_EXPRESSIONS`).
    Only code counts: brackets and CASE in strings, comments and backtick names are data."""
    depth = cases = 0
    for token in tokens:
        if token in _OPENERS:
            depth += 1
            if depth > MAX_NESTING:
                raise WriteRejected(
                    f"the query nests brackets more than {MAX_NESTING} deep; write it flatter"
                    " (WITH clauses can carry intermediate values)"
                )
        elif token in _CLOSERS:
            depth -= 1
        elif _is_word(token) and token.upper() == "CASE":
            cases += 1
            if cases > MAX_CASE_EXPRESSIONS:
                raise WriteRejected(
                    f"the query has more than {MAX_CASE_EXPRESSIONS} CASE expressions, which"
                    " servers take very long to parse; compute in steps with WITH, or use"
                    " coalesce() or a map lookup"
                )


def _check_number(token: str) -> None:
    if _PLAIN_NUMBER.fullmatch(token):
        return
    raise WriteRejected(
        f"{token} is not a plain number: a number run into letters or underscores"
        " (0x1SET, 1_0MERGE, 1e0SET) is split differently by different Cypher parsers;"
        " put a space after a number and write it without underscores"
    )


def _name_after(tokens: list[str], start: int) -> _CalledName:
    """The called name whose first part is `tokens[start]`: parts joined by `.` tokens."""
    parts = [tokens[start]]
    i = start + 1
    while i + 1 < len(tokens) and tokens[i] == "." and _is_name_part(tokens[i + 1]):
        parts.append(tokens[i + 1])
        i += 2
    return _called_name(parts, start, i)


def _name_before(tokens: list[str], end: int) -> _CalledName:
    """The called name whose last part is `tokens[end - 1]`."""
    start = end - 1
    while start >= 2 and tokens[start - 1] == "." and _is_name_part(tokens[start - 2]):
        start -= 2
    return _called_name(tokens[start:end:2], start, end)


def _called_name(parts: list[str], start: int, end: int) -> _CalledName:
    quoted = any(part[0] == _NAME for part in parts)
    name = ".".join(part[1:] if part[0] == _NAME else part for part in parts)
    return _CalledName(name=name, quoted=quoted, start=start, end=end)


def _check_call(tokens: list[str], i: int, allowed: _Allowed) -> None:
    following = tokens[i + 1] if i + 1 < len(tokens) else ""
    if following in ("{", "("):
        return  # a subquery, CALL { ... } or CALL (x) { ... }: its body is scanned as usual
    if not following or not _is_name_part(following):
        raise WriteRejected("CALL must be followed by a procedure name or a { subquery }")
    called = _name_after(tokens, i + 1)
    name = called.name
    if name.lower() not in allowed.procedures:
        if name.lower().startswith(_KNOWN_WRITING_PROCEDURES):
            why = "it writes or administers the database"
        elif allowed.procedures:
            listed = sorted(allowed.procedures.values())
            why = "only these read procedures may be called: " + ", ".join(listed)
        else:
            why = "no procedure may be called"
        raise WriteRejected(f"procedure {name} is not allowed: {why}")
    if called.quoted:
        raise WriteRejected(
            f"procedure names must not be backtick-quoted: write {name} without backticks"
        )
    after = tokens[called.end] if called.end < len(tokens) else ""
    if after not in ("(", ";", "") and after.upper() != "YIELD":
        raise WriteRejected(
            f"procedure {name} must be followed by its arguments in parentheses or by YIELD"
        )


def _check_function_call(tokens: list[str], paren: int, allowed: _Allowed) -> None:
    """Check the call, if any, that the `(` at `tokens[paren]` opens."""
    if paren == 0 or not _is_name_part(tokens[paren - 1]):
        return  # a pattern, a subexpression or an argument list of nothing named
    called = _name_before(tokens, paren)
    before = tokens[called.start - 1] if called.start > 0 else ""
    name = called.name
    if called.last_part.lower() == _EVAL:
        raise WriteRejected(f"{name}() is not allowed: eval() evaluates text as code on the server")
    if before == "$":
        raise WriteRejected(f"${name}() is not allowed: a parameter cannot be called")
    if before == ".":
        raise WriteRejected(
            f".{name}() is not allowed: only functions can be called, not methods of a value"
        )
    if before.upper() == "CALL":
        return  # a procedure: _check_call has read it
    if "." in name and name.lower() not in allowed.functions:
        listed = ", ".join(sorted(allowed.functions.values())) or "none"
        raise WriteRejected(
            f"function {name}() is not allowed: namespaced functions may run a query given as a"
            f" string; only built-in functions and these may be used: {listed}"
        )
    if called.quoted and before != ":":  # after a colon, a label: t:`Turn`(text) in USING INDEX
        raise WriteRejected(
            f"function names must not be backtick-quoted: write {name}() without backticks"
        )
