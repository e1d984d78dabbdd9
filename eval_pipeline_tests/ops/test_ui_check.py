"""`eval-pipeline ui-check`: the real browser check where Chromium exists, and its parts.

The two scenarios in a real browser (slowish: each starts a real webserver and Chromium):
`test_ui_check_in_headless_chromium` (success) and
`test_ui_check_failure_scenario_in_headless_chromium` (a malformed upstream launched from the
Launchpad path: only longmemeval_upstream may read Failed, no check EXECUTION_FAILED).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from eval_pipeline.ops.browser import HeadlessChromium, find_chromium
from eval_pipeline.ops.cli import main, register
from eval_pipeline.ops.ui_check import (
    UPSTREAM,
    AssetReading,
    RunInfo,
    UiCheckError,
    failure_run_config,
    isolated_env,
    judge_failure_readings,
    node_status,
    run_failure_scenario,
    run_ui_check,
    should_display_run_failure,
    summary_needles,
    write_truncated_upstream,
)

needs_chromium = pytest.mark.skipif(
    find_chromium() is None,
    reason="no /usr/bin/chromium: run `bash scripts/install-system-deps.sh` (Debian chromium)",
)

CHAIN = [
    "goldens",
    "injected_graph",
    "judge_agreement",
    "longmemeval_upstream",
    "noise_floor",
    "reconciled_graph",
    "retrieval_results",
    "run_comparison",
    "scored_run",
    "session_fixtures",
]

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
    assert args.scenario == "success"  # as before: the failure scenario is asked for
    args = parser.parse_args(["ui-check", "--scenario", "failure", "--run-timeout", "120"])
    assert (args.scenario, args.run_timeout) == ("failure", 120.0)
    with pytest.raises(SystemExit):
        parser.parse_args(["ui-check", "--scenario", "nope"])


# --- the failure scenario's parts ------------------------------------------------------------


def test_truncated_upstream_is_a_cut_json_array(tmp_path):
    path = write_truncated_upstream(tmp_path / "up.json")
    text = path.read_text(encoding="utf-8")
    assert text.lstrip().startswith("[") and len(text) > 1000
    with pytest.raises(ValueError):
        json.loads(text)


def test_failure_run_config_is_what_a_user_types_into_the_launchpad(tmp_path):
    up = write_truncated_upstream(tmp_path / "up.json")
    config = failure_run_config(up, tmp_path / "state")
    pin = hashlib.sha256(up.read_bytes()).hexdigest()
    assert config == {
        "resources": {
            "corpus": {"config": {"upstream": str(up), "sha256": pin}},
            "paths": {"config": {"state_dir": str(tmp_path / "state")}},
        }
    }


def test_isolated_env_is_never_the_users(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", "/home/user/dagster_home")
    monkeypatch.setenv("EVAL_PIPELINE_HOME", "/home/user/state")
    monkeypatch.setenv("EVAL_GRAPH_URI", "bolt://memgraph:7687")
    env = isolated_env(tmp_path / "state")
    assert env["EVAL_PIPELINE_HOME"] == str(tmp_path / "state")
    assert env["DAGSTER_HOME"] == str(tmp_path / "state" / "dagster_home")
    assert "EVAL_GRAPH_URI" not in env  # the scenario's chain never reaches another graph


def test_should_display_run_failure_follows_the_webapp():
    failed = {"id": "r2", "status": "FAILURE", "endTime": 200.0}
    assert should_display_run_failure(failed, None)
    assert not should_display_run_failure({**failed, "status": "SUCCESS"}, None)
    assert not should_display_run_failure(None, None)
    # Materialized by that same run (it failed in a later step): not failed.
    assert not should_display_run_failure(failed, {"runId": "r2", "timestamp": "1000"})
    # A materialization newer than the failed run (ms vs s): not failed.
    assert not should_display_run_failure(failed, {"runId": "r9", "timestamp": "300000"})
    assert should_display_run_failure(failed, {"runId": "r1", "timestamp": "100000"})


def test_node_status_reads_the_status_line():
    node = "goldens\nLatest event\nAsset checks\n0 / 1 Passed\nAutomation\n–\n{}\nDec 1"
    assert node_status(node.format("Failed")) == "Failed"
    assert node_status(node.format("Failed, Overdue")) == "Failed"
    assert node_status(node.format("Never materialized")) == "Never materialized"
    assert node_status(node.format("Materialized")) == "Materialized"
    assert node_status(node.format("Materializing...")) == "Materializing"
    assert node_status("goldens\nLoading...") == "Loading"
    assert node_status("goldens").startswith("unknown")


def _readings(failed: set[str], check_status: str) -> dict[str, AssetReading]:
    return {
        key: AssetReading(
            key=key,
            dom="Failed" if key in failed else "Never materialized",
            graphql_failed=key in failed,
            latest_run_status="FAILURE" if key in failed else None,
            checks={f"{key}_check": check_status},
        )
        for key in CHAIN
    }


def test_judge_names_every_failed_asset_and_execution_failed_check():
    """What the scenario reports for eval_chain as one run (the state this check was built
    against): every asset red, every check EXECUTION_FAILED — each one named, but for the
    failed upstream's own checks, which are part of its failed stage."""
    runs = [RunInfo("a" * 36, "eval_chain", "FAILURE")]
    problems = judge_failure_readings(_readings(set(CHAIN), "EXECUTION_FAILED"), runs)
    assert len(problems) == 2, problems
    assert problems[0].startswith(
        f"{len(CHAIN) - 1} other asset(s) read Failed: goldens, injected_graph"
    )
    assert problems[1].startswith(
        f"{len(CHAIN) - 1} check(s) of other assets read EXECUTION_FAILED: goldens:goldens_check"
    )
    assert f"{UPSTREAM}:" not in problems[1]


def test_judge_accepts_only_the_upstream_failed():
    runs = [RunInfo("a" * 36, "eval_chain", "FAILURE"), RunInfo("b" * 36, "x", "FAILURE")]
    readings = _readings({UPSTREAM}, "NOT_EVALUATED")
    assert judge_failure_readings(readings, runs) == []
    # Nothing failed at all: the malformed file was not noticed.
    problems = judge_failure_readings(_readings(set(), "NOT_EVALUATED"), runs[:0])
    assert problems[0].startswith("no run failed")
    assert f"{UPSTREAM} does not read Failed (it reads Never materialized)" in problems
    # The node and the page's own data must tell the same story.
    readings[UPSTREAM].graphql_failed = False
    assert "disagree on longmemeval_upstream" in " ".join(judge_failure_readings(readings, runs))


# --- in a real browser -----------------------------------------------------------------------


@needs_chromium
@pytest.mark.browser
def test_playwright_drives_debian_chromium_and_downloads_nothing(tmp_path, monkeypatch):
    """Playwright launches /usr/bin/chromium (executable_path): with its browser directory
    empty, it still works, and nothing is put there."""
    browsers = tmp_path / "ms-playwright"
    browsers.mkdir()
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(browsers))
    with HeadlessChromium() as browser:
        browser.page.set_content("<h1>eval-pipeline</h1><button>Skip</button>")
        assert browser.text().splitlines()[0] == "eval-pipeline"
        assert browser.click_text("Skip") and not browser.click_text("absent")
        shot = browser.screenshot(tmp_path / "page.png")
        version = browser.page.context.browser.version
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    debian = subprocess.run(
        [find_chromium(), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert version.split(".")[0] in debian  # the same major version: Debian's build
    assert list(browsers.iterdir()) == []


def test_missing_chromium_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("eval_pipeline.ops.ui_check.find_chromium", lambda: None)
    with pytest.raises(UiCheckError, match="install-system-deps"):
        run_ui_check(out_dir=tmp_path)
    assert main(["ui-check", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("eval-pipeline: error: ui-check: no Chromium")


@needs_chromium
@pytest.mark.browser
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


@needs_chromium
@pytest.mark.browser
def test_ui_check_failure_scenario_in_headless_chromium(tmp_path, monkeypatch):
    """A truncated upstream file launched as the Launchpad launches eval_chain, in the
    scenario's own temporary instance (webserver + daemon): in the lineage only
    longmemeval_upstream reads Failed, every other asset reads as not failed, and no check of
    another asset reads EXECUTION_FAILED (the upstream's own could not run in its failed
    stage). The user's DAGSTER_HOME and state are never touched."""
    user_state = tmp_path / "user_state"
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(user_state))
    monkeypatch.setenv("DAGSTER_HOME", str(user_state / "dagster_home"))
    out = tmp_path / "shots"
    result = run_failure_scenario(find_chromium(), out, timeout=90, run_timeout=600)

    report = {
        "problems": result.problems,
        "failed": result.failed_assets,
        "execution_failed": result.execution_failed_checks,
        "runs": [(r.job, r.status) for r in result.runs],
    }
    assert result.ok, report
    assert result.failed_assets == [UPSTREAM], report
    assert {c.split(":")[0] for c in result.execution_failed_checks} <= {UPSTREAM}, report
    assert any(r.status == "FAILURE" for r in result.runs)
    assert sorted(result.readings) == CHAIN
    for key, reading in result.readings.items():
        assert reading.dom is not None, f"{key}: no node drawn in the lineage"
        if key != UPSTREAM:
            assert reading.dom != "Failed" and not reading.graphql_failed, (key, reading)
    for shot in (result.screenshot, result.closeup):
        data = shot.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
    # Both servers stopped by their process groups; the logs stay beside the screenshots.
    for pid in (result.webserver_pid, result.daemon_pid):
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    assert (out / "webserver.log").is_file() and (out / "daemon.log").is_file()
    assert not user_state.exists()  # nothing of the user's was created or used
