"""Run bundles: complete, atomic, never overwritten, no secret inside."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from eval_pipeline.runs.bundle import BUNDLE_FILES, BundleExists, run_dir_name, write_bundle


def _rows():
    return [{"question_id": "q1", "answer": "blue"}, {"question_id": "q2", "answer": None}]


def test_bundle_files_and_hypotheses_format(tmp_path):
    run = write_bundle(
        tmp_path, manifest={"pins": {}}, rows=_rows(), summary={"tiers": {}}, label="base line"
    )
    assert sorted(p.name for p in run.iterdir()) == sorted(BUNDLE_FILES)
    assert "base-line" in run.name
    hyps = [json.loads(x) for x in (run / "hypotheses.jsonl").read_text().splitlines()]
    assert hyps == [
        {"question_id": "q1", "hypothesis": "blue"},
        {"question_id": "q2", "hypothesis": ""},
    ]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".staging")]


def test_never_overwrites(tmp_path, monkeypatch):
    started = datetime(2026, 1, 1, tzinfo=UTC)
    monkeypatch.setattr("secrets.token_hex", lambda n: "abcdef")
    write_bundle(tmp_path, manifest={}, rows=[], summary={}, started=started)
    with pytest.raises(BundleExists):
        write_bundle(tmp_path, manifest={"other": 1}, rows=[], summary={}, started=started)
    (only,) = [p for p in tmp_path.iterdir()]
    assert json.loads((only / "manifest.json").read_text()) == {}
    assert run_dir_name("x", started) == "20260101T000000Z-x-abcdef"


def test_a_secret_from_the_environment_never_lands_in_the_bundle(tmp_path, monkeypatch):
    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    rows = [{"question_id": "q1", "answer": f"error: bad key {key}"}]
    run = write_bundle(tmp_path, manifest={"judge": {"note": key}}, rows=rows, summary={})
    for path in run.iterdir():
        assert key not in path.read_text()
    assert json.loads((run / "REDACTED").read_text())["redactions"] == 3
