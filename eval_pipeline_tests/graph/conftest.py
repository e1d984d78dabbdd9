"""The session's one embedded ArcadeDB (`graph_dir`, root conftest): the graph tests share a
database of their own on it (`session_store`).

Tests that stop or kill the server leave it to the next `store` fixture use, which calls
`ensure_running()` and so restarts it (that restart is itself under test).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.graph.store import GraphStore
from eval_pipeline_tests.conftest import HEAP, fresh_database


def write_fixtures(
    path: Path, sessions: int = 24, questions: int = 5, turns_cycle: int = 4, text_repeat: int = 1
) -> Path:
    """A small fixtures.jsonl: sessions with 0..turns_cycle-1 turns, shared haystacks,
    `|` and non-ASCII in the text, and `holds_evidence` set on some sessions (it must never
    reach the graph)."""
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(sessions):
            sid = f"sess_{i:04d}"
            turns = [
                {
                    "role": "user" if k % 2 == 0 else "assistant",
                    "content": (f"turn {k} of {sid}: café | naïve 日本語 " * text_repeat).strip(),
                    "index": k,
                }
                for k in range(i % turns_cycle)
            ]
            qids = [f"q{(i + j) % questions}" for j in range(1 + i % 2)]
            fixture = {
                "session_id": sid,
                "date": "2023/05/30 (Tue) 23:40",
                "started_at": "2023-05-30T23:40:00",
                "turns": turns,
                "question_ids": qids,
                "holds_evidence": qids[:1] if i % 5 == 0 else [],
            }
            fh.write(json.dumps(fixture, ensure_ascii=False) + "\n")
    return path


@pytest.fixture(scope="session")
def session_store(graph_dir: Path) -> Iterator[GraphStore]:
    store = GraphStore(data_dir=str(graph_dir), database=fresh_database("graph"), heap=HEAP)
    store.ensure_running()
    yield store
    store.close()


@pytest.fixture
def store(session_store: GraphStore) -> GraphStore:
    session_store.ensure_running()  # restarts the server if a previous test stopped it
    return session_store


@pytest.fixture
def fixtures_file(tmp_path: Path) -> Path:
    return write_fixtures(tmp_path / "fixtures.jsonl")
