"""Role configuration and the CLI form PROVIDER:MODEL[@BASE_URL]."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.llm import LLMConfigError, LLMSettings, RoleConfig, parse_provider_spec
from eval_pipeline.llm.config import ROLE_NAMES


@pytest.mark.parametrize(
    ("spec", "provider", "model", "base_url"),
    [
        ("offline", "offline", None, None),
        ("  OFFLINE ", "offline", None, None),
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", None),
        ("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", None),
        (
            "openai_compatible:llama3@http://localhost:8000/v1",
            "openai_compatible",
            "llama3",
            "http://localhost:8000/v1",
        ),
        # Ollama tags contain ':'; the trailing slash is dropped.
        (
            "openai_compatible:llama3:8b@http://127.0.0.1:11434/v1/",
            "openai_compatible",
            "llama3:8b",
            "http://127.0.0.1:11434/v1",
        ),
        (
            "openai:gpt-4o@https://gateway.example/v1",
            "openai",
            "gpt-4o",
            "https://gateway.example/v1",
        ),
    ],
)
def test_parse_provider_spec_accepts_the_cli_forms(
    spec: str, provider: str, model: str | None, base_url: str | None
) -> None:
    parsed = parse_provider_spec(spec)
    assert (parsed.provider, parsed.model, parsed.base_url) == (provider, model, base_url)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("", "empty provider spec"),
        ("gpt-4o-mini", "provider 'gpt-4o-mini': unknown name (a model spec is PROVIDER:MODEL"),
        ("azure:gpt-4o", "provider 'azure': unknown name (in 'azure:gpt-4o')"),
        ("openai", "needs a model"),
        ("openai:", "needs a model"),
        ("offline:gpt-4o", "takes no model"),
        ("openai_compatible:llama3", "needs a base URL"),
        ("openai_compatible:llama3@localhost:8000", "must start with http"),
        ("openai_compatible:@http://localhost:8000/v1", "needs a model"),
        ("openai_compatible:m@http://localhost:8000/v1?key=abc", "query string"),
    ],
)
def test_parse_provider_spec_explains_what_is_wrong(spec: str, says: str) -> None:
    with pytest.raises(LLMConfigError) as info:
        parse_provider_spec(spec)
    assert says in str(info.value)


def test_credentials_in_a_base_url_are_refused_and_not_echoed() -> None:
    with pytest.raises(LLMConfigError) as info:
        parse_provider_spec("openai_compatible:m@http://user:hunter2secret@localhost:8000/v1")
    assert "credentials" in str(info.value)
    assert "hunter2secret" not in str(info.value)


def test_a_key_pasted_as_api_key_env_is_refused_without_echo() -> None:
    with pytest.raises(ValueError) as info:
        RoleConfig(provider="openai", model="gpt-4o", api_key_env="sk-proj-pastedKEY12345")
    assert "NAME of an environment variable" in str(info.value)
    assert "pastedKEY12345" not in str(info.value)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"provider": "offline", "model": "gpt-4o"}, "takes no model"),
        ({"provider": "openai"}, "needs a model"),
        ({"provider": "openai_compatible", "model": "m"}, "needs a base_url"),
        ({"provider": "anthropic", "model": "claude-haiku-4-5", "temperature": 0.0}, "temperature"),
        ({"provider": "openai", "model": "m", "concurrency": 0}, "concurrency"),
        ({"provider": "openai", "model": "m", "input_usd_per_mtok": 1.0}, "both"),
        ({"provider": "openai", "model": "m", "api_kee": "x"}, "api_kee"),
    ],
)
def test_role_config_rejects_inconsistent_fields(fields: dict, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        RoleConfig(**fields)


def test_temperature_defaults_per_provider() -> None:
    assert RoleConfig.from_spec("openai:gpt-4o-mini").temperature == 0.0
    assert RoleConfig.from_spec("anthropic:claude-haiku-4-5").temperature is None
    # An explicit None means "do not send" (models that only accept their default).
    assert RoleConfig.from_spec("openai:gpt-5", temperature=None).temperature is None


def test_settings_fill_missing_roles_offline_and_pin_without_secrets() -> None:
    settings = LLMSettings.from_specs(
        {"judge": "openai:gpt-4o-mini", "reconciler": "openai_compatible:qwen@http://h:1/v1"},
        role_overrides={"judge": {"max_tokens": 64, "api_key_env": "JUDGE_KEY"}},
    )
    assert set(settings.roles) == set(ROLE_NAMES)
    assert settings.role("reader").is_offline
    assert settings.role("judge").max_tokens == 64
    pins = settings.pins()
    assert pins["judge"] == {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "endpoint": "https://api.openai.com/v1",
        "temperature": 0.0,
        "max_tokens": 64,
        "structured_output": "json_schema",
    }
    assert pins["reader"]["provider"] == "offline"
    assert "JUDGE_KEY" not in str(pins)  # the env var name is not an answer-deciding pin


def test_unknown_role_is_refused() -> None:
    with pytest.raises(LLMConfigError, match="unknown role"):
        LLMSettings.from_specs({"grader": "offline"})


_model_names = st.from_regex(r"[a-z][a-z0-9.\-]{0,20}(:[a-z0-9]{1,6})?", fullmatch=True)


@given(
    provider=st.sampled_from(["openai", "anthropic", "openai_compatible"]),
    model=_model_names,
    port=st.integers(1, 65535),
)
def test_spec_round_trips(provider: str, model: str, port: int) -> None:
    base_url = f"http://127.0.0.1:{port}/v1" if provider == "openai_compatible" else None
    config = RoleConfig(provider=provider, model=model, base_url=base_url)
    again = RoleConfig.from_spec(config.spec)
    assert (again.provider, again.model, again.base_url) == (provider, model, base_url)
