"""The run report and the comparison are published through the one redacting writer, like the
bundle (issue 28, finding 4: `report.html` was written by a writer of its own and never
redacted; `--label "$OPENAI_API_KEY"` put the key in it three times)."""

from __future__ import annotations

import pytest

from eval_pipeline.runs.compare import compare
from eval_pipeline.runs.report import write_comparison_report, write_run_report
from eval_pipeline_tests.runs.synthetic import outcomes, write_run

KEY = "sk-proj-Q7fT2mZp9LxV4bNc8RsW1yHd6KjG3eUa5oPi0tYr"
GATEWAY_KEY = "Q7fT2mZp9LxV4bNc8RsW1yHd6KjG3eUa5oPi0tYr"  # no key shape: known by value only


def test_a_key_in_a_bundle_never_reaches_its_report(tmp_path, monkeypatch: pytest.MonkeyPatch):
    # A bundle written while the key was not known here (another shell, an older release):
    # the key is in its name and its rows. The report is written with the key known.
    rows = outcomes("q", [True, False, True], tokens=100)
    rows[0]["answer"] = f"the key is {GATEWAY_KEY[::-1]} reversed"
    run_dir = write_run(tmp_path, rows, label=GATEWAY_KEY)
    assert GATEWAY_KEY in run_dir.name
    monkeypatch.setenv("GATEWAY_API_KEY", GATEWAY_KEY)
    html = write_run_report(run_dir).read_text(encoding="utf-8")
    assert "[REDACTED]" in html
    key = GATEWAY_KEY
    for piece in (key, key[::-1], key[8:24], key[::-1][8:24]):
        assert piece not in html


def test_a_key_never_reaches_a_comparison(tmp_path, monkeypatch: pytest.MonkeyPatch):
    base = write_run(tmp_path, outcomes("q", [True] * 4, tokens=50), label=f"base-{KEY}")
    cand = write_run(tmp_path, outcomes("q", [False] * 4, tokens=50), label="cand")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    html = write_comparison_report(compare(base, cand), tmp_path / "cmp")
    for path in (html, html.with_name("comparison.json")):
        assert KEY[8:24] not in path.read_text(encoding="utf-8"), path


def test_a_key_in_the_label_never_names_a_run_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run_dir = write_run(tmp_path, outcomes("q", [True], tokens=10), label=f"try-{KEY}")
    assert "REDACTED" in run_dir.name and KEY[8:16] not in run_dir.name
