"""Sample identity in the cache key, replay accounting by origin, old cache files, corrupt ones.

Real layer, real SDKs, the local wire server: nothing of the layer is mocked.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.llm import LLMCacheError, LLMError, LLMLayer
from eval_pipeline.llm.cache import ResponseCache
from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

from .conftest import MakeLayer


def ask(layer: LLMLayer, prompt: str = "Was the answer right?", role: str = "judge") -> Any:
    async def go() -> Any:
        async with layer:
            return await layer.role(role).complete(prompt)

    return asyncio.run(go())


def numbered_replies(wire: WireServer) -> None:
    """Every provider request gets a different answer, so a replay is visible in the text."""
    count = iter(range(1_000_000))
    wire.responder = lambda request: ScriptedReply(text=f"sample {next(count)}")


def test_two_sample_identities_make_two_provider_calls(
    make_layer: MakeLayer, wire: WireServer, tmp_path: Path
) -> None:
    numbered_replies(wire)
    cache = tmp_path / "shared.sqlite3"
    first = ask(make_layer(cache_path=cache, settings={"sample_identity": "salt/1"}))
    second = ask(make_layer(cache_path=cache, settings={"sample_identity": "salt/2"}))
    # One cache file, the same inputs, two identities: two fresh samples, not a replay.
    assert wire.request_count == 2
    assert not first.cached and not second.cached
    assert first.text != second.text
    # Neither is a plain run's entry: a run without identity samples afresh as well.
    plain = make_layer(cache_path=cache)
    assert not ask(plain).cached and wire.request_count == 3
    assert plain.snapshot().roles["judge"].cache_replayed == 0


def test_same_identity_reproduces_and_counts_a_replay_from_another_origin(
    make_layer: MakeLayer, wire: WireServer, tmp_path: Path
) -> None:
    numbered_replies(wire)
    cache = tmp_path / "shared.sqlite3"
    identity = {"sample_identity": "salt/1"}
    original = make_layer(cache_path=cache, settings=identity)
    first = ask(original)
    again = ask(original)  # the same layer: a hit on its own entry, not a replay
    role = original.snapshot().roles["judge"]
    assert (role.calls, role.cache_hits, role.cache_replayed) == (2, 1, 0)

    # A re-run of that repeat: another layer (another origin), the same identity, and knobs
    # that never decide an answer changed (timeout, concurrency): one call in all.
    rerun = make_layer(cache_path=cache, settings=identity, timeout_s=9.0, concurrency=2)
    reproduced = ask(rerun)
    assert wire.request_count == 1
    assert reproduced.cached and reproduced.text == first.text == again.text
    assert rerun.origin != original.origin
    role = rerun.snapshot().roles["judge"]
    assert (role.calls, role.cache_hits, role.cache_replayed, role.provider_requests) == (
        1,
        1,
        1,
        0,
    )
    # What a run manifest stores: the replay, the identity and the origin are all there.
    metadata = rerun.snapshot().to_metadata()
    assert metadata["roles"]["judge"]["cache_replayed"] == 1
    assert metadata["roles"]["judge"]["sample_identity"] == "salt/1"
    assert metadata["sample_identity"] == "salt/1" and metadata["origin"] == rerun.origin
    assert rerun.pins()["sample_identity"] == "salt/1"
    assert make_layer(cache_path=cache).pins()["sample_identity"] is None

    # An explicit origin shared by two layers (one run's stages) is not a replay of itself.
    shared = {"sample_identity": "salt/7", "origin": "dagster-run-1"}
    ask(make_layer(cache_path=cache, settings=shared), "another question")
    same_run = make_layer(cache_path=cache, settings=shared)
    assert ask(same_run, "another question").cached
    assert same_run.snapshot().roles["judge"].cache_replayed == 0


OLD_LAYOUT = (
    "CREATE TABLE responses (key TEXT PRIMARY KEY, provider TEXT NOT NULL, model TEXT,"
    " body TEXT NOT NULL, created_at REAL NOT NULL)"
)


def test_an_old_cache_file_is_migrated_and_its_entries_replay(
    make_layer: MakeLayer, wire: WireServer, tmp_path: Path
) -> None:
    numbered_replies(wire)
    # Fill a cache through the layer, then rewrite the file in the layout of before `origin`,
    # with the same rows: what a cache of an earlier version of the project looks like.
    source = tmp_path / "new.sqlite3"
    ask(make_layer(cache_path=source))
    with sqlite3.connect(source) as conn:
        rows = conn.execute("SELECT key, provider, model, body, created_at FROM responses")
        rows = rows.fetchall()
    old = tmp_path / "old.sqlite3"
    with sqlite3.connect(old) as conn:
        conn.execute(OLD_LAYOUT)
        conn.executemany("INSERT INTO responses VALUES (?, ?, ?, ?, ?)", rows)
    conn.close()

    layer = make_layer(cache_path=old)
    hit = ask(layer)
    assert hit.cached and hit.text == "sample 0" and wire.request_count == 1  # still valid
    role = layer.snapshot().roles["judge"]
    # Written by nobody we know: a replay, never mistaken for this run's own answer.
    assert (role.cache_hits, role.cache_replayed) == (1, 1)
    ask(layer, "a new question")
    layer.close()
    with sqlite3.connect(old) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(responses)")]
        origins = dict(conn.execute("SELECT body, origin FROM responses").fetchall())
    conn.close()
    assert "origin" in columns and len(origins) == 2
    assert sorted(origins.values(), key=str) == sorted([None, layer.origin], key=str)


def test_a_corrupt_cache_file_raises_llm_cache_error(
    make_layer: MakeLayer, wire: WireServer, tmp_path: Path
) -> None:
    path = tmp_path / "llm_cache.sqlite3"
    path.write_bytes(b"this is not a SQLite database, just some bytes " * 100)
    layer = make_layer(cache_path=path)
    with pytest.raises(LLMCacheError) as err:
        ask(layer)
    message = str(err.value)
    assert str(path) in message and "delete or move it" in message.lower()
    assert err.value.path == str(path)
    assert isinstance(err.value, LLMError) and not isinstance(err.value, sqlite3.Error)
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert wire.request_count == 0  # nothing asked on the strength of a broken cache
    role = layer.snapshot().roles["judge"]
    assert (role.failures, role.failures_by_kind) == (1, {"cache": 1})

    # The cache module itself says the same, whichever operation touches the file first.
    with pytest.raises(LLMCacheError, match="Delete or move it"):
        ResponseCache(path).get("any key")
    with pytest.raises(LLMCacheError):
        len(ResponseCache(path))


def test_sample_identity_is_plain_text() -> None:
    from eval_pipeline.llm import LLMSettings

    assert LLMSettings(sample_identity="a1b2/3").sample_identity == "a1b2/3"
    for bad in ("", " salt/1", "salt/1\n"):
        with pytest.raises(ValueError):
            LLMSettings(sample_identity=bad)
