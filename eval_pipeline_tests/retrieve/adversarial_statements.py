"""Adversarial Cypher statements for the read-only guard (issue 5).

Shared by the unit tests (`test_guard.py`) and by the live-server test that runs every statement
through the guarded read path and checks the graph fingerprint after each one:

- `MUST_REJECT`: `(statement, note)` pairs the guard must refuse. Many of them write: never send
  them to a server except through the guard.
- `MUST_ALLOW`: statements the guard must let through. Each one only reads the memory graph
  (`(:Session)-[:HAS_TURN]->(:Turn)-[:NEXT]->(:Turn)`), so running it directly must leave the
  graph unchanged too. Some may still fail on one server or the other (a procedure or function
  that dialect lacks, an index that does not exist): failing is fine, writing is not.

Part written by hand, part generated: write clauses combined with case, whitespace and comment
tricks; read templates combined with keyword-laden string literals. The guard gaps of issue 13
(backtick-quoted called names, eval, numbers glued to words, allow-lists matched by prefix) are
data in `guard_gap_statements.json`: hand-written cases with the words their rejection must
give (`GAP_REJECTS`), and seeds spelled here in every quoting, spacing and comment style.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

# --- helpers ------------------------------------------------------------------------------


def cypher_string(content: str, quote: str = "'") -> str:
    """`content` as a Cypher string literal, escaped the way a careful author would."""
    escaped = content.replace("\\", "\\\\").replace(quote, "\\" + quote)
    # NUL is refused anywhere by the guard (Memgraph's pre-lexer stops at it): write an escape.
    escaped = escaped.replace("\x00", "\\u0000")
    return quote + escaped + quote


def alternate_case(text: str) -> str:
    """cReAtE-style case: every other letter upper-cased."""
    out, upper = [], False
    for char in text:
        if char.isalpha():
            char = char.upper() if upper else char.lower()
            upper = not upper
        out.append(char)
    return "".join(out)


# Read queries with one string-literal slot, `$LIT`. Also used by the property-based tests.
LITERAL_TEMPLATES = [
    "MATCH (t:Turn) WHERE t.text CONTAINS $LIT RETURN t.turn_id, t.text LIMIT 10",
    "MATCH (t:Turn) WHERE t.role = 'user' AND toLower(t.text) CONTAINS toLower($LIT) RETURN t",
    "MATCH (s:Session)-[:HAS_TURN]->(t:Turn) WHERE t.text STARTS WITH $LIT RETURN s.session_id",
    "CALL db.index.fulltext.queryNodes('Turn[text]', $LIT) YIELD node, score "
    "RETURN node.turn_id, score ORDER BY score DESC LIMIT 5",
    "RETURN $LIT AS echo",
    "UNWIND [$LIT, 'x'] AS phrase MATCH (t:Turn) WHERE t.text CONTAINS phrase RETURN count(t)",
    "MATCH (t:Turn) RETURN t {.turn_id, note: $LIT} LIMIT 1",
    "CALL text_search.search('turn_text', $LIT) YIELD node RETURN node.turn_id",
]

# String contents that look like code. Inside a literal they are data and must be allowed.
KEYWORD_PHRASES = [
    "CREATE TABLE users (id INT)",
    "DETACH DELETE n",
    "MATCH (n) SET n.x = 1",
    "DROP INDEX turn_text",
    "LOAD CSV FROM 'file:///etc/passwd' AS row",
    "CALL apoc.create.node(['X'], {}) YIELD node",
    "'; MATCH (n) DETACH DELETE n; //",
    '"; MERGE (n:Planted) //',
    "it's CREATE time",
    'she said "DELETE it"',
    "a; b; c;",
    "// not a comment CREATE",
    "/* not a comment */ REMOVE",
    "back\\slash MERGE \\",
    "`CREATE` (n)",
    "FOREACH (x IN y | SET x.z = 1)",
    "REMOVE n:Label",
    "CALL { CREATE (n) } IN TRANSACTIONS",
    "SHOW DATABASES; USE system",
    "ＣＲＥＡＴＥ in fullwidth",
    "line one\nCREATE (n)\nline three",
    "tab\tSET\tx",
    "\u2028CREATE after a line separator",
    "GRANT ALL ON * TO agent",
    "apoc.cypher.runFirstColumnSingle('CREATE (n)')",
]


# --- must reject --------------------------------------------------------------------------

# One write per clause; the literals have no spaces so the whitespace/comment variants below
# only touch code.
_WRITES = [
    ("CREATE (t:Turn {turn_id: 'planted#0', text: 'planted'})", "CREATE a node"),
    ("MATCH (t:Turn) SET t.text = 'overwritten'", "SET a property"),
    ("MATCH (t:Turn) SET t:Planted", "SET a label"),
    ("MATCH (t:Turn) REMOVE t.text", "REMOVE a property"),
    ("MATCH (t:Turn) DELETE t", "DELETE"),
    ("MATCH (s:Session) DETACH DELETE s", "DETACH DELETE"),
    ("MERGE (s:Session {session_id: 'planted'})", "MERGE a node"),
    ("MATCH (a:Turn), (b:Turn) MERGE (a)-[:PLANTED]->(b)", "MERGE a relationship"),
    ("MATCH (t:Turn) FOREACH (x IN [1] | SET t.flag = x)", "FOREACH with SET"),
    ("LOAD CSV FROM 'file:///etc/passwd' AS row CREATE (:Planted {line: row[0]})", "LOAD CSV"),
    ("DROP INDEX turn_text", "DROP INDEX"),
    ("CREATE INDEX ON :Turn(text)", "CREATE INDEX"),
    ("MATCH (t:Turn) WITH t LIMIT 1 CREATE (t)-[:NEXT]->(:Turn)", "CREATE after a read"),
    ("MATCH (t:Turn) RETURN t UNION MATCH (m:Turn) DETACH DELETE m RETURN m", "write in UNION"),
]

# Ways to dress a write up; each keeps the write clause intact for the server.
_DISGUISES = [
    ("plain", lambda s: s),
    ("lower case", str.lower),
    ("alternating case", alternate_case),
    ("newlines and tabs", lambda s: s.replace(" ", "\n\t")),
    ("CRLF line breaks", lambda s: s.replace(" ", "\r\n")),
    ("block comments between tokens", lambda s: s.replace(" ", " /* read only */ ")),
    ("empty comments glued between tokens", lambda s: s.replace(" ", "/**/")),
    ("leading line comment", lambda s: "// just a read\n" + s),
    ("trailing semicolon", lambda s: s + ";"),
]

_GENERATED_REJECTS = [
    (disguise(statement), f"{note}, {label}")
    for statement, note in _WRITES
    for label, disguise in _DISGUISES
]

_HAND_REJECTS = [
    # Keywords hidden by comments, quotes and names next to them.
    ("MATCH (n) DE/**/TACH DELETE n", "DETACH split by a comment"),
    ("MATCH (n) RETURN n UNION MATCH (m) DE/**/TACH", "DE/**/TACH alone: guard reads it joined"),
    ("MATCH (n) CR/**/EATE (m)", "CREATE split by a comment"),
    ("MATCH (n) SE/* x */T n.x = 1", "SET split by a comment with text"),
    ("MATCH (n) RE/**/MOVE n.x", "REMOVE split by a comment"),
    ("MATCH (n) M/**/ERGE (m)", "MERGE split by a comment"),
    ("MATCH (n) RETURN n/*x*/CREATE (m)", "keyword glued after a comment"),
    ("MATCH (n)--(m) RETURN n // read\nCREATE (x)", "keyword on the line after a comment"),
    ("MATCH (n) RETURN n /* read */\tDELETE n", "keyword after a block comment and a tab"),
    ("MATCH (n) WHERE n.text = 'x'CREATE (m)", "keyword glued to the end of a string"),
    ('MATCH (n) WHERE n.text = "x"DELETE n', "keyword glued to a double-quoted string"),
    ("MATCH (n) RETURN n AS `x`CREATE (m)", "keyword glued to a backtick name"),
    ("MATCH (n) RETURN 1CREATE (m)", "keyword glued to a number"),
    ("MATCH (n) WITH n, 0 AS x SET n.y = x", "SET after WITH"),
    # Escapes that end a string earlier than a naive reader thinks.
    (r"MATCH (n) WHERE n.x = 'a\\' CREATE (m) //' RETURN n", "escaped backslash ends string"),
    (r'MATCH (n) WHERE n.x = "a\\" DELETE n //" RETURN n', "escaped backslash, double quotes"),
    ("MATCH (n) WHERE n.x = 'it''s' CREATE (m) RETURN n", "doubled quote is two literals"),
    (r"MATCH (n) WHERE n.x = 'it\'s' CREATE (m) RETURN n", "escaped quote then a real write"),
    (r"MATCH (n) WHERE n.x = '\\\\' DETACH DELETE n", "two escaped backslashes"),
    # Unterminated or ambiguous text.
    ("MATCH (n) WHERE n.x = 'abc RETURN n", "unterminated single-quoted string"),
    (r"MATCH (n) WHERE n.x = 'abc\' RETURN n", "string left open by an escaped quote"),
    ('MATCH (n) WHERE n.x = "abc RETURN n', "unterminated double-quoted string"),
    ("RETURN 'abc\\", "backslash at the very end"),
    ("MATCH (`n) RETURN n", "unterminated backtick name"),
    ("MATCH (n) RETURN n /* never closed", "unterminated block comment"),
    ("MATCH (n) RETURN n /* a /* b */ CREATE (m) */", "nested block comment"),
    (r"MATCH (`a\`) RETURN 1", "backslash inside a backtick name"),
    ("MATCH (n) RETURN n // c\u2028CREATE (m)", "U+2028 inside a line comment"),
    ("MATCH (n) RETURN n // c\u2029CREATE (m)", "U+2029 inside a line comment"),
    ("MATCH (n) RETURN n // c\x85CREATE (m)", "NEL inside a line comment"),
    ("MATCH (n) RETURN n // c\x0bCREATE (m)", "vertical tab inside a line comment"),
    ("MATCH (n) RETURN n // c\x0cCREATE (m)", "form feed inside a line comment"),
    ("MATCH (n) RETURN n // c\rDETACH DELETE n", "lone carriage return ends a comment"),
    ("MATCH (n) RETURN n // c\r", "lone carriage return at the end"),
    ("MATCH (n) WHERE n.x = 'a\x00' RETURN n", "NUL inside a string"),
    ("MATCH (n) RETURN n\x00; CREATE (m)", "NUL in code"),
    # Unicode look-alikes: keywords are ASCII, anything else in code is refused.
    ("ＣＲＥＡＴＥ (n:Planted)", "fullwidth CREATE"),
    ("MATCH (n) ＳＥＴ n.x = 1", "fullwidth SET"),
    ("MATCH (n) \u0421REATE (m)", "Cyrillic Es in CREATE"),
    ("MATCH (n) D\u0415LETE n", "Cyrillic Ie in DELETE"),
    ("MATCH\u00a0(n)\u00a0DETACH\u00a0DELETE\u00a0n", "no-break spaces"),
    ("MATCH (n)\u3000DELETE n", "ideographic space"),
    ("MATCH (n) DE\u200bLETE n", "zero-width space inside DELETE"),
    ("MATCH (n) RETURN n\u2028CREATE (m)", "line separator in code"),
    ("MATCH (n) RETURN n；CREATE (m)", "fullwidth semicolon"),
    ("MATCH (\u00e9:Turn) RETURN \u00e9", "non-ASCII variable (use backticks)"),
    ("MATCH (n)\u2003RETURN n", "em space in an otherwise read query"),
    ("MATCH (a)\u2010[:NEXT]\u2192(b) RETURN a", "Unicode dash and arrow"),
    # Odd characters that no Cypher needs.
    ("MATCH (n) RETURN n # comment\nCREATE (m)", "hash is not a Cypher comment"),
    ("MATCH (n) RETURN n @x", "at sign in code"),
    ("MATCH (n) RETURN n \\\nCREATE (m)", "backslash in code"),
    ("MATCH (n) RETURN n\x0cCREATE (m)", "form feed in code"),
    # Keyword-named things outside backticks: refused, write them in backticks.
    ("MATCH (n:Set) RETURN n", "label spelled like SET"),
    ("MATCH (n) RETURN n.delete", "property key spelled like DELETE"),
    ("MATCH (n) RETURN n {.remove}", "map projection of a key spelled like REMOVE"),
    ("MATCH (n) RETURN $create", "parameter spelled like CREATE"),
    ("MATCH (merge:Turn) RETURN merge", "variable spelled like MERGE"),
    ("MATCH (n) RETURN n.call", "property key spelled like CALL"),
    # Other write clauses and forms.
    ("INSERT (:Turn {text: 'x'})", "GQL INSERT"),
    ("MATCH (t:Turn) NODETACH DELETE t", "NODETACH DELETE"),
    ("MATCH (n) SET n += {x: 1}", "SET +="),
    ("MATCH (n) SET n = {}", "SET = {} wipes properties"),
    ("FOREACH (x IN [1, 2] | CREATE (:Planted {v: x}))", "FOREACH CREATE"),
    ("MATCH p = (a)-[*]->(b) FOREACH (n IN nodes(p) | REMOVE n.text)", "FOREACH REMOVE"),
    ("LOAD CSV WITH HEADERS FROM 'file:///x.csv' AS row RETURN row", "LOAD CSV even to read"),
    ("LOAD JSONL FROM '/tmp/x.jsonl' AS row RETURN row", "Memgraph LOAD JSONL"),
    ("EXPLAIN CREATE (n)", "EXPLAIN of a write"),
    ("PROFILE MATCH (n) DELETE n", "PROFILE runs the write"),
    ("SESSION SET $x = 1", "ArcadeDB SESSION SET"),
    ("MATCH (n) RETURN n UNION ALL MATCH (m) SET m.x = 1 RETURN m", "write in UNION ALL"),
    # Subqueries that write.
    ("MATCH (t:Turn) CALL { WITH t CREATE (t)-[:X]->(:Planted) }", "CALL subquery with CREATE"),
    ("CALL { CREATE (n:Planted) RETURN n } RETURN n", "leading CALL subquery with CREATE"),
    ("MATCH (t:Turn) CALL (t) { SET t.x = 1 } RETURN t", "scoped CALL subquery with SET"),
    ("MATCH (t:Turn) WHERE EXISTS { MATCH (t) SET t.x = 1 } RETURN t", "SET in EXISTS"),
    ("MATCH (t:Turn) RETURN COUNT { CREATE (n) } AS c", "CREATE in COUNT subquery"),
    ("CALL { MATCH (t:Turn) RETURN t } IN TRANSACTIONS OF 10 ROWS RETURN t", "IN TRANSACTIONS"),
    (
        "MATCH (t:Turn) CALL { WITH t DELETE t } IN CONCURRENT TRANSACTIONS",
        "IN CONCURRENT TRANSACTIONS",
    ),
    # Procedures: only the allow-list passes.
    ("CALL apoc.create.node(['Turn'], {text: 'x'}) YIELD node RETURN node", "apoc.create"),
    ("CALL apoc.merge.node(['Session'], {session_id: 'x'}) YIELD node RETURN node", "apoc.merge"),
    (
        "MATCH (a:Turn), (b:Turn) CALL apoc.refactor.mergeNodes([a, b]) YIELD node RETURN node",
        "apoc.refactor",
    ),
    (
        "CALL apoc.periodic.iterate('MATCH (t:Turn) RETURN t', 'DELETE t', {batchSize: 100})",
        "apoc.periodic.iterate",
    ),
    (
        "CALL apoc.periodic.commit('MATCH (t) WITH t LIMIT 9 DELETE t RETURN count(*)')",
        "periodic.commit",
    ),
    (
        "CALL apoc.cypher.doIt('CREATE (n:Planted) RETURN n', {}) YIELD value RETURN value",
        "apoc.cypher.doIt",
    ),
    ("CALL apoc.cypher.run('MATCH (n) RETURN n', {}) YIELD value RETURN value", "apoc.cypher.run"),
    ("CALL apoc.cypher.runMany('CREATE (n);', {})", "apoc.cypher.runMany"),
    (
        "CALL apoc.do.when(true, 'CREATE (n) RETURN n', '', {}) YIELD value RETURN value",
        "apoc.do.when",
    ),
    ("CALL apoc.do.case([true, 'MATCH (n) DELETE n'], '', {})", "apoc.do.case"),
    ("CALL apoc.schema.assert({}, {})", "apoc.schema.assert drops indexes"),
    ("CALL apoc.trigger.add('t', 'CREATE (n)', {})", "apoc.trigger.add"),
    ("CALL apoc.load.json('file:///x.json') YIELD value RETURN value", "apoc.load.json"),
    ("CALL apoc.nodes.delete([], 10)", "apoc.nodes.delete"),
    ("MATCH (n) CALL apoc.create.setProperty(n, 'x', 1) YIELD node RETURN node", "setProperty"),
    ("CALL dbms.killQuery('q-1')", "dbms procedure"),
    ("CALL dbms.security.createUser('u', 'p', false)", "dbms.security"),
    ("CALL dbms.setConfigValue('db.logs.query.enabled', 'off')", "dbms.setConfigValue"),
    ("CALL mg.load_all()", "Memgraph mg.* admin"),
    ("CALL mg.kafka_set_stream_offset('s', 0)", "Memgraph stream admin"),
    ("CALL gds.pageRank.write('g', {writeProperty: 'rank'})", "gds write mode"),
    ("CALL gds.graph.drop('g')", "gds.graph.drop"),
    (
        "CALL periodic.iterate('MATCH (t:Turn) RETURN t', 'DETACH DELETE t', {batch_size: 9})",
        "Memgraph periodic",
    ),
    (
        "MATCH (a), (b) CALL merge.relationship(a, 'X', {}, {}, b) YIELD rel RETURN rel",
        "ArcadeDB merge.*",
    ),
    ("CALL db.createLabel('Planted')", "db.createLabel"),
    ("CALL db.clearQueryCaches()", "db procedure not on the list"),
    ("CALL db.index.fulltext.createNodeIndex('t', ['Turn'], ['text'])", "fulltext index DDL"),
    ("CALL db.index.fulltext.drop('t')", "fulltext index drop"),
    ("CALL db . index . fulltext . drop('t')", "spaced procedure name"),
    ("CALL db.index/**/.fulltext.drop('t')", "commented procedure name"),
    ("CALL unknown.procedure()", "unknown procedure"),
    ("CALL db.labels2()", "near miss of db.labels"),
    ("CALL db.index.fulltext.queryNodesX('Turn[text]', 'x')", "near miss of queryNodes"),
    ("CALL db.index.fulltext()", "prefix of an allowed name"),
    ("CALL apoc.help('create')", "read procedure not on the list"),
    ("CALL `db.labels`()", "backtick-quoted procedure name"),
    ("CALL `apoc`.`create`.`node`(['X'], {})", "backtick-quoted name parts"),
    ("CALL db.`labels`()", "backtick-quoted last part"),
    ("CALL 'db.labels'()", "procedure name as a string"),
    ("CALL apoc.create.node", "writing procedure without parentheses"),
    ("CALL", "bare CALL"),
    ("OPTIONAL CALL apoc.create.node(['X'], {}) YIELD node RETURN node", "OPTIONAL CALL"),
    (
        "CALL db.labels() YIELD label CALL apoc.create.node([label], {}) YIELD node RETURN node",
        "writing call after an allowed one",
    ),
    ("MATCH (t) CALL { WITH t CALL apoc.create.node(['X'], {}) YIELD node RETURN node }", "nested"),
    # Namespaced functions outside the allowed namespaces.
    ("RETURN apoc.cypher.runFirstColumnSingle('CREATE (n) RETURN n', {}) AS x", "runs a string"),
    ("RETURN apoc.cypher.runFirstColumnMany('MATCH (n) DETACH DELETE n', {}) AS x", "runs"),
    ("RETURN APOC.CYPHER.RUNFIRSTCOLUMNSINGLE('CREATE (n)', {})", "upper-case APOC function"),
    ("RETURN apoc.cypher.runFirstColumnSingle /* gap */ ('CREATE (n)', {})", "comment gap"),
    ("RETURN apoc . cypher . runFirstColumnSingle('CREATE (n)', {})", "spaced function name"),
    ("MATCH (t:Turn) RETURN apoc.text.join([t.text], ',')", "APOC function not allowed"),
    ("RETURN util.sleep(100000)", "ArcadeDB util.sleep stalls the server"),
    ("RETURN create.uuid()", "ArcadeDB create.* function"),
    ("MATCH (t:Turn) WHERE text.indexOf(t.text, 'x') > 0 RETURN t", "ArcadeDB text.* function"),
    # Admin commands and statements that are not queries.
    ("SHOW INDEXES", "SHOW"),
    ("SHOW DATABASES", "SHOW DATABASES"),
    ("SHOW SCHEMA INFO", "Memgraph SHOW SCHEMA INFO"),
    ("SHOW TRANSACTIONS YIELD transactionId TERMINATE TRANSACTIONS transactionId", "terminate"),
    ("TERMINATE TRANSACTIONS 'neo4j-transaction-1'", "TERMINATE"),
    ("USE system MATCH (n) RETURN n", "USE switches database"),
    ("USE DATABASE other", "Memgraph USE DATABASE"),
    ("MATCH (n) CALL { USE other MATCH (m) RETURN m } RETURN n", "USE in a subquery"),
    ("GRANT ROLE admin TO agent", "GRANT"),
    ("REVOKE ROLE admin FROM agent", "REVOKE"),
    ("DENY READ {*} ON GRAPH * TO agent", "DENY"),
    ("ALTER USER agent SET PASSWORD 'x'", "ALTER"),
    ("RENAME ROLE a TO b", "RENAME"),
    ("STORAGE MODE IN_MEMORY_ANALYTICAL", "Memgraph storage mode"),
    ("ANALYZE GRAPH", "Memgraph ANALYZE GRAPH writes statistics"),
    ("FREE MEMORY", "Memgraph FREE MEMORY"),
    ("DUMP DATABASE", "Memgraph DUMP DATABASE"),
    ("LOCK DATA DIRECTORY", "Memgraph LOCK DATA DIRECTORY"),
    ("CREATE SNAPSHOT", "Memgraph CREATE SNAPSHOT"),
    ("BEGIN", "explicit transaction control"),
    ("COMMIT", "explicit transaction control"),
    ("ROLLBACK", "explicit transaction control"),
    ("START STREAM s", "Memgraph START STREAM"),
    ("STOP ALL STREAMS", "Memgraph STOP STREAM"),
    ("DROP GRAPH", "Memgraph DROP GRAPH"),
    ("REGISTER REPLICA r SYNC TO '127.0.0.1'", "Memgraph replication"),
    ("SET REPLICATION ROLE TO REPLICA WITH PORT 10000", "Memgraph replication role"),
    ("CREATE TRIGGER t ON CREATE BEFORE COMMIT EXECUTE CREATE (n)", "Memgraph trigger"),
    ("DROP TRIGGER t", "drop trigger"),
    ("CREATE TEXT INDEX turn_text ON :Turn(text)", "Memgraph text index"),
    ("DROP TEXT INDEX turn_text", "drop text index"),
    ("CREATE CONSTRAINT ON (t:Turn) ASSERT t.turn_id IS UNIQUE", "constraint"),
    ("DROP CONSTRAINT ON (t:Turn) ASSERT t.turn_id IS UNIQUE", "drop constraint"),
    ("CREATE DATABASE x", "CREATE DATABASE"),
    ("STOP DATABASE neo4j", "STOP DATABASE"),
    ("START DATABASE neo4j", "START DATABASE"),
    ("SET DATABASE SETTING 'x' TO 'y'", "Memgraph settings"),
    ("CYPHER 25 MATCH (n) RETURN n", "CYPHER options prefix"),
    ("USING PERIODIC COMMIT 10 LOAD CSV FROM 'x' AS r CREATE (:X)", "PERIODIC COMMIT"),
    ("USING PARALLEL EXECUTION MATCH (n) RETURN count(n)", "pre-query directive"),
    ("EXPLAIN SHOW INDEXES", "EXPLAIN of an admin command"),
    ("(n)", "does not start like a query"),
    (":use system", "client command"),
    # More than one statement, and empty ones.
    ("MATCH (n) RETURN n; CREATE (m)", "second statement writes"),
    ("MATCH (n) RETURN n;CREATE (m)", "second statement without a space"),
    ("MATCH (n) RETURN n; MATCH (m) RETURN m", "two reads are still two statements"),
    ("MATCH (n) RETURN n;;", "two semicolons"),
    (";", "only a semicolon"),
    (";MATCH (n) RETURN n", "leading semicolon"),
    ("MATCH (n) RETURN n /* ; */ ; MATCH (m) RETURN m", "semicolon after a comment"),
    ("MATCH (n) WHERE n.x = ';' RETURN n; DETACH DELETE n", "real semicolon after a fake one"),
    ("MATCH (n) RETURN n\n;\nMATCH (m) RETURN m", "semicolon on its own line"),
    ("", "empty query"),
    ("   \n\t ", "only whitespace"),
    ("// nothing here", "only a comment"),
    ("/* nothing */ ;", "comment and a semicolon"),
]


# --- must allow ---------------------------------------------------------------------------

_LITERALS_ALLOWED = [
    LITERAL_TEMPLATES[i % len(LITERAL_TEMPLATES)].replace("$LIT", cypher_string(phrase, quote))
    for i, phrase in enumerate(KEYWORD_PHRASES)
    for quote in ("'", '"')
]

_HAND_ALLOWED = [
    # Escaped quotes and backslashes inside literals.
    r"MATCH (t:Turn) WHERE t.text = 'it\'s CREATE' RETURN t",
    r'MATCH (t:Turn) WHERE t.text = "say \"DELETE\" now" RETURN t',
    r"MATCH (t:Turn) WHERE t.text ENDS WITH '\\' RETURN t",
    r"MATCH (t:Turn) WHERE t.text = 'a\\' OR t.text = 'CREATE' RETURN t",
    r"RETURN '\u0027 CREATE (n) //' AS x",
    r"""RETURN 'double " inside single; DELETE' AS x""",
    r"""RETURN "single ' inside double; MERGE" AS x""",
    r"RETURN 'tab\tnew\nline\\n CREATE' AS x",
    "RETURN 'multi\nline\nCREATE (n)\nliteral' AS x",
    "RETURN 'non-ASCII é 漢字 ＣＲＥＡＴＥ \u2028 \u00a0' AS x",
    # Semicolons that are not statement separators.
    "MATCH (t:Turn) RETURN t.text + ';' + t.role AS x LIMIT 1",
    "MATCH (t:Turn) WHERE t.text CONTAINS '; DROP INDEX x;' RETURN t",
    "MATCH (t:Turn) RETURN t LIMIT 1;",
    "MATCH (t:Turn) RETURN t LIMIT 1 ; ",
    "MATCH (t:Turn) RETURN t LIMIT 1; // done",
    "MATCH (t:Turn) RETURN t LIMIT 1 /* ; CREATE */ ;",
    # Keywords in comments.
    "// CREATE (n)\nMATCH (t:Turn) RETURN t LIMIT 1",
    "MATCH (t:Turn) // then DETACH DELETE t\nRETURN t LIMIT 1",
    "MATCH (t:Turn) /* SET t.x = 1; DROP INDEX x */ RETURN t LIMIT 1",
    "/* MERGE */ MATCH (t:Turn) RETURN count(t)",
    "MATCH (t:Turn) RETURN t LIMIT 1 // ; CREATE (n)",
    "MATCH (t:Turn)\r\n// CREATE\r\nRETURN t LIMIT 1",
    'MATCH (t:Turn) /* it\'s "quoted" `CREATE` */ RETURN t LIMIT 1',
    "MATCH (t:Turn) // it's an apostrophe\nRETURN t LIMIT 1",
    "MATCH (t:Turn) /* ＣＲＥＡＴＥ é \u2028 \x85 */ RETURN t LIMIT 1",
    "MATCH (t:Turn) // é ü 漢字\nRETURN t LIMIT 1",
    "MATCH (t:Turn) RETURN t LIMIT 1 //",
    "MATCH (t:Turn) RETURN t LIMIT 1 // CREATE at the very end",
    "MATCH (t:Turn) /**/ RETURN t LIMIT 1",
    "MATCH (t:Turn) /***/ RETURN t LIMIT 1",
    "MATCH (t:Turn) /* // */ RETURN t LIMIT 1",
    "MATCH (t:Turn) // /* \nRETURN t LIMIT 1",
    "MATCH (t:Turn)/* glued to punctuation */RETURN t LIMIT 1",
    # Backtick names: keywords there are names.
    "MATCH (`CREATE`:Turn) RETURN `CREATE`.text LIMIT 1",
    "MATCH (t:Turn) RETURN t.text AS `DETACH DELETE` LIMIT 1",
    "MATCH (t:`Turn`) RETURN t.`text` LIMIT 1",
    "MATCH (t:Turn) RETURN t.`set` AS s, t.`delete` AS d LIMIT 1",
    "MATCH (t:Turn) RETURN t.text AS `it's; CREATE` LIMIT 1",
    "MATCH (t:Turn) RETURN t.text AS `a``b` LIMIT 1",
    "MATCH (t:Turn) RETURN t.text AS `ＣＲＥＡＴＥ é` LIMIT 1",
    'MATCH (t:Turn) RETURN t.text AS `"` LIMIT 1',
    "MATCH (t:Turn) RETURN t.text AS `//` LIMIT 1",
    "MATCH (t:Turn) RETURN t.text AS `/*` LIMIT 1",
    "MATCH (`call`:Turn) RETURN `call` LIMIT 1",
    # Allowed procedures.
    "CALL db.index.fulltext.queryNodes('Turn[text]', 'dentist appointment') YIELD node, score "
    "RETURN node.turn_id, score LIMIT 10",
    "CALL db.index.fulltext.queryNodes('Turn[text]', $q) YIELD node RETURN node.text",
    "CALL db.index.fulltext.queryNodes('Turn[text]', 'CREATE OR DELETE') YIELD node RETURN node",
    "CALL db.index.fulltext.queryRelationships('rels', 'x') YIELD relationship RETURN relationship",
    "call DB.INDEX.FULLTEXT.QUERYNODES('Turn[text]', 'x') yield node return node",
    "CALL db . index . fulltext . queryNodes('Turn[text]', 'x') YIELD node RETURN node",
    "CALL db.index.fulltext.queryNodes /* search */ ('Turn[text]', 'x') YIELD node RETURN node",
    "CALL text_search.search('turn_text', 'data.text:dentist') YIELD node RETURN node.turn_id",
    "CALL text_search.search_all('turn_text', 'dentist') YIELD node RETURN node",
    "CALL text_search.regex_search('turn_text', 'dent.*') YIELD node RETURN node",
    "CALL db.labels() YIELD label RETURN label",
    "CALL db.relationshipTypes() YIELD relationshipType RETURN relationshipType",
    "CALL db.propertyKeys() YIELD propertyKey RETURN propertyKey",
    "CALL db.labels",
    "MATCH (s:Session) WITH s LIMIT 1 "
    "CALL db.index.fulltext.queryNodes('Turn[text]', s.session_id) YIELD node RETURN s, node",
    # Read subqueries.
    "MATCH (s:Session) CALL { WITH s MATCH (s)-[:HAS_TURN]->(t:Turn) RETURN count(t) AS n } "
    "RETURN s.session_id, n",
    "MATCH (s:Session) CALL (s) { MATCH (s)-[:HAS_TURN]->(t:Turn) RETURN t "
    "ORDER BY t.index LIMIT 1 } RETURN s, t",
    "MATCH (t:Turn) WHERE EXISTS { MATCH (t)-[:NEXT]->(:Turn) } RETURN t LIMIT 5",
    "MATCH (s:Session) RETURN s.session_id, COUNT { (s)-[:HAS_TURN]->() } AS turns",
    "MATCH (s:Session) RETURN COLLECT { MATCH (s)-[:HAS_TURN]->(t) RETURN t.text } AS texts",
    "CALL { MATCH (t:Turn) RETURN t LIMIT 1 UNION MATCH (t:Turn) RETURN t SKIP 1 LIMIT 1 } "
    "RETURN t",
    "MATCH (t:Turn) WHERE exists((t)-[:NEXT]->()) RETURN t LIMIT 1",
    "MATCH (t:Turn) RETURN t UNION MATCH (t:Turn) RETURN t",
    "MATCH (t:Turn) RETURN t.text AS x UNION ALL MATCH (s:Session) RETURN s.session_id AS x",
    # Plain reads: case, layout, clauses, operators, functions.
    "match (t:Turn) return t limit 1",
    "MaTcH (t:Turn) ReTuRn t LiMiT 1",
    "MATCH\n  (t:Turn)\nRETURN\tt\nLIMIT 1",
    "  \n MATCH (t:Turn) RETURN t LIMIT 1 \n ",
    "MATCH (t:Turn)\r\nRETURN t\r\nLIMIT 1",
    "EXPLAIN MATCH (t:Turn) RETURN t",
    "PROFILE MATCH (t:Turn) RETURN count(t)",
    "OPTIONAL MATCH (t:Turn {turn_id: 'x#0'}) RETURN t",
    "WITH 1 AS x RETURN x",
    "UNWIND [1, 2, 3] AS x RETURN x",
    "RETURN 1",
    "MATCH (a:Turn)-[:NEXT*1..3]->(b:Turn) RETURN a.turn_id, b.turn_id LIMIT 5",
    "MATCH p = shortestPath((a:Turn)-[:NEXT*]-(b:Turn)) RETURN length(p) LIMIT 1",
    "MATCH (t:Turn) WHERE t.text =~ '(?i).*dentist.*' RETURN t",
    "MATCH (t:Turn) RETURN t.text ORDER BY t.timestamp DESC SKIP 2 LIMIT 3",
    "MATCH (t:Turn) WITH t.role AS role, count(*) AS c RETURN role, c",
    "MATCH (t:Turn) RETURN CASE WHEN t.role = 'user' THEN 'U' ELSE 'A' END AS r LIMIT 3",
    "MATCH (t:Turn) WHERE t.index IN [0, 1, 2] AND NOT t.role = 'assistant' RETURN t",
    "MATCH (t:Turn) RETURN t {.turn_id, .text} LIMIT 2",
    "MATCH (t:Turn) RETURN [x IN split(t.text, ' ') WHERE size(x) > 3 | toUpper(x)] AS w LIMIT 1",
    "MATCH (t:Turn) RETURN reduce(s = 0, x IN [1, 2] | s + x) AS total LIMIT 1",
    "MATCH (t:Turn) RETURN substring(t.text, 0, 10), trim(t.text), replace(t.text, 'a', 'b')",
    "MATCH (t:Turn) WHERE t.timestamp >= datetime('2023-05-01T00:00:00') RETURN t",
    "RETURN date.truncate('month', date('2023-05-30')) AS m",
    "RETURN datetime.truncate('day', datetime('2023-05-30T23:40:00')) AS d",
    "RETURN duration.between(date('2023-01-01'), date('2023-05-30')).days AS d",
    "RETURN datetime.fromepochmillis(0) AS t",
    "RETURN point.distance(point({x: 0, y: 0}), point({x: 3, y: 4})) AS d",
    "RETURN vector.similarity.cosine([1.0, 0.0], [0.0, 1.0]) AS s",
    "MATCH (t:Turn) WHERE t.text CONTAINS $q RETURN t",
    "MATCH (t:Turn) WHERE t.turn_id IN $ids RETURN t.turn_id, t.text",
    "MATCH (t:Turn) RETURN 1.5e3 AS x, 0x1F AS h, .5 AS f LIMIT 1",
    "MATCH (t:Turn) RETURN t.created_at, t.settled, t.deleted_flag, t.creates LIMIT 1",
    "MATCH (reset:Turn) RETURN reset LIMIT 1",
    "MATCH (start:Turn)-[:NEXT]->(stop:Turn) RETURN start, stop LIMIT 1",
    "MATCH (t:Turn) WHERE t.text <> '' AND t.index >= 0 RETURN t",
    "MATCH (t:Turn) RETURN t.text IS NOT NULL AS has LIMIT 1",
    "MATCH (a)-->(b)<--(c) RETURN count(*)",
    "MATCH (s:Session)-[r:HAS_TURN]->(t) RETURN type(r), labels(t), keys(t), properties(t)",
    "MATCH (t:Turn) USING INDEX t:Turn(turn_id) WHERE t.turn_id = 'x#0' RETURN t",
    "MATCH (t:Turn) WITH DISTINCT t.role AS r RETURN collect(r)",
    "MATCH (s:Session) WHERE s.started_at < datetime() RETURN s ORDER BY s.started_at LIMIT 5",
    "MATCH (t:Turn) RETURN t.text STARTS WITH 'I' OR t.text ENDS WITH '?' AS q LIMIT 1",
    "MATCH (t:Turn) WHERE t.role = 'user' XOR t.index = 0 RETURN t LIMIT 1",
    "MATCH (t:Turn) RETURN elementId(t), id(t), toString(t.index), toInteger('1') LIMIT 1",
    "MATCH (t:Turn) RETURN coalesce(t.missing, 'none'), head(collect(t.text))",
]

# Read queries dressed the same ways as the writes above: the disguises alone must not trip
# the guard.
_READS_TO_DISGUISE = [
    "MATCH (t:Turn) WHERE t.role = 'user' RETURN t.turn_id LIMIT 5",
    "MATCH (s:Session)-[:HAS_TURN]->(t:Turn) RETURN s.session_id, count(t) AS n",
    "CALL db.index.fulltext.queryNodes('Turn[text]', 'dentist') YIELD node RETURN node",
    "RETURN date.truncate('day', datetime('2023-05-30T23:40:00')) AS d",
]

_GENERATED_ALLOWED = [
    disguise(statement)
    for statement in _READS_TO_DISGUISE
    for label, disguise in _DISGUISES
    # Except gluing a keyword to a namespaced name: with the comments read as nothing,
    # `CALL/**/db.index.x(` is a call of the unknown function `CALLdb.index.x`, refused.
    if not (label.startswith("empty comments") and "." in statement.split("(")[0])
]


# --- issue 13: guard gaps, from the data file --------------------------------------------

GAP_DATA_FILE = Path(__file__).with_name("guard_gap_statements.json")
_GAPS = json.loads(GAP_DATA_FILE.read_text(encoding="utf-8"))


def _quote(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


def _spell(name: str) -> list[tuple[str, str, bool]]:
    """`(spelling, label, quoted)` for every way of writing the called name `name`."""
    parts = name.split(".")
    out = [
        (name, "plain", False),
        (name.upper(), "upper case", False),
        (alternate_case(name), "alternating case", False),
        (" . ".join(parts), "spaced dots", False),
        ("\n.".join(parts), "newline before each dot", False),
        (" /* . */ .".join(parts), "comment before each dot", False),
        ("./**/".join(parts), "empty comment after each dot", False),
        ("\t.\t".join(parts) + " ", "tabs, space before (", False),
        (name + " /* call */ ", "comment before (", False),
        (name + " // call\n", "line comment before (", False),
        (".".join(_quote(p) for p in parts), "every part quoted", True),
        (_quote(name), "whole name in one quote", True),
        (" . ".join(_quote(p) for p in parts) + " ", "quoted parts, spaced", True),
        ("/**/.".join(_quote(p) for p in parts), "quoted parts, comments", True),
        (_quote(name.upper()), "whole name quoted, upper case", True),
    ]
    for k, part in enumerate(parts):
        quoted = [*parts[:k], _quote(part), *parts[k + 1 :]]
        out.append((".".join(quoted), f"part {k + 1} quoted", True))
    if len(parts) > 2:
        out.append(
            (
                _quote(".".join(parts[:2])) + "." + ".".join(parts[2:]),
                "two parts in one quote",
                True,
            )
        )
    return out


def _call_name_cases() -> tuple[list[tuple[str, str, str]], list[str]]:
    rejects: list[tuple[str, str, str]] = []
    accepts: list[str] = []
    for seed in _GAPS["call_names"]:
        name, template, allowed = seed["name"], seed["template"], seed["allowed"]
        for spelling, label, quoted in _spell(name):
            statement = template.replace("$CALL", spelling)
            if allowed and not quoted:
                accepts.append(statement)
            else:
                reason = "backtick" if allowed else name
                rejects.append((statement, f"{name}, {label}", reason))
    return rejects, accepts


def _eval_cases() -> list[tuple[str, str, str]]:
    template = "MATCH (t:Turn) RETURN $CALL('1 = 1') AS x LIMIT 1"
    cases = []
    for name in _GAPS["eval_names"]:
        spellings = [(s, label) for s, label, _ in _spell(name)]
        if "." in name:
            spellings.append(("$" + name, "on a parameter"))
            spellings.append(("$ " + " . ".join(name.split(".")), "on a parameter, spaced"))
        spellings.append(("'text'." + name, "on a string"))
        spellings.append(("(t)." + name, "on an expression"))
        for spelling, label in spellings:
            cases.append(
                (template.replace("$CALL", spelling), f"eval call {name}, {label}", "eval")
            )
    return cases


def _glued_number_cases() -> tuple[list[tuple[str, str, str]], list[str]]:
    numbers = _GAPS["glued_numbers"]
    plain = re.compile(
        r"0x[0-9A-Fa-f]+|0o[0-7]+|(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    )
    rejects, accepts = [], []
    for number in numbers["numbers"]:
        for glued in numbers["glued"]:
            for template in (
                "MATCH (t:Turn) RETURN t LIMIT $NUM",
                "MATCH (t:Turn) WHERE t.index > $NUM",
            ):
                statement = template.replace("$NUM", number + glued)
                rejects.append(
                    (statement, f"number {number} glued to {glued!r}", number + glued.split()[0])
                )
        if plain.fullmatch(number):
            accepts += [t.replace("$NUM", number) for t in numbers["accepted_templates"]]
        else:
            rejects.append((f"RETURN {number} AS x", f"number {number} with an underscore", number))
    return rejects, accepts


_CALL_REJECTS, _CALL_ACCEPTS = _call_name_cases()
_NUMBER_REJECTS, _NUMBER_ACCEPTS = _glued_number_cases()

# (statement, note, words the rejection's reason must contain, case-insensitive).
GAP_REJECTS: list[tuple[str, str, str]] = list(
    {
        case[0]: case
        for case in [
            *((c["statement"], c["note"], c["reason"]) for c in _GAPS["reject"]),
            *_CALL_REJECTS,
            *_eval_cases(),
            *_NUMBER_REJECTS,
        ]
    }.values()
)
GAP_ACCEPTS: list[str] = list(
    dict.fromkeys([*(c["statement"] for c in _GAPS["accept"]), *_CALL_ACCEPTS, *_NUMBER_ACCEPTS])
)

_BEFORE_GAPS = {statement for statement, _ in _GENERATED_REJECTS + _HAND_REJECTS}
_ALLOWED_BEFORE_GAPS = set(_LITERALS_ALLOWED + _HAND_ALLOWED + _GENERATED_ALLOWED)

MUST_REJECT: list[tuple[str, str]] = [
    *_GENERATED_REJECTS,
    *_HAND_REJECTS,
    *((s, note) for s, note, _ in GAP_REJECTS if s not in _BEFORE_GAPS),
]

MUST_ALLOW: list[str] = [
    *_LITERALS_ALLOWED,
    *_HAND_ALLOWED,
    *_GENERATED_ALLOWED,
    *(s for s in GAP_ACCEPTS if s not in _ALLOWED_BEFORE_GAPS),
]

ALL_STATEMENTS: list[str] = [statement for statement, _ in MUST_REJECT] + MUST_ALLOW
