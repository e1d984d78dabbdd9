"""A key echoed back encoded is still the key (issue 28, finding 4): each encoding the probe
used, redacted from text, from a file we publish and from a model reply before the cache;
keys nobody put in the environment, by their shape."""

from __future__ import annotations

import base64
import json
import re
import unicodedata
from pathlib import Path

import pytest

from eval_pipeline.llm import LLMLayer, LLMSettings, redact, redact_counted
from eval_pipeline.llm.credentials import REDACTED, redact_file
from eval_pipeline_tests.echo_server import encoded_echo, encodings

KEY = "sk-proj-Q7fT2mZp9LxV4bNc8RsW1yHd6KjG3eUa5oPi0tYr"  # random, as real keys are


def forms(key: str) -> dict[str, str]:
    """The probe's encodings, and a few more an echo may use."""
    out = encodings(key)
    out |= {
        "base64, second alignment": base64.b64encode(f"k={key}".encode()).decode(),
        "base64, third alignment": base64.b64encode(f"ky={key}".encode()).decode(),
        "url-safe base64": base64.urlsafe_b64encode(f"?{key}?".encode()).decode(),
        "zero-width joiner and BOM": "\u200d\ufeff".join(key),
        "escaped, JSON-encoded twice": json.dumps(json.dumps(out["escaped"])),
        "HTML entities": "".join(f"&#{ord(c)};" for c in key),
    }
    return out


def pieces(name: str, form: str) -> list[str]:
    """What must not survive of `form`: each chunk whole, else every run of 16."""
    if name == "chunks":
        return [p for p in form.split(" ") if len(p) >= 8]
    return [form[i : i + 16] for i in range(len(form) - 15)]


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return KEY


@pytest.mark.parametrize("name", list(forms(KEY)))
def test_every_encoding_of_a_known_key_is_redacted(key: str, name: str) -> None:
    form = forms(key)[name]
    clean, hits = redact_counted(f"the endpoint said: {form} (end)", shapes=False)
    assert hits >= 1 and REDACTED in clean
    assert not [p for p in pieces(name, form) if p in clean], clean
    assert clean.startswith("the endpoint said: ") and clean.endswith(" (end)")


def test_format_characters_are_all_known() -> None:
    """The invisible characters dropped before matching are every Cf character Unicode
    knows (this Python's unicodedata), so none can be interleaved past redaction."""
    from eval_pipeline.llm.secret_forms import FORMAT_CHARS

    pattern = re.compile(f"[{FORMAT_CHARS}]")
    cf = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"]
    assert [f"U+{ord(c):04X}" for c in cf if not pattern.match(c)] == []


def test_short_runs_that_read_like_words_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret made of words does not blank the words: an 8-character run counts only when
    it looks random (a digit and a letter, or mixed case)."""
    monkeypatch.setenv("SOME_PASSWORD", "anthropic-clauderocks-2024")
    text = "anthropic:claude-haiku rocks; see the clauderocks wiki"
    assert redact_counted(text, shapes=False) == (text, 0)


@pytest.mark.parametrize(
    "token",
    [
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "AKIAIOSFODNN7EXAMPLE",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlF",
        "sk-ant-api03-UNKNOWNkey0123456789abcdef",
    ],
)
def test_a_key_nobody_registered_is_redacted_by_its_shape(token: str) -> None:
    for said in (
        token,
        token[::-1],  # reversed
        base64.b64encode(f"here: {token}".encode()).decode(),  # inside base64
        "\u200b".join(token),  # zero-width characters interleaved
    ):
        clean = redact(f"reply: {said} .")
        assert token[:12] not in clean and token[::-1][:12] not in clean
        assert REDACTED in clean, (token, said, clean)


def test_a_published_file_is_redacted_in_every_encoding(key: str, tmp_path: Path) -> None:
    rows = tmp_path / "results.jsonl"
    lines = [json.dumps({"name": n, "answer": f"x {f} y"}) for n, f in forms(key).items()]
    rows.write_text("\n".join(lines) + "\n")
    assert redact_file(rows) >= len(lines)  # chunks count one each
    data = rows.read_text()
    for name, form in forms(key).items():
        assert not [p for p in pieces(name, form) if p in data], name
    assert all(json.loads(line)["answer"].startswith("x ") for line in data.splitlines())


def test_an_encoded_echo_never_reaches_the_caller_or_the_cache(key: str, tmp_path: Path) -> None:
    from eval_pipeline_tests.wire_server import WireServer

    cache = tmp_path / "cache.sqlite3"
    with WireServer(responder=encoded_echo) as server:
        spec = f"openai:gpt-4o-mini@{server.openai_base_url}"
        with LLMLayer(LLMSettings.from_specs({"reader": spec}, cache_path=cache)) as layer:
            text = layer.role("reader").complete_sync("what do you know?").text
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    for name, form in encodings(key).items():
        for piece in pieces(name, form):
            assert piece not in text, (name, text)
            assert piece.encode() not in stored, name
            assert json.dumps(piece)[1:-1].encode() not in stored, name
