"""Tests for the read-only guard: adversarial statements one by one, then property-based fuzzing."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.retrieve.readonly_guard import (
    DEFAULT_ALLOWED_FUNCTIONS,
    DEFAULT_ALLOWED_PROCEDURES,
    FORBIDDEN_KEYWORDS,
    WriteRejected,
    check_read_only,
    is_read_only,
)
from eval_pipeline_tests.retrieve.adversarial_statements import (
    ALL_STATEMENTS,
    GAP_ACCEPTS,
    GAP_REJECTS,
    KEYWORD_PHRASES,
    LITERAL_TEMPLATES,
    MUST_ALLOW,
    MUST_REJECT,
    cypher_string,
)

# No example database on disk; no deadline, the guard is fast but CI machines are not.
FUZZ = settings(max_examples=400, deadline=None, database=None)


# --- the statement lists ------------------------------------------------------------------


def test_lists_are_large_distinct_and_disjoint():
    assert len(MUST_REJECT) + len(MUST_ALLOW) >= 300
    assert len(set(ALL_STATEMENTS)) == len(ALL_STATEMENTS)
    assert all(note for _, note in MUST_REJECT)


@pytest.mark.parametrize(
    ("statement", "note"), MUST_REJECT, ids=[f"reject-{i}" for i in range(len(MUST_REJECT))]
)
def test_must_reject(statement: str, note: str):
    with pytest.raises(WriteRejected) as caught:
        check_read_only(statement)
    assert caught.value.reason, note
    assert not is_read_only(statement), note


@pytest.mark.parametrize(
    "statement", MUST_ALLOW, ids=[f"allow-{i}" for i in range(len(MUST_ALLOW))]
)
def test_must_allow(statement: str):
    check_read_only(statement)
    assert is_read_only(statement)


# --- reasons name the offence --------------------------------------------------------------


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        ("cReAtE (n)", "CREATE"),
        ("MATCH (n) DETACH DELETE n", "DETACH"),
        ("MATCH (n) RETURN n UNION MATCH (m) DE/**/TACH", "DETACH"),
        ("CALL apoc.periodic.iterate('a', 'b', {})", "apoc.periodic.iterate"),
        ("CALL unknown.proc()", "unknown.proc"),
        ("RETURN apoc.cypher.runFirstColumnSingle('x')", "apoc.cypher.runFirstColumnSingle"),
        ("MATCH (n) RETURN n; MATCH (m) RETURN m", "one statement"),
        ("ＣＲＥＡＴＥ (n)", "U+FF23"),
        ("MATCH (n) WHERE n.x = 'open", "unterminated string"),
        ("SHOW INDEXES", "SHOW"),
        ("ANALYZE GRAPH", "must start with"),
    ],
)
def test_reason_names_the_offence(statement: str, named: str):
    with pytest.raises(WriteRejected, match=re.escape(named)):
        check_read_only(statement)


def test_writing_procedure_is_called_a_writer_unknown_one_lists_the_allowed():
    with pytest.raises(WriteRejected, match="writes or administers"):
        check_read_only("CALL apoc.create.node(['X'], {})")
    with pytest.raises(WriteRejected, match="db.index.fulltext.queryNodes"):
        check_read_only("CALL some.reader()")


def test_allowed_procedures_are_configurable():
    query = "CALL vector_search.search('idx', 5, [1.0]) YIELD node RETURN node"
    assert not is_read_only(query)
    extended = DEFAULT_ALLOWED_PROCEDURES | {"vector_search.search"}
    assert is_read_only(query, allowed_procedures=extended)
    # Tightening works too: nothing allowed means full-text search is refused.
    search = "CALL db.index.fulltext.queryNodes('Turn[text]', 'x') YIELD node RETURN node"
    assert not is_read_only(search, allowed_procedures=())


def test_allowed_functions_are_configurable_and_exact():
    query = "MATCH (t:Turn) RETURN apoc.text.join([t.text], ',')"
    assert not is_read_only(query)
    assert is_read_only(query, allowed_functions={"apoc.text.join"})
    assert is_read_only(query.replace("join", "JOIN"), allowed_functions={"apoc.text.join"})
    # Exact names: neither a longer name, nor one below it, nor the namespace passes.
    for other in ("apoc.text.joinAndDrop", "apoc.text.join.x", "apoc.text.split", "apoc.text"):
        assert not is_read_only(
            f"RETURN {other}(['a'], ',')", allowed_functions={"apoc.text.join"}
        ), other
    # Tightening works too: with none allowed, date.truncate is refused.
    truncate = "RETURN date.truncate('day', date('2023-05-30'))"
    assert is_read_only(truncate)
    assert not is_read_only(truncate, allowed_functions=())


def test_allow_lists_hold_exact_names_only():
    """What the allow-lists hold: full names of a namespace and a function, never a namespace
    alone (a name without a dot would be a plain function and need no listing)."""
    for name in DEFAULT_ALLOWED_PROCEDURES | DEFAULT_ALLOWED_FUNCTIONS:
        assert "." in name and not name.endswith(".") and "`" not in name, name
    for name in DEFAULT_ALLOWED_PROCEDURES:
        assert is_read_only(f"CALL {name}('x', 'y') YIELD node RETURN node"), name
        for longer in (name + "AndDrop", name + ".drop", name[:-1]):
            assert not is_read_only(f"CALL {longer}('x', 'y') YIELD node RETURN node"), longer
    for name in DEFAULT_ALLOWED_FUNCTIONS:
        assert is_read_only(f"RETURN {name}(1) AS x"), name
        for longer in (name + "AndDrop", name + ".drop", name[:-1], name + "X"):
            assert not is_read_only(f"RETURN {longer}(1) AS x"), longer


@pytest.mark.parametrize("value", [None, b"MATCH (n) RETURN n", 42])
def test_non_string_is_rejected_not_crashed(value):
    with pytest.raises(WriteRejected, match="string"):
        check_read_only(value)


# --- property-based -----------------------------------------------------------------------

_CASE_FLIPS = st.lists(st.booleans(), min_size=20, max_size=20)


def _recase(word: str, flips: list[bool]) -> str:
    return "".join(c.upper() if up else c.lower() for c, up in zip(word, flips, strict=False))


@FUZZ
@given(
    content=st.text(),
    template=st.sampled_from(LITERAL_TEMPLATES),
    quote=st.sampled_from(["'", '"']),
)
def test_any_string_literal_content_is_allowed(content: str, template: str, quote: str):
    """(a) Whatever a properly escaped literal holds, a read query around it stays a read."""
    check_read_only(template.replace("$LIT", cypher_string(content, quote)))


def _comment_safe(text: str) -> str:
    # Block comments may hold anything but their own delimiters (and NUL, refused everywhere).
    return text.replace("*/", "*_/").replace("/*", "/_*").replace("\x00", "")


@FUZZ
@given(content=st.text(), phrase=st.sampled_from(KEYWORD_PHRASES))
def test_any_block_comment_content_is_allowed(content: str, phrase: str):
    comment = _comment_safe(f"{phrase} {content}")
    check_read_only(f"MATCH (t:Turn) /* {comment} */ RETURN t LIMIT 1")


@FUZZ
@given(content=st.text().map(lambda s: s.replace("`", "").replace("\\", "").replace("\x00", "")))
def test_any_backtick_name_is_allowed(content: str):
    """Backtick-quoted names are names, whatever letters or keywords they hold."""
    check_read_only(f"MATCH (t:Turn) RETURN t.text AS `{content}` LIMIT 1")


# Read queries as code tokens; a keyword may be inserted between any two of them.
_READ_TOKENS = [
    ["MATCH", "(t:Turn)", "WHERE", "t.text", "CONTAINS", "'x'", "RETURN", "t", "LIMIT", "5"],
    ["MATCH", "(s:Session)-[:HAS_TURN]->(t:Turn)", "RETURN", "s.session_id,", "count(t)"],
    ["UNWIND", "[1, 2]", "AS", "x", "RETURN", "x", ";"],
    ["CALL", "db.index.fulltext.queryNodes('Turn[text]', $q)", "YIELD", "node", "RETURN", "node"],
    ["MATCH", "(t:Turn)", "CALL", "{", "WITH", "t", "RETURN", "t.text AS x", "}", "RETURN", "x"],
    ["MATCH", "(t:Turn)", "WHERE", "EXISTS", "{", "(t)-[:NEXT]->()", "}", "RETURN", "t"],
]
_SEPARATORS = st.sampled_from([" ", "\n", "\t", "\r\n", " /* c */ ", " // c\n", "/**/", "  "])


@FUZZ
@given(
    tokens=st.sampled_from(_READ_TOKENS),
    keyword=st.sampled_from(sorted(FORBIDDEN_KEYWORDS)),
    flips=_CASE_FLIPS,
    data=st.data(),
)
def test_a_write_keyword_anywhere_in_code_is_rejected(tokens, keyword, flips, data):
    """(b) Inserting a write/admin keyword as a token of its own, anywhere in code, rejects."""
    position = data.draw(st.integers(0, len(tokens)), label="position")
    words = [*tokens[:position], _recase(keyword, flips), *tokens[position:]]
    query = words[0]
    for word in words[1:]:
        query += data.draw(_SEPARATORS, label="separator") + word
    assert not is_read_only(query), query


@FUZZ
@given(
    tokens=st.sampled_from(_READ_TOKENS),
    procedure=st.sampled_from(
        [
            "apoc.create.node",
            "apoc.cypher.doIt",
            "apoc.periodic.iterate",
            "dbms.killQuery",
            "mg.load_all",
            "gds.pageRank.write",
            "periodic.iterate",
            "merge.node",
            "x.y",
        ]
    ),
    data=st.data(),
)
def test_a_call_of_an_unlisted_procedure_is_rejected(tokens, procedure, data):
    position = data.draw(st.integers(0, len(tokens)), label="position")
    words = [*tokens[:position], f"CALL {procedure}()", *tokens[position:]]
    assert not is_read_only(" ".join(words))


# Cypher-ish fragments, so random text often lexes far and sometimes passes.
_FRAGMENTS = st.sampled_from(
    [
        "'",
        '"',
        "`",
        "\\",
        "/*",
        "*/",
        "//",
        "/",
        "*",
        "\n",
        "\r",
        "\t",
        " ",
        ";",
        "(",
        ")",
        "{",
        "}",
        "[",
        "]",
        ".",
        ",",
        ":",
        "$",
        "MATCH",
        "RETURN",
        "CALL",
        "CREATE",
        "set",
        "DeLeTe",
        "WITH",
        "n",
        "t",
        "x1",
        "1",
        "db",
        "labels",
        "apoc",
        "date",
        "é",
        "ＣＲ",
        "\u2028",
        "\x00",
        "\x85",
        "#",
    ]
)
_CYPHERISH = st.lists(_FRAGMENTS, max_size=40).map("".join)


@FUZZ
@given(text=st.one_of(st.text(), _CYPHERISH, _CYPHERISH.map(lambda s: "MATCH (n) " + s)))
def test_never_crashes(text: str):
    """(c) Any text: the guard returns or raises WriteRejected, nothing else."""
    try:
        check_read_only(text)
    except WriteRejected as rejected:
        assert rejected.reason
    assert isinstance(is_read_only(text), bool)


@FUZZ
@given(text=st.one_of(_CYPHERISH.map(lambda s: "MATCH (n) " + s), _CYPHERISH))
def test_whatever_it_accepts_it_has_read_to_the_end(text: str):
    """If the guard accepts a text, it knows where every string and comment ends: a write on the
    next line is seen, and so is a second statement."""
    if is_read_only(text):
        assert not is_read_only(text + "\nCREATE (n)")
        assert not is_read_only(text + "\n; MATCH (m) RETURN m")


# --- issue 13: guard gaps ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statement", "note", "reason"), GAP_REJECTS, ids=[f"gap-{i}" for i in range(len(GAP_REJECTS))]
)
def test_guard_gap_is_rejected_with_a_clear_reason(statement: str, note: str, reason: str):
    """Each gap of issue 13, and its variants, is refused, and the reason names the offence
    (the normalised procedure or function name, eval, backticks, the glued number)."""
    with pytest.raises(WriteRejected) as caught:
        check_read_only(statement)
    assert reason.lower() in caught.value.reason.lower(), (note, caught.value.reason)


@pytest.mark.parametrize(
    "statement", GAP_ACCEPTS, ids=[f"gap-ok-{i}" for i in range(len(GAP_ACCEPTS))]
)
def test_reads_near_the_gaps_stay_accepted(statement: str):
    check_read_only(statement)


def test_gap_corpus_is_in_the_shared_lists_and_counted():
    """The gap cases feed MUST_REJECT / MUST_ALLOW, which the live-server test runs."""
    rejects = {s for s, _ in MUST_REJECT}
    assert all(s in rejects for s, _, _ in GAP_REJECTS)
    assert set(GAP_ACCEPTS) <= set(MUST_ALLOW)
    assert not rejects & set(MUST_ALLOW)
    accepted = sum(is_read_only(s) for s in ALL_STATEMENTS)
    assert accepted == len(MUST_ALLOW)
    print(
        f"corpus: {len(ALL_STATEMENTS)} statements ({len(GAP_REJECTS)} gap rejects,"
        f" {len(GAP_ACCEPTS)} gap reads), {accepted} accepted, {len(MUST_REJECT)} rejected"
    )


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        (
            "RETURN `apoc`.cypher.runFirstColumnSingle('x')",
            "function apoc.cypher.runFirstColumnSingle()",
        ),
        ("CALL `db`.`index`.fulltext.drop('t')", "procedure db.index.fulltext.drop is not allowed"),
        ("CALL `db`.labels()", "write db.labels without backticks"),
        ("RETURN `date`.truncate('day', date())", "write date.truncate() without backticks"),
        ("RETURN `ap``oc`.x()", "ap`oc.x()"),
        ("RETURN eval('1')", "eval() evaluates text as code"),
        ("RETURN Date . `EVAL` ('1')", "Date.EVAL() is not allowed: eval()"),
        ("RETURN $x.eval('1')", "x.eval() is not allowed: eval()"),
        ("RETURN $x.run('1')", "a parameter cannot be called"),
        ("RETURN 'a'.run()", "not methods of a value"),
        ("MATCH (n) RETURN n LIMIT 0x1SET n.x = 1", "0x1SET is not a plain number"),
        ("MATCH (n) RETURN n LIMIT 1_0MERGE (m)", "1_0MERGE is not a plain number"),
        ("MATCH (n) WHERE n.x > 1e0SET n.x = 1", "1e0SET is not a plain number"),
        ("RETURN 1/**/AS x", "1AS is not a plain number"),
        ("CALL db.index.fulltext.queryNodesAndDrop('a', 'b')", "queryNodesAndDrop is not allowed"),
        ("RETURN date.truncateAndDrop('day', date())", "date.truncateAndDrop() is not allowed"),
    ],
)
def test_gap_reason_names_the_offence(statement: str, named: str):
    with pytest.raises(WriteRejected, match=re.escape(named)):
        check_read_only(statement)


# Called names spelled every way the lexers allow: parts optionally quoted, dots with spaces,
# newlines or comments around them, anything between the name and its parenthesis.
_NAMES = [
    "apoc.cypher.runFirstColumnSingle",
    "db.index.fulltext.drop",
    "db.index.fulltext.queryNodesAndDrop",
    "date.eval",
    "vector.neighbors",
    "util.sleep",
    *sorted(DEFAULT_ALLOWED_FUNCTIONS)[:6],
    "vector.similarity.cosine",
]
_GAPS = st.sampled_from(["", " ", "\n", "\t", "/**/", " /* c */ ", " // c\n"])


@st.composite
def _spelled(draw, name: str) -> tuple[str, bool]:
    """`name` spelled with random quoting, case and gaps; and whether a part was quoted."""
    quoted = False
    out = []
    for part in name.split("."):
        part = draw(st.sampled_from([part, part.upper(), part.lower()]))
        if draw(st.booleans()):
            part, quoted = "`" + part + "`", True
        out.append(part)
    spelled = ""
    for k, part in enumerate(out):
        if k:
            spelled += draw(_GAPS) + "." + draw(_GAPS)
        spelled += part
    return spelled + draw(_GAPS), quoted


@FUZZ
@given(data=st.data(), name=st.sampled_from(_NAMES))
def test_called_function_names_are_normalised(data, name: str):
    spelled, quoted = data.draw(_spelled(name), label="spelled")
    query = f"RETURN {spelled}(1) AS x"
    allowed = name.lower() in {n.lower() for n in DEFAULT_ALLOWED_FUNCTIONS}
    assert is_read_only(query) == (allowed and not quoted), query


_PROCEDURES = [
    "db.index.fulltext.queryNodes",
    "db.labels",
    "text_search.search",
    "db.index.fulltext.drop",
    "db.index.fulltext.queryNodesAndDrop",
    "apoc.cypher.doIt",
    "db.labels.drop",
]


@FUZZ
@given(data=st.data(), name=st.sampled_from(_PROCEDURES))
def test_called_procedure_names_are_normalised(data, name: str):
    spelled, quoted = data.draw(_spelled(name), label="spelled")
    query = f"CALL {spelled}('a', 'b') YIELD node RETURN node"
    allowed = name.lower() in {n.lower() for n in DEFAULT_ALLOWED_PROCEDURES}
    assert is_read_only(query) == (allowed and not quoted), query


@FUZZ
@given(
    data=st.data(),
    prefix=st.sampled_from(["", "date.", "vector.", "$x.", "n.", "'s'.", "(n).", "a.b."]),
    flips=_CASE_FLIPS,
)
def test_any_eval_call_is_rejected(data, prefix: str, flips):
    name = _recase("eval", flips)
    if data.draw(st.booleans(), label="quoted"):
        name = "`" + name + "`"
    query = f"MATCH (n) RETURN {prefix}{name}{data.draw(_GAPS, label='gap')}('1') AS x"
    with pytest.raises(WriteRejected, match="(?i)eval"):
        check_read_only(query)


_PLAIN_NUMBERS = st.one_of(
    st.integers(0, 10**12).map(str),
    st.integers(0, 10**9).map(hex),
    st.integers(0, 10**9).map(lambda i: f"0o{i:o}"),
    st.floats(0, 1e12, allow_nan=False).map(repr).filter(lambda s: "inf" not in s),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(0, 99), st.integers(-20, 20)),
)
_GLUED = st.sampled_from(
    [
        "SET n.x = 1",
        "MERGE (m)",
        "DELETE n",
        "CREATE (m)",
        "REMOVE n.x",
        "DETACH DELETE n",
        "RETURN n",
        "x",
        "_1",
        "AS y",
    ]
)


@FUZZ
@given(number=_PLAIN_NUMBERS, glued=_GLUED, spacer=st.sampled_from([" ", "\n", "\t", " /* c */ "]))
def test_a_number_glued_to_a_word_is_rejected_and_spaced_it_is_read(number, glued, spacer):
    """Glued, the number is refused whatever follows; with a space the number itself is fine
    (what follows is judged on its own: a write keyword is still refused)."""
    with pytest.raises(WriteRejected, match="not a plain number"):
        check_read_only(f"MATCH (n) WHERE n.x > {number}{glued}")
    spaced = f"MATCH (n) WHERE n.x > {number}{spacer}RETURN n LIMIT 10"
    check_read_only(spaced)
