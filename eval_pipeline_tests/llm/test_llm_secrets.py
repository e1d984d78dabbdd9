"""Keys come from the environment only and never show up in text we produce.

Also: deepeval is kept local (hardened env, Confident upload refused).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.llm import (
    ConfidentUploadRefused,
    LLMConfigError,
    LLMLayer,
    LLMSettings,
    ensure_no_confident_upload,
    harden_deepeval_env,
    install_log_redaction,
    parse_provider_spec,
    redact,
    redact_counted,
)
from eval_pipeline.llm.credentials import (
    REDACTED,
    _known_secrets,
    read_api_key,
    redact_file,
    register_secret,
)
from eval_pipeline.llm.deepeval_env import DEEPEVAL_HARDENING

from .support import ANTHROPIC_TEST_KEY, GATEWAY_TEST_KEY, OPENAI_TEST_KEY


def test_redact_blanks_env_keys_and_key_shapes() -> None:
    # OPENAI_/ANTHROPIC_API_KEY are found by name; a role's own key env once it is read.
    read_api_key("GATEWAY_KEY_FOR_TESTS")
    text = (
        f"openai said: Incorrect API key provided: {OPENAI_TEST_KEY}; "
        f"headers={{'authorization': 'Bearer {ANTHROPIC_TEST_KEY}', 'x-api-key': 'abcdefgh12345'}} "
        f"gateway {GATEWAY_TEST_KEY} other sk-proj-Zz9Yy8Xx7Ww6"
    )
    clean = redact(text)
    for secret in (OPENAI_TEST_KEY, ANTHROPIC_TEST_KEY, GATEWAY_TEST_KEY, "abcdefgh12345"):
        assert secret not in clean
    assert "sk-proj-Zz9Yy8Xx7Ww6" not in clean
    assert clean.count(REDACTED) >= 5
    assert "openai said: Incorrect API key provided:" in clean  # the useful part stays


def test_redact_leaves_ordinary_text_alone() -> None:
    text = "HTTP 500: upstream overloaded; retry 2/3 for role judge (gpt-4o-mini)"
    assert redact(text) == text


@given(
    secret=st.text(
        alphabet=st.characters(codec="ascii", categories=["L", "N"]), min_size=8, max_size=40
    ),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
)
def test_a_registered_secret_never_survives_redaction(secret: str, before: str, after: str) -> None:
    # Registered secrets are process-wide: take this random one back, or every later test
    # would have its text redacted wherever it happens to occur.
    register_secret(secret)
    try:
        assert secret not in redact(before + secret + after)
    finally:
        _known_secrets.discard(secret)


def test_read_api_key_reports_the_variable_name_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MISSING_KEY_FOR_TEST", raising=False)
    with pytest.raises(LLMConfigError, match="MISSING_KEY_FOR_TEST is not set"):
        read_api_key("MISSING_KEY_FOR_TEST")
    assert read_api_key("OPENAI_API_KEY") == OPENAI_TEST_KEY


def test_layer_refuses_to_start_without_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(LLMConfigError, match="ANTHROPIC_API_KEY is not set"):
        LLMLayer(LLMSettings.from_specs({"judge": "anthropic:claude-haiku-4-5"}))


def test_a_named_key_env_must_be_set_even_for_a_local_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LOCAL_GATEWAY_KEY", raising=False)
    settings = LLMSettings.from_specs(
        {"reader": "openai_compatible:qwen@http://127.0.0.1:9/v1"},
        role_overrides={"reader": {"api_key_env": "LOCAL_GATEWAY_KEY"}},
    )
    with pytest.raises(LLMConfigError, match="LOCAL_GATEWAY_KEY is not set"):
        LLMLayer(settings)


def test_log_records_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    install_log_redaction()
    caplog.set_level(logging.DEBUG)
    logging.getLogger("openai._base_client").debug(
        "headers: %s", {"Authorization": f"Bearer {OPENAI_TEST_KEY}"}
    )
    try:
        raise RuntimeError(f"echo {ANTHROPIC_TEST_KEY}")
    except RuntimeError:
        logging.getLogger("somewhere.else").exception("failed")
    handler_text = caplog.text
    assert OPENAI_TEST_KEY not in handler_text and ANTHROPIC_TEST_KEY not in handler_text
    assert REDACTED in handler_text


def test_confident_key_in_env_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONFIDENT_API_KEY", "confident-LEAKCANARY-123456")
    with pytest.raises(ConfidentUploadRefused, match="CONFIDENT_API_KEY is set") as info:
        ensure_no_confident_upload()
    assert "confident-LEAKCANARY" not in str(info.value)


def test_layer_refuses_to_start_with_a_confident_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONFIDENT_API_KEY", "confident-LEAKCANARY-123456")
    with pytest.raises(ConfidentUploadRefused):
        LLMLayer()


def test_confident_key_in_deepeval_key_file_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = tmp_path / "deepeval_home"
    folder.mkdir()
    (folder / ".deepeval").write_text(json.dumps({"confident_api_key": "from-login-123456"}))
    monkeypatch.setenv("DEEPEVAL_CACHE_FOLDER", str(folder))
    with pytest.raises(ConfidentUploadRefused, match="deepeval logout"):
        ensure_no_confident_upload()


def test_no_confident_key_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DEEPEVAL_CACHE_FOLDER", str(tmp_path))
    ensure_no_confident_upload()


def test_harden_deepeval_env_sets_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in DEEPEVAL_HARDENING:
        monkeypatch.delenv(name, raising=False)
    harden_deepeval_env()
    assert {name: os.environ[name] for name in DEEPEVAL_HARDENING} == {
        "DEEPEVAL_TELEMETRY_OPT_OUT": "1",
        "DEEPEVAL_FILE_SYSTEM": "READ_ONLY",
        "DEEPEVAL_DISABLE_DOTENV": "1",
        "DEEPEVAL_EVAL_MODE": "llm",
    }


def test_a_secret_is_redacted_whole_and_by_every_long_run(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "pfx-test-RUNCANARY-a1b2c3d4e5f6g7h8"  # no key shape: only the value is known
    monkeypatch.setenv("SOME_API_KEY", key)
    stripped = key.removeprefix("pfx-")
    text, hits = redact_counted(
        f"a {key} b {stripped} c {key[10:30]} d {key[:12]} e {key[:7]} f {key[1:9]}"
    )
    # 12 characters holding a random-looking run of 8 ("x-test-R": a lower-case letter then
    # an upper-case one) are a piece of the key (issue 28: an echo cut it into 15-character
    # chunks); 7 characters, or 8 that read like a word, are left alone.
    assert hits == 4 and key[10:30] not in text and stripped not in text
    assert f"d {REDACTED} e {key[:7]} f {key[1:9]}" in text
    # A long run of the secret inside other text, glued on both sides.
    glued, n = redact_counted(f"xx{key[5:25]}yy")
    assert n == 1 and glued == "xx[REDACTED]yy"


@pytest.mark.parametrize(
    "spec",
    [
        "openai:sk-proj-abcdefghijklmnopqrstuv",
        "anthropic:sk-ant-api03-abcdefghijklmnopqrst",
        "openai_compatible:A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7@http://127.0.0.1:9/v1",
    ],
)
def test_a_key_shaped_model_name_is_refused(spec: str) -> None:
    with pytest.raises(LLMConfigError, match="looks like an API key") as refused:
        parse_provider_spec(spec)
    assert spec.split(":", 1)[1][:12] not in str(refused.value)


def test_a_refused_base_url_does_not_print_its_key() -> None:
    with pytest.raises(LLMConfigError) as refused:
        parse_provider_spec("openai_compatible:m@http://127.0.0.1:9/v1?api_key=TOPSECRET-value-123")
    assert "TOPSECRET" not in str(refused.value) and "query string" in str(refused.value)


def test_an_echoed_key_never_reaches_the_caller_or_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from eval_pipeline_tests.echo_server import echo
    from eval_pipeline_tests.wire_server import WireServer

    key = "sk-test-CACHECANARY-9876543210fedcba"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    cache = tmp_path / "cache.sqlite3"
    with WireServer(responder=echo) as server:
        spec = f"openai:gpt-4o-mini@{server.openai_base_url}"
        with LLMLayer(LLMSettings.from_specs({"reader": spec}, cache_path=cache)) as layer:
            text = layer.role("reader").complete_sync("what do you know?").text
    assert "[REDACTED]" in text and key[3:19] not in text
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert key[3:19].encode() not in stored and key.encode() not in stored
    assert cache.stat().st_mode & 0o077 == 0


def test_a_redacted_file_stays_valid_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A secret may look like anything, digits included: redaction touches strings only, so a
    manifest or a results line never stops parsing."""
    monkeypatch.setenv("ODD_SECRET", "12345678")  # shaped like part of a number
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"seconds": 0.123456789, "note": "id 12345678 here"}))
    rows = tmp_path / "results.jsonl"
    rows.write_text(json.dumps({"n": 912345678, "text": "x12345678y"}) + "\n")
    assert redact_file(manifest) == 1 and redact_file(rows) == 1
    loaded = json.loads(manifest.read_text())
    assert loaded["seconds"] == 0.123456789 and loaded["note"] == "id [REDACTED] here"
    row = json.loads(rows.read_text())
    assert row == {"n": 912345678, "text": "x[REDACTED]y"}
    assert manifest.stat().st_mode & 0o077 == 0
