"""`eval-pipeline run` with `local` roles: one-line exit-2 refusals before anything runs, the
per-role settings from the CLI and from --config, and `eval-pipeline llm status|stop`."""

from __future__ import annotations

import json

import pytest

from eval_pipeline import build, cli
from eval_pipeline.assets.scoring import judge_layer
from eval_pipeline.run_cli import run_config_from_args


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_missing_weights_file_is_one_line_and_exit_2(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", "--judge", f"local:{tmp_path}/none.gguf")
    assert code == 2 and err.count("\n") == 1
    assert "--judge" in err and "none.gguf does not exist" in err


def test_a_file_that_is_not_gguf_is_refused(capsys, tmp_path):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"not a model")
    code, _, err = run_cli(capsys, "run", "--reader", f"local:{fake}")
    assert code == 2 and "--reader" in err and "is not a GGUF file" in err


def test_an_unfetched_catalogue_model_says_how_to_fetch_it(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("EVAL_MODEL_CACHE", str(tmp_path / "empty"))
    code, _, err = run_cli(capsys, "run", "--judge", "local:qwen2.5-coder-0.5b-instruct")
    assert code == 2 and err.count("\n") == 1
    assert "eval-pipeline llm fetch qwen2.5-coder-0.5b-instruct" in err


def test_missing_llama_cpp_python_is_one_line_and_exit_2(capsys, monkeypatch):
    from eval_pipeline.llm import local_server

    monkeypatch.setattr(local_server, "server_version", lambda: None)
    code, _, err = run_cli(capsys, "run", "--judge", "local", "--retrieval-agent", "offline")
    assert code == 2 and err.count("\n") == 1
    assert "--judge local" in err and "llama-cpp-python[server]" in err


def test_a_bad_role_setting_is_refused_by_name(capsys):
    code, _, err = run_cli(capsys, "run", "--judge", "local", "--judge-concurrency", "0")
    assert code == 2 and "--judge-concurrency" in err


def test_role_settings_from_the_cli_and_from_config_reach_the_layers(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        json.dumps(
            {
                "judge": "local",
                "judge-timeout": 300,
                "judge_max_tokens": 200,
                "reader": "local:smollm2-135m-instruct",
                "reader-structured-output": "prompt",
                "reconciler-model": "local",
                "reconciler_concurrency": 2,
            }
        )
    )
    parser = cli.build_parser()
    args = parser.parse_args(
        ["run", "--config", str(config), "--judge-max-tokens", "128", "--reconciler", "llm"]
    )
    run, _ = run_config_from_args(args)
    # The layers each stage builds from its section of the run configuration.
    judge = judge_layer(run.scoring, run.repeat)
    reader = build.retrieval_layer(run.retrieval, run.repeat)
    reconciler = build.reconcile_layer(run.reconcile, run.repeat)
    assert judge is not None and reader is not None and reconciler is not None
    try:
        j = judge.role("judge").config
        assert (j.timeout_s, j.max_tokens, j.concurrency) == (300, 128, 1)  # the CLI wins
        r = reader.role("reader").config
        assert r.structured_output_mode == "prompt" and r.timeout_s == 600
        assert reconciler.role("reconciler").config.concurrency == 2
    finally:
        for layer in (judge, reader, reconciler):
            layer.close()


def test_llm_status_and_stop_with_no_server(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path))  # the real-model session's is elsewhere
    code, out, _ = run_cli(capsys, "llm", "status")
    assert code == 3 and "no local model server running" in out
    code, out, _ = run_cli(capsys, "llm", "stop")
    assert code == 0 and "no local model server running" in out


@pytest.mark.parametrize("name", ["nope", "qwen"])
def test_llm_fetch_refuses_a_name_not_in_the_catalogue(capsys, name):
    with pytest.raises(SystemExit) as raised:
        cli.main(["llm", "fetch", name])
    assert raised.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_server_threads_come_from_the_environment_or_every_core(monkeypatch):
    import os

    from eval_pipeline.llm import LLMConfigError
    from eval_pipeline.llm.local_server import server_threads

    monkeypatch.delenv("EVAL_LOCAL_THREADS", raising=False)
    assert server_threads() == (os.cpu_count() or 2)
    monkeypatch.setenv("EVAL_LOCAL_THREADS", "1")
    assert server_threads() == 1
    monkeypatch.setenv("EVAL_LOCAL_THREADS", "0")
    with pytest.raises(LLMConfigError, match="EVAL_LOCAL_THREADS"):
        server_threads()
