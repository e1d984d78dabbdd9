"""Run bundles: complete, atomic, never overwritten, no secret inside."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from eval_pipeline.runs.bundle import BUNDLE_FILES, BundleExists, run_dir_name, write_bundle
from eval_pipeline.score.summary import summarize
from eval_pipeline_tests.runs.synthetic import manifest, row


def _rows():
    rows = [row("q1", True), row("q2", False), row("t2", True, tier=2)]
    rows[0]["answer"], rows[1]["answer"] = "blue", None
    return rows


def _write(tmp_path, rows, **kw):
    return write_bundle(tmp_path, manifest=manifest(), rows=rows, summary=summarize(rows), **kw)


def test_bundle_files_and_hypotheses_format(tmp_path):
    run = _write(tmp_path, _rows(), label="base line")
    assert sorted(p.name for p in run.iterdir()) == sorted(BUNDLE_FILES)
    assert "base-line" in run.name
    hyps = [json.loads(x) for x in (run / "hypotheses.jsonl").read_text().splitlines()]
    # Tier 1 only (the upstream scorer knows no other question); no answer: empty.
    assert hyps == [
        {"schema_version": 1, "question_id": "q1", "hypothesis": "blue"},
        {"schema_version": 1, "question_id": "q2", "hypothesis": ""},
    ]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".staging")]


def test_never_overwrites(tmp_path, monkeypatch):
    started = datetime(2026, 1, 1, tzinfo=UTC)
    monkeypatch.setattr("secrets.token_hex", lambda n: "abcdef")
    first = _write(tmp_path, [], started=started)
    before = (first / "manifest.json").read_text()
    with pytest.raises(BundleExists):
        _write(tmp_path, _rows(), started=started)
    (only,) = [p for p in tmp_path.iterdir()]
    assert (only / "manifest.json").read_text() == before
    assert (only / "results.jsonl").read_text() == ""  # the first bundle's: no question
    assert run_dir_name("x", started) == "20260101T000000Z-x-abcdef"


def test_a_secret_from_the_environment_never_lands_in_the_bundle(tmp_path, monkeypatch):
    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    rows = [row("q1", True)]
    rows[0]["answer"] = f"error: bad key {key}"
    run = write_bundle(tmp_path, manifest=manifest(chain=key), rows=rows, summary=summarize(rows))
    for path in run.iterdir():
        assert key not in path.read_text()
    # manifest.json, results.jsonl and hypotheses.jsonl each held it once.
    assert json.loads((run / "REDACTED").read_text())["redactions"] == 3
