"""Tests for the read-only guard: adversarial statements one by one, then property-based fuzzing."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.retrieve.readonly_guard import (
    DEFAULT_ALLOWED_PROCEDURES,
    FORBIDDEN_KEYWORDS,
    WriteRejected,
    check_read_only,
    is_read_only,
)
from eval_pipeline_tests.retrieve.adversarial_statements import (
    ALL_STATEMENTS,
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


def test_allowed_function_namespaces_are_configurable():
    query = "MATCH (t:Turn) RETURN apoc.text.join([t.text], ',')"
    assert not is_read_only(query)
    assert is_read_only(query, allowed_function_namespaces={"apoc"})


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
