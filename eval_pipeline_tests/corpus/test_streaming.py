"""The upstream reader streams: memory follows the largest record, not the file."""

from __future__ import annotations

import json
import tracemalloc

from eval_pipeline.corpus.generate import generate
from eval_pipeline.corpus.json_stream import iter_json_array


def _peak_while_reading(path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_json_array(path, chunk_bytes=128 * 1024))
        return count, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_the_file(tmp_path):
    small, large = tmp_path / "small.json", tmp_path / "large.json"
    generate(small, questions=10, sessions_per_question=10, seed=1)
    generate(large, questions=80, sessions_per_question=10, seed=1)
    n_small, peak_small = _peak_while_reading(small)
    n_large, peak_large = _peak_while_reading(large)
    assert (n_small, n_large) == (10, 80)
    size_large = large.stat().st_size
    # Eight times the records, about the same peak: a chunk plus one record, far below the file.
    assert peak_large < 1.3 * peak_small, (peak_small, peak_large)
    assert peak_large < size_large / 5, (peak_large, size_large)


def test_streamed_records_equal_json_load(tmp_path):
    path = tmp_path / "g.json"
    generate(path, questions=12, sessions_per_question=6, seed=3)
    expected = json.loads(path.read_text(encoding="utf-8"))
    for chunk in (4096, 65536, 1 << 20):
        assert [r for _, r in iter_json_array(path, chunk_bytes=chunk)] == expected


def test_tiny_chunks_split_every_token(tmp_path):
    """Chunk boundaries inside strings, escapes, numbers and literals all decode right."""
    records = [{"s": 'a\\"|é東🎉\u2028', "n": [12345, -2.5e-3, True, None]}, 7, "x" * 50]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(records, ensure_ascii=False, indent=1), encoding="utf-8")
    for chunk in range(1, 9):
        assert [r for _, r in iter_json_array(path, chunk_bytes=chunk)] == records
