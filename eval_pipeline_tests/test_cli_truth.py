"""`eval-pipeline run` tells the truth about what failed (issue 12), driven as a user runs it:
bad options refused before anything is launched, a graph server that goes away named as such,
--config with the CLI's own keys, and output a newcomer can act on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval_pipeline.settings import REPO_DIR

EXE = str(Path(sys.executable).with_name("eval-pipeline"))


@pytest.fixture
def env(tmp_path):
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("CONFIDENT_API_KEY", "OPENAI_API_KEY")},
        "EVAL_PIPELINE_HOME": str(tmp_path / "state"),
        "DAGSTER_HOME": str(tmp_path / "state" / "dagster_home"),
        "PYTHONPATH": str(REPO_DIR),
    }
    yield env
    subprocess.run([EXE, "graph", "stop"], env=env, capture_output=True, timeout=60)


def run(env, *args, timeout=600):
    return subprocess.run(
        [EXE, "run", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--reconciler", "nope.module:Thing"],
            "--reconciler nope.module:Thing: reconciler 'nope.module:Thing': cannot import",
        ),
        (["--retriever", "eval_pipeline:Nope"], "--retriever eval_pipeline:Nope"),
        (["--upstream", "/no/such/file.json"], "upstream file not found"),
        (["--top-k", "0"], "option --top-k"),
        (["--judge", "openai:gpt-4o-mini"], "OPENAI_API_KEY is not set"),
        (["--reader", "anthropic:claude-haiku-4-5"], "ANTHROPIC_API_KEY is not set"),
        (["--graph-uri", "http://127.0.0.1:7687"], "is not a Bolt address"),
        (["--graph-uri", "bolt://user:secret@127.0.0.1:7687"], "must not carry credentials"),
        (["--reconciler", "llm"], "needs a model"),
        (["--retriever", "graph_agent"], "needs a model"),
    ],
)
def test_bad_options_are_refused_before_anything_is_launched(env, tmp_path, args, says):
    started = time.monotonic()
    res = run(env, *args, timeout=120)
    elapsed = time.monotonic() - started
    assert res.returncode == 2, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("eval-pipeline: error: "), res.stderr
    assert says in lines[0]
    assert "Traceback" not in res.stdout + res.stderr and "secret" not in res.stderr
    assert elapsed < 20  # seconds, not a wipe and a Dagster traceback later
    state = tmp_path / "state"
    # Nothing launched: no Dagster run, no artifact, no graph server started.
    assert not (state / "artifacts").exists() and not (state / "graph").exists()


def test_config_takes_the_cli_keys_and_names_an_unknown_one(env, tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("upstream: sample\nseed: 2\nrunS-dir: x\n")
    res = run(env, "--config", str(cfg), timeout=120)
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()
    assert "unknown key 'runS-dir'" in line and "runs-dir" in line and "top-k" in line
    cfg.write_text(
        f"upstream: sample\nsample: 12\nseed: 2\nruns-dir: {tmp_path / 'myruns'}\ntop_k: 5\n"
    )
    res = run(env, "--config", str(cfg))
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    assert run_dir.parent == tmp_path / "myruns"
    pins = json.loads((run_dir / "manifest.json").read_text())["pins"]
    assert pins["top_k"] == 5 and pins["corpus"]["sample_spec"]["seed"] == 2
    # The output a newcomer can act on: the report, what to do next, the bundle last.
    out = res.stdout.strip().splitlines()
    assert any(line.startswith("report: ") and line.endswith("report.html") for line in out)
    assert any("eval-pipeline compare" in line for line in out)
    assert any("dagster dev" in line for line in out)
    assert "WARNING" not in res.stdout + res.stderr and "Traceback" not in res.stderr
    stage_lines = [line for line in res.stderr.splitlines() if line.startswith("[")]
    assert len(stage_lines) == 9 and all(": ok (" in line for line in stage_lines)


def test_a_graph_server_that_goes_away_is_named_with_the_stage(env, tmp_path):
    res = run(env, "--reconciler", "eval_pipeline_tests.flaky_plugins:StopsTheGraphReconciler")
    assert res.returncode == 1, res.stderr[-3000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("eval-pipeline: error: stage reconciled_graph failed: graph server at")
    assert "during reconciled_graph" in last and "ExceptionGroup" not in last
    assert "credentials" not in last  # not the wrong fix
    stages = [line for line in res.stderr.splitlines() if line.startswith("[")]
    assert [s.split(":")[0] for s in stages][-1].endswith("reconciled_graph")
    assert stages[-1].split(": ")[1].startswith("failed")
    assert "Traceback" not in res.stdout
    records = [
        json.loads(line)
        for line in (tmp_path / "state" / "ops" / "failures.jsonl").read_text().splitlines()
    ]
    assert [r["failed_assets"] for r in records] == [["reconciled_graph"]]
