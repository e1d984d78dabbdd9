"""Injection into the real embedded server: exact counts, schema, leaks, crash recovery."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from eval_pipeline.corpus import limits
from eval_pipeline.graph import checks, server
from eval_pipeline.graph.batched_writes import MAX_ROW_BYTES
from eval_pipeline.graph.errors import FixtureError, GraphUnavailableError
from eval_pipeline.graph.inject import (
    expected_counts,
    graph_counts,
    inject_fixtures,
    session_rows,
)
from eval_pipeline.graph.store import GraphStore
from eval_pipeline_tests.graph.conftest import write_fixtures


def test_injection_has_exact_counts_and_schema(store: GraphStore, fixtures_file: Path) -> None:
    report = inject_fixtures(store, fixtures_file)
    # 24 sessions with 0,1,2,3 turns in turn; 5 questions; 1 or 2 questions per session.
    expected = {
        "sessions": 24,
        "turns": 36,
        "questions": 5,
        "has_turn": 36,
        "next": 18,
        "haystack": 36,
    }
    assert report.counts.model_dump() == expected
    assert graph_counts(store)[0].model_dump() == expected
    assert report.nodes == 24 + 36 + 5 + 2 and report.relationships == 36 + 18 + 36
    assert store.counts()["nodes"] == report.nodes
    assert report.server_version.startswith("ArcadeDB ") and report.backend == "arcadedb"

    # NEXT links consecutive turns of one session; timestamps order the turns.
    assert store.read(
        "MATCH (a:Turn)-[:NEXT]->(b:Turn) WHERE a.session_id <> b.session_id "
        "OR b.index <> a.index + 1 OR b.timestamp <= a.timestamp RETURN count(*) AS bad"
    ) == [{"bad": 0}]
    turn = store.read(
        "MATCH (s:Session {session_id: 'sess_0003'})-[:HAS_TURN]->(t:Turn) "
        "RETURN t ORDER BY t.index DESC LIMIT 1"
    )[0]["t"]
    assert turn == {
        "turn_id": "sess_0003#2",
        "session_id": "sess_0003",
        "role": "user",
        "text": "turn 2 of sess_0003: café | naïve 日本語",
        "index": 2,
        "timestamp": "2023-05-30T23:40:02",
    }
    session = store.read("MATCH (s:Session {session_id: 'sess_0000'}) RETURN s")[0]["s"]
    assert session == {
        "session_id": "sess_0000",
        "date": "2023/05/30 (Tue) 23:40",
        "started_at": "2023-05-30T23:40:00",
        "reconcile_status": "pending",
    }
    haystack = store.read(
        "MATCH (q:Question {question_id: 'q1'})-[:HAYSTACK]->(s:Session) "
        "RETURN s.session_id AS sid ORDER BY sid"
    )
    rows = session_rows(fixtures_file)
    assert [r["sid"] for r in haystack] == sorted(
        r["session_id"] for r in rows if "q1" in r["question_ids"]
    )

    assert checks.evidence_markers(store) == []
    assert checks.counts_report(store, fixtures_file)[0] == []
    matches, details = checks.fingerprint_report(store, fixtures_file)
    assert matches and details["graph_fingerprint"] == report.fingerprint


def test_fulltext_index_answers_over_bolt(store: GraphStore, fixtures_file: Path) -> None:
    inject_fixtures(store, fixtures_file)
    rows = store.read(
        "CALL db.index.fulltext.queryNodes('Turn[text]', $q) YIELD node, score "
        "RETURN node.turn_id AS turn_id, score",
        {"q": "sess_0007"},
    )
    assert {r["turn_id"] for r in rows} == {"sess_0007#0", "sess_0007#1", "sess_0007#2"}
    hits = store.fulltext_search("café", limit=5)
    assert len(hits) == 5 and all(h["score"] > 0 for h in hits)


def test_reinjection_replaces_the_graph(store: GraphStore, tmp_path: Path) -> None:
    inject_fixtures(store, write_fixtures(tmp_path / "big.jsonl", sessions=30))
    small = write_fixtures(tmp_path / "small.jsonl", sessions=6)
    report = inject_fixtures(store, small)
    assert graph_counts(store)[0] == report.counts
    assert report.counts.sessions == 6


def test_fingerprint_follows_what_reaches_the_graph(store: GraphStore, tmp_path: Path) -> None:
    path = write_fixtures(tmp_path / "fixtures.jsonl")
    inject_fixtures(store, path)
    lines = path.read_text(encoding="utf-8").splitlines()

    # holds_evidence is corpus bookkeeping: changing it leaves the graph current.
    rows = [json.loads(line) for line in lines]
    rows[1]["holds_evidence"] = ["q1"]
    path.write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)), encoding="utf-8")
    assert checks.fingerprint_report(store, path)[0] is True

    rows[3]["turns"][0]["content"] = "changed"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert checks.fingerprint_report(store, path)[0] is False


def test_evidence_leak_is_caught(store: GraphStore, fixtures_file: Path) -> None:
    inject_fixtures(store, fixtures_file)
    store.write("MATCH (t:Turn {turn_id: 'sess_0001#0'}) SET t.has_answer = true")
    store.write("MATCH (q:Question {question_id: 'q0'}) SET q.answer_session_ids = ['sess_0000']")
    store.write(
        "MATCH (s:Session {session_id: 'sess_0002'}) CREATE (s)-[:HAS_TURN "
        "{holdsEvidence: true}]->(:Evidence)"
    )
    found = checks.evidence_markers(store)
    assert "node property has_answer" in found
    assert "node property answer_session_ids" in found
    assert "relationship property holdsEvidence" in found
    assert "label Evidence" in found


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.update(session_id="bad id!"), "invalid session id"),
        (lambda r: r.update(session_id="x" * 129), "invalid session id"),
        (lambda r: r["turns"].append(dict(r["turns"][0])), "repeated turn index"),
        (lambda r: r.update(extra_field=1), "extra_field"),
        (lambda r: r["turns"][0].update(has_answer=True), "has_answer"),
        # Issue 28, findings 5 and 7: refused before the wipe, not by the write after it.
        (
            lambda r: r["turns"][0].update(content="x" * (limits.MAX_TURN_CHARS + 1)),
            "turn sess_0003#0: 200,005 characters, over the limit of 200,000 per turn",
        ),
        (
            lambda r: r.update(
                turns=[
                    {"role": "user", "content": "t", "index": i}
                    for i in range(limits.MAX_SESSION_TURNS + 1)
                ]
            ),
            "2,001 turns, over the limit of 2,000 per session",
        ),
        (lambda r: r["turns"][0].update(content="a \ud800 b"), "lone surrogate .U.D800"),
        (lambda r: r.update(question_ids=_nested(500)), "nested deeper than 32 levels"),
    ],
)
def test_bad_fixtures_are_refused_before_the_wipe(
    store: GraphStore, fixtures_file: Path, tmp_path: Path, mutate, message: str
) -> None:
    inject_fixtures(store, fixtures_file)
    before = store.counts()
    rows = [json.loads(line) for line in fixtures_file.read_text().splitlines()]
    mutate(rows[3])
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(FixtureError, match=message) as err:
        inject_fixtures(store, bad)
    assert ":4:" in str(err.value)  # names the line
    assert store.counts() == before


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def test_a_session_too_large_for_one_bolt_message_is_refused_before_the_wipe(
    store: GraphStore, fixtures_file: Path, tmp_path: Path
) -> None:
    """Every text within its limits, but haystack ids enough to make the row over
    MAX_ROW_BYTES: the validation pass measures the row as the write would (issue 28,
    finding 5: the probe's oversized input wiped 535 nodes down to 76 before it failed)."""
    inject_fixtures(store, fixtures_file)
    before = store.counts()
    rows = [json.loads(line) for line in fixtures_file.read_text().splitlines()]
    rows[3]["question_ids"] = [f"q{i:0100d}" for i in range(MAX_ROW_BYTES // 100)]
    big = tmp_path / "big.jsonl"
    big.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(FixtureError, match=r"session 'sess_0003': one row is 1\d\.\d MB, over"):
        inject_fixtures(store, big)
    assert store.counts() == before


def test_duplicate_session_is_refused(tmp_path: Path) -> None:
    path = write_fixtures(tmp_path / "dup.jsonl", sessions=3)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[0]]) + "\n")
    with pytest.raises(FixtureError, match="duplicate session id 'sess_0000'"):
        session_rows(path)


@pytest.mark.slow  # restarts or kills a graph server, or runs for seconds
def test_killed_server_gives_a_clear_error_and_a_rerun_recovers(
    store: GraphStore, graph_dir: Path, tmp_path: Path
) -> None:
    path = write_fixtures(tmp_path / "crash.jsonl", sessions=3000, turns_cycle=7, text_repeat=8)
    expected = expected_counts(session_rows(path))
    killed = threading.Event()

    def kill_when_loading() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                n = store.read("MATCH (s:Session) RETURN count(s) AS n", timeout_s=5)[0]["n"]
            except Exception:
                n = 0
            if n >= 200:
                killed.set()
                server.kill(graph_dir)
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_when_loading)
    killer.start()
    try:
        with pytest.raises(GraphUnavailableError, match="does not answer"):
            inject_fixtures(store, path, batch_turns=40)
    finally:
        killer.join()
    assert killed.is_set()

    report = inject_fixtures(store, path)  # restarts the server, recovers, starts over
    assert report.counts == expected
    assert graph_counts(store)[0] == expected
    assert checks.fingerprint_report(store, path)[0] is True


def test_streamed_injection_in_small_interleaved_batches_is_exact(
    store: GraphStore, fixtures_file: Path
) -> None:
    """Issue 18: rows are streamed and each turn-count group is sent as soon as it holds a
    batch, so the groups interleave; the graph is the same, whatever the batch size."""
    from eval_pipeline.graph.fingerprint import fixtures_fingerprint
    from eval_pipeline.graph.inject import summarize

    rows = session_rows(fixtures_file)
    summary = summarize(iter(rows))
    assert summary.counts == expected_counts(rows)
    assert summary.fingerprint == fixtures_fingerprint(rows)
    assert summary.questions == sorted({q for r in rows for q in r["question_ids"]})

    contents = []
    for batch_turns in (1, 2, 7, 10_000):
        report = inject_fixtures(store, fixtures_file, batch_turns=batch_turns)
        assert report.counts == summary.counts and report.fingerprint == summary.fingerprint
        assert checks.counts_report(store, fixtures_file)[0] == []
        assert checks.fingerprint_report(store, fixtures_file)[0]
        contents.append(
            store.read(
                "MATCH (s:Session)-[:HAS_TURN]->(t:Turn) OPTIONAL MATCH (t)-[:NEXT]->(n:Turn) "
                "RETURN s.session_id AS s, t.turn_id AS t, t.text AS text, n.turn_id AS next "
                "ORDER BY t",
                max_rows=10_000,
            )
        )
    assert all(c == contents[0] for c in contents) and len(contents[0]) == summary.counts.turns
    assert report.batches >= 1
