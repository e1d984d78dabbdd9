"""Question batches: keys, the pinned assignment, the batch's fixtures, the merged usage."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from eval_pipeline.corpus.batches import (
    BatchKey,
    batch_fixture_rows,
    batch_index,
    batch_keys,
    partitioning_pin,
    write_batch_fixtures,
)
from eval_pipeline.graph.errors import FixtureError
from eval_pipeline.llm.accounting import merge_usage
from eval_pipeline.preflight import PreflightError, check_batches


def test_keys_round_trip_and_bad_keys_are_refused():
    for k in (1, 2, 16):
        keys = batch_keys(k)
        assert [b.index for b in keys] == list(range(1, k + 1))
        assert all(BatchKey.parse(b.key) == b for b in keys)
    assert BatchKey(index=2, batches=4).key == "batch-02-of-04"
    for bad in ("batch-3-of-2", "batch-03-of-02", "b1of2", "batch-00-of-02", ""):
        with pytest.raises(ValueError):
            BatchKey.parse(bad)
    with pytest.raises(ValueError, match="between 1 and"):
        batch_keys(0)


def test_assignment_is_by_namespace_content_stable_and_roughly_balanced():
    ids = [f"q{i:05d}" for i in range(2000)]
    first = [batch_index(q, 4) for q in ids]
    # Pinned by content: the same question lands in the same batch whatever surrounds it.
    assert first == [batch_index(q, 4) for q in ids]
    assert [batch_index(q, 4) for q in reversed(ids)] == list(reversed(first))
    counts = Counter(first)
    assert set(counts) == {1, 2, 3, 4}
    assert all(400 <= n <= 600 for n in counts.values()), counts
    # One batch holds everything; tier 2 is one namespace, so one batch.
    assert {batch_index(q, 1) for q in ids} == {1}
    assert len({batch_index(f"t2-scenario-{i}", 8) for i in range(50)}) == 1


def test_batch_fixture_rows_keep_only_the_batchs_questions():
    two = BatchKey(index=1, batches=2)
    mine = next(q for q in (f"q{i}" for i in range(100)) if two.holds(q))
    theirs = next(q for q in (f"q{i}" for i in range(100)) if not two.holds(q))
    rows = [
        {"session_id": "shared", "question_ids": [mine, theirs], "holds_evidence": [theirs]},
        {"session_id": "only-theirs", "question_ids": [theirs], "holds_evidence": [theirs]},
        {"session_id": "only-mine", "question_ids": [mine], "holds_evidence": [mine]},
    ]
    out = list(batch_fixture_rows(rows, two))
    assert [r["session_id"] for r in out] == ["shared", "only-mine"]
    assert out[0]["question_ids"] == [mine] and out[0]["holds_evidence"] == []
    assert rows[0]["question_ids"] == [mine, theirs]  # the input is left as it was


def test_write_batch_fixtures_streams_and_names_a_bad_line(tmp_path):
    src = tmp_path / "fixtures.jsonl"
    src.write_text(
        "\n".join(json.dumps({"session_id": f"s{i}", "question_ids": [f"q{i}"]}) for i in range(50))
        + "\n"
    )
    parts = [write_batch_fixtures(src, tmp_path / f"b{b.index}.jsonl", b) for b in batch_keys(3)]
    assert sum(parts) == 50
    seen = [
        json.loads(line)["session_id"]
        for b in batch_keys(3)
        for line in (tmp_path / f"b{b.index}.jsonl").read_text().splitlines()
    ]
    assert sorted(seen) == sorted(f"s{i}" for i in range(50))
    src.write_text(src.read_text() + "{not json\n")
    with pytest.raises(FixtureError, match=r"fixtures.jsonl:51: invalid JSON"):
        write_batch_fixtures(src, tmp_path / "x.jsonl", BatchKey(index=1, batches=2))


def test_partitioning_pin_and_preflight():
    assert partitioning_pin(2)["batches"] == 2
    assert partitioning_pin(1) != partitioning_pin(2)
    check_batches(1, "bolt://memgraph:7687")
    check_batches(3, None)
    check_batches(2, "bolt://memgraph-{batch}:7687")
    with pytest.raises(PreflightError, match=r"--batches 2 needs one graph instance per batch"):
        check_batches(2, "bolt://memgraph:7687")
    with pytest.raises(PreflightError, match="--batches must be between 1 and"):
        check_batches(0, None)


def _snapshot(calls: int, cost: float | None, total_s: float, max_s: float) -> dict:
    return {
        "prices_as_of": "2026-01-01",
        "roles": {
            "reader": {
                "role": "reader",
                "provider": "openai",
                "model": "m",
                "calls": calls,
                "cache_hits": 1,
                "failures_by_kind": {"timeout": 1},
                "cost_usd": cost,
                "latency": {"count": calls, "total_s": total_s, "max_s": max_s, "p50_s": 0.1},
            }
        },
        "total_cost_usd": cost,
        "sample_identity": "s/1",
        "origin": "o",
    }


def test_merge_usage_sums_what_sums_and_leaves_percentiles_unmerged():
    assert merge_usage([None]) is None
    one = _snapshot(2, 0.5, 1.0, 0.7)
    assert merge_usage([one]) is one
    merged = merge_usage([one, None, _snapshot(3, 0.25, 2.0, 0.9)])
    reader = merged["roles"]["reader"]
    assert reader["calls"] == 5 and reader["cache_hits"] == 2
    assert reader["failures_by_kind"] == {"timeout": 2}
    assert reader["cost_usd"] == 0.75 and merged["total_cost_usd"] == 0.75
    assert reader["latency"] == {
        "count": 5,
        "total_s": 3.0,
        "max_s": 0.9,
        "mean_s": 0.6,
        "p50_s": None,
        "p95_s": None,
    }
    assert merged["batches"] == 3 and merged["sample_identity"] == "s/1"
    # An unknown cost anywhere is an unknown total, never a smaller one.
    unpriced = merge_usage([one, _snapshot(1, None, 0.1, 0.1)])
    assert unpriced["total_cost_usd"] is None and unpriced["roles"]["reader"]["cost_usd"] is None
