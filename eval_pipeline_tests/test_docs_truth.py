"""What the docs and the CLI's own output promise, held (issue 27, part 8): a sample the
sampler would refuse is refused by preflight in one line; `--config` of a missing file and a
graph URL with credentials name their option; the `--sample` cap note is on the stage line
without --verbose; the `next:` hints are commands a shell runs as printed; a plug-in gets its
options from a `--config` file; deepeval says nothing on stdout when it is imported."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline.ops.stages import StageOutcome
from eval_pipeline.run_cli import add_run_options, print_next_steps, rerun_options
from eval_pipeline.scripts import command
from eval_pipeline.settings import REPO_DIR
from eval_pipeline_tests.runs.synthetic import outcomes, write_run
from eval_pipeline_tests.test_cli_truth import NO_KEYS, assert_refused_before_anything_ran


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "--sample", "4", "--floor", "1"], "--sample 4 is below what --floor 1 needs"),
        (["run", "--sample", "8", "--floor", "2"], "use --sample 16 or more"),
        (["run", "--config", "/nope.yaml"], "--config /nope.yaml: cannot read it"),
    ],
)
def test_refused_in_one_line_naming_the_option(chain, argv, says):
    assert_refused_before_anything_ran(chain, chain.cli(*argv, env=NO_KEYS), says)


def test_graph_url_errors_name_the_graph_flag(chain):
    res = chain.cli("graph", "--graph-uri", "bolt://user:pw@127.0.0.1:1", "status")
    assert res.returncode == 2
    assert res.stderr_lines == [
        "eval-pipeline: error: option --graph-uri: the graph URL must not carry credentials; "
        "set EVAL_GRAPH_USER and EVAL_GRAPH_PASSWORD in the environment instead"
    ]


def test_the_cap_note_is_on_the_stage_line():
    note = "--sample 1000 capped to 31 questions (all of them)"
    stage = StageOutcome(asset="goldens", status="ok", seconds=1.0, metadata={"sample_note": note})
    assert stage.progress(2, 9) == f"[2/9] goldens: ok (1.0 s); note: {note}"
    quiet = StageOutcome(asset="goldens", status="ok", seconds=1.0, metadata={"sample_note": ""})
    assert quiet.progress(2, 9) == "[2/9] goldens: ok (1.0 s)"


def _parsed(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_run_options(p)
    return p.parse_args(list(argv))


def test_the_noise_floor_hint_repeats_this_runs_options(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("sample: 2\n")
    args = _parsed(
        "--sample", "3", "--no-canaries", "--arms", "floor", "--repeat", "5",
        "--config", str(config),
    )  # fmt: skip
    # In the flags' order (RunConfig's), --config last and absolute; never --repeat.
    assert rerun_options(args) == [
        "--sample", "3", "--no-canaries", "--arms", "floor", "--config", str(config.resolve()),
    ]  # fmt: skip


def test_next_steps_are_runnable_as_printed(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    runs = tmp_path / "runs"
    first = write_run(runs, outcomes("q", [True, False]), label="first")
    second = write_run(runs, outcomes("q", [True, True]), label="second")
    print_next_steps([second], ["--sample", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "next:"
    commands = [shlex.split(line.split(":", 1)[1]) for line in lines[1:]]
    compare, repeat, ui = commands
    # The previous comparable run is named, not a placeholder.
    assert compare[-3:] == ["compare", str(first), str(second)]
    assert repeat[-5:] == ["run", "--repeat", "3", "--sample", "2"]
    assert ui[0].startswith("DAGSTER_HOME=") and ui[-3:] == [
        "dev",
        "-m",
        "eval_pipeline.definitions",
    ]
    for argv in (compare, repeat, ui[1:]):
        exe = argv[0]
        found = exe if os.sep in exe else shutil.which(exe)
        assert found and os.access(found, os.X_OK), argv  # a shell finds it as printed
    # The printed compare runs, as a shell runs it.
    env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
    ran = subprocess.run(compare, capture_output=True, text=True, env=env, timeout=120)
    assert "Traceback" not in ran.stderr and ran.stdout, ran.stderr


def test_command_is_this_environments_script():
    here = Path(sys.executable).parent / "eval-pipeline"
    argv = command("eval-pipeline")
    assert argv == ["eval-pipeline"] or argv == [str(here)]
    assert Path(argv[0] if os.sep in argv[0] else here).resolve() == here.resolve()


def test_a_plugin_gets_its_options_from_a_config_file(chain, tmp_path):
    """memory_system.py and docs/memory-systems.md: options in a --config file's
    `reconcile: {options: ...}` reach the plug-in's constructor (here refused by it, before
    anything runs, which shows they arrived)."""
    config = tmp_path / "my-memory.yaml"
    config.write_text("reconcile: {options: {collection: evals}}\n")
    res = chain.run("--memory", "consolidating", "--config", str(config), env=NO_KEYS)
    assert_refused_before_anything_ran(chain, res, "collection")


@pytest.mark.slow
def test_deepeval_prints_nothing_on_stdout_when_imported():
    code = "from eval_pipeline.score.judges import _deepeval; _deepeval()"
    ran = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_DIR)},
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == ""
    assert "read only environment" not in ran.stderr
