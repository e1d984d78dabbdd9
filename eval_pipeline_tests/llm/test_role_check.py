"""Model roles checked before a run: one line naming the option, no call made."""

from __future__ import annotations

import pytest

from eval_pipeline.llm.role_check import ModelRoleError, check_model_roles


def test_offline_and_unset_roles_pass() -> None:
    check_model_roles({"--judge": "offline", "--reader": "", "--reconciler-model": " offline "})


def test_a_missing_key_names_the_option_and_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelRoleError) as err:
        check_model_roles({"--reader": "openai:gpt-4o-mini"})
    text = str(err.value)
    assert text.startswith("--reader openai:gpt-4o-mini: ") and "OPENAI_API_KEY" in text
    assert "\n" not in text


def test_a_spec_never_echoes_a_secret_in_its_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelRoleError) as err:
        check_model_roles({"--judge": "openai:gpt-4o-mini@https://u:hunter2@example.org/v1"})
    assert "hunter2" not in str(err.value)
