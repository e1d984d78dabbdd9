"""`eval-pipeline ui-check`: the real browser check where Chromium exists, and its parts."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from eval_pipeline.ops.browser import find_chromium
from eval_pipeline.ops.cli import main, register
from eval_pipeline.ops.ui_check import UiCheckError, run_ui_check, summary_needles

SUMMARY = """### Tier 1
31 questions (4 abstention, scored apart); covered 22, not covered 5, unscored 0

| coverage | 95% CI | task-averaged | median payload tokens (covered) |
|---|---|---|---|
| 81.5% | 66.7% – 96.3% | 83.3% | 369 |

| question type | coverage | n |
|---|---|---|
| knowledge-update | 100.0% | 4 |
| multi-session | 50.0% | 6 |
| **bold** | 1 | 2 |
"""


def test_summary_needles_are_headings_headers_and_first_rows():
    needles = summary_needles(SUMMARY)
    assert needles[0] == "Tier 1"
    for text in ("coverage", "95% CI", "81.5%", "66.7% – 96.3%", "question type"):
        assert text in needles
    assert "knowledge-update" in needles  # first data row
    assert "multi-session" not in needles  # later rows: the first proves the table rendered
    assert len(needles) == len(set(needles))


def test_register_adds_ui_check_with_its_options():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["ui-check", "--port", "3999", "--out", "shots"])
    assert (args.command, args.port, args.out) == ("ui-check", 3999, Path("shots"))
    assert args.func.__name__ == "cmd_ui_check"


def test_missing_chromium_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("eval_pipeline.ops.ui_check.find_chromium", lambda: None)
    with pytest.raises(UiCheckError, match="install-system-deps"):
        run_ui_check(out_dir=tmp_path)
    assert main(["ui-check", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("eval-pipeline: error: ui-check: no Chromium")


@pytest.mark.skipif(
    find_chromium() is None,
    reason="no /usr/bin/chromium: run `bash scripts/install-system-deps.sh` (Debian chromium)",
)
def test_ui_check_in_headless_chromium(tmp_path, monkeypatch):
    """The real thing on a fresh instance: runs the chain (nothing materialized yet), starts
    the webserver, checks both pages in Chromium, stops the server."""
    from eval_pipeline.graph import server as graph_server

    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "state" / "dagster_home"))
    out = tmp_path / "shots"
    try:
        result = run_ui_check(out_dir=out, timeout=60)
    finally:
        graph_server.stop(graph_server.default_data_dir())  # the chain's ArcadeDB JVM

    assert result.ok, [(p.name, p.missing) for p in result.pages]
    assert [p.name for p in result.pages] == ["asset graph", "scored_run"]
    for page in result.pages:
        data = page.screenshot.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
    # Stopped by its pid: the whole process group is gone.
    with pytest.raises(ProcessLookupError):
        os.killpg(result.webserver_pid, 0)
    assert (out / "webserver.log").is_file()
