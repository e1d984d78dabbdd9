"""`eval-pipeline run` tells the truth about what failed (issue 12), driven as a user runs it:
bad options refused before anything is launched, a graph server that goes away named as such,
--config with the CLI's own keys, and output a newcomer can act on. The runs go through the
CLI's entry point in this process (`chain_runner`); one bad option through the console script
too, as a shell runs it."""

from __future__ import annotations

import json
import time

import pytest

from eval_pipeline.graph import server
from eval_pipeline_tests.chain_runner import Chain, Ran

# The model keys come from the environment: unset, so the checks that need them refuse.
NO_KEYS = {"OPENAI_API_KEY": None, "ANTHROPIC_API_KEY": None}

BAD_OPTIONS = [
    (
        ["--reconciler", "nope.module:Thing"],
        "--memory nope.module:Thing: cannot import",
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
]


def assert_refused_before_anything_ran(chain: Chain, res: Ran, says: str) -> None:
    assert res.returncode == 2, res.stderr[-2000:]
    lines = res.stderr_lines
    assert len(lines) == 1 and lines[0].startswith("eval-pipeline: error: "), res.stderr
    assert says in lines[0]
    assert "Traceback" not in res.stdout + res.stderr and "secret" not in res.stderr
    # Nothing launched: no Dagster run, no artifact, no graph server started for the state.
    assert not (chain.state / "artifacts").exists() and not (chain.state / "graph").exists()
    if chain.dagster_home.exists():
        instance = chain.instance()
        try:
            assert instance.get_runs() == []
        finally:
            instance.dispose()


@pytest.mark.parametrize(("args", "says"), BAD_OPTIONS)
def test_bad_options_are_refused_before_anything_is_launched(chain, args, says):
    started = time.monotonic()
    res = chain.run(*args, env=NO_KEYS)
    elapsed = time.monotonic() - started
    assert_refused_before_anything_ran(chain, res, says)
    assert elapsed < 20  # seconds, not a wipe and a Dagster traceback later


@pytest.mark.slow
def test_a_bad_option_from_the_shell_is_one_line_and_exit_2(chain):
    """The console script as a shell runs it: exit 2, exactly one `eval-pipeline: error:`
    line, no traceback, nothing launched."""
    res = chain.shell_run("--top-k", "0", env=NO_KEYS, timeout=120)
    assert_refused_before_anything_ran(chain, res, "option --top-k")


@pytest.mark.slow
def test_config_takes_the_cli_keys_and_names_an_unknown_one(chain, tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("upstream: sample\nseed: 2\nrunS-dir: x\n")
    res = chain.run("--config", str(cfg))
    assert res.returncode == 2
    (line,) = res.stderr_lines
    assert "unknown key 'runS-dir'" in line and "runs-dir" in line and "top-k" in line
    cfg.write_text(
        f"upstream: sample\nsample: 12\nseed: 2\nruns-dir: {tmp_path / 'myruns'}\ntop_k: 5\n"
    )
    res = chain.run("--config", str(cfg))
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = res.run_dir
    assert run_dir.parent == tmp_path / "myruns"
    pins = json.loads((run_dir / "manifest.json").read_text())["pins"]
    assert pins["top_k"] == 5 and pins["corpus"]["sample_spec"]["seed"] == 2
    # The output a newcomer can act on: the report, what to do next, the bundle last.
    out = res.stdout.strip().splitlines()
    assert any(line.startswith("report: ") and line.endswith("report.html") for line in out)
    assert any("eval-pipeline compare" in line for line in out)
    assert any("dagster dev" in line for line in out)
    assert "WARNING" not in res.stdout + res.stderr and "Traceback" not in res.stderr
    stage_lines = res.stage_lines
    assert len(stage_lines) == 9 and all(": ok (" in line for line in stage_lines)


@pytest.mark.slow
def test_a_graph_server_that_goes_away_is_named_with_the_stage(chain):
    # An embedded server of this test's own (the reconciler stops it mid-run), not the
    # session's: <state>/graph/arcadedb, the default the plug-in stops.
    own = chain.state / "graph" / "arcadedb"
    try:
        res = chain.run(
            "--reconciler",
            "eval_pipeline_tests.flaky_plugins:StopsTheGraphReconciler",
            graph={"data_dir": str(own)},
        )
    finally:
        server.stop(own)
    assert res.returncode == 1, res.stderr[-3000:]
    last = res.stderr_lines[-1]
    assert last.startswith("eval-pipeline: error: stage reconciled_graph failed: graph server at")
    assert "during reconciled_graph" in last and "ExceptionGroup" not in last
    assert "credentials" not in last  # not the wrong fix
    stages = res.stage_lines
    assert [s.split(":")[0] for s in stages][-1].endswith("reconciled_graph")
    assert stages[-1].split(": ")[1].startswith("failed")
    assert "Traceback" not in res.stdout
    records = [
        json.loads(line)
        for line in (chain.state / "ops" / "failures.jsonl").read_text().splitlines()
    ]
    assert [r["failed_assets"] for r in records] == [["reconciled_graph"]]
