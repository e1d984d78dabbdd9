"""The judge role as scoring builds it, without the Dagster layer."""

from __future__ import annotations

import json
from pathlib import Path

from eval_pipeline.score.judge_layer import judge_layer, judge_role_pins, judge_settings

SPEC = "openai_compatible:judge-model@http://127.0.0.1:9/v1"


def test_offline_has_no_layer_and_no_pins() -> None:
    assert judge_settings("offline") is None
    assert judge_layer("offline") is None
    assert judge_role_pins("offline") is None


def test_role_settings_cache_and_sample_identity_reach_the_judge(tmp_path: Path) -> None:
    roles = json.dumps({"judge": {"max_tokens": 300, "timeout_s": 7}})
    settings = judge_settings(
        SPEC, roles, cache_path=tmp_path / "cache.sqlite", sample_identity="salt/2"
    )
    assert settings is not None
    judge = settings.role("judge")
    assert (judge.model, judge.max_tokens, judge.timeout_s) == ("judge-model", 300, 7)
    assert settings.cache_path == tmp_path / "cache.sqlite"
    assert settings.sample_identity == "salt/2"
    # The pins are what decides the answers: the per-role max_tokens, never the timeout.
    pins = judge_role_pins(SPEC, roles)
    assert pins is not None and pins["max_tokens"] == 300 and "timeout_s" not in pins
    assert pins == judge.pins()
