"""Resolve the pinned LongMemEval file: bundled sample, a local path, or Hugging Face.

Every source ends in a local file whose sha256 we compute ourselves: `hf_hub_download`
happily returns whatever already sits in a `local_dir`, so its word is not a check.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.settings import BUNDLED_CORPUS_DIR

HF_REPO_ID = "xiaowu0162/longmemeval-cleaned"
HF_REVISION = "98d7416c24c778c2fee6e6f3006e7a073259d48f"
# Pins per variant file at HF_REVISION (DESIGN.md section 3). Only S is pinned so far: M
# needs an explicit sha256 from whoever first verifies it.
HF_FILES: dict[str, tuple[str, str | None, int | None]] = {
    "s": (
        "longmemeval_s_cleaned.json",
        "d6f21ea9d60a0d56f34a05b609c79c88a451d2ae03597821ea3d5a9678c3a442",
        277_383_467,
    ),
    "m": ("longmemeval_m_cleaned.json", None, None),
}
SAMPLE_PATH = BUNDLED_CORPUS_DIR / "upstream" / "longmemeval_sample.json"
SAMPLE_PIN_PATH = BUNDLED_CORPUS_DIR / "upstream" / "longmemeval_sample.json.sha256"

_HEX40 = re.compile(r"^[0-9a-f]{40}$")

SourceKind = Literal["sample", "path", "huggingface"]


class UpstreamSpec(BaseModel):
    """Which upstream file to use. The default is the bundled sample (works offline)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: SourceKind = "sample"
    path: str | None = None  # source=path
    variant: str = "s"  # s | m (oracle is refused)
    revision: str = HF_REVISION  # source=huggingface
    sha256: str | None = None  # expected digest; overrides the built-in pin
    cache_dir: str | None = None  # pre-seeded Hugging Face cache (else HF_HUB_CACHE)
    local_dir: str | None = None  # download target for hf_hub_download


class ResolvedUpstream(BaseModel):
    """A local file we have verified, with the pins that say exactly what it is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: SourceKind
    path: str
    file_name: str
    variant: str
    repo_id: str | None
    revision: str | None
    sha256: str
    expected_sha256: str | None  # None: nothing to compare against (an unpinned local file)
    bytes: int

    @property
    def pinned(self) -> bool:
        return self.expected_sha256 is not None

    def source_label(self) -> str:
        """`source_file` of the goldens: upstream file + revision (or its pinned digest)."""
        if self.revision:
            return f"{self.repo_id}/{self.file_name}@{self.revision}"
        if self.expected_sha256:
            return f"{self.source}:{self.file_name}@sha256:{self.expected_sha256}"
        return f"{self.source}:{self.file_name}"


def check_revision(revision: str) -> None:
    if not _HEX40.match(revision or ""):
        raise CorpusError(
            f"revision {revision!r} is not a full 40-hex commit id; a branch or tag can move "
            "under us, so only an exact commit is accepted",
            field="revision",
        )


def check_variant(variant: str, file_name: str = "") -> None:
    if variant == "oracle" or "oracle" in file_name.lower():
        raise CorpusError(
            "the 'oracle' variant is refused: its haystacks hold only the evidence sessions, "
            "so precision and payload efficiency would score well by construction",
            field="variant",
        )
    if variant not in HF_FILES:
        raise CorpusError(
            f"unknown variant {variant!r}; expected one of {sorted(HF_FILES)}", field="variant"
        )


def file_sha256(path: str | Path, chunk: int = 8 * 1024 * 1024) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sample_pin() -> str:
    return SAMPLE_PIN_PATH.read_text(encoding="utf-8").split()[0]


def _variant_from_name(name: str, default: str) -> str:
    m = re.match(r"longmemeval_([a-z]+)(?:_cleaned)?\.json$", name)
    return m.group(1) if m else default


def _download(spec: UpstreamSpec, file_name: str) -> Path:
    # Imported here: huggingface_hub is only needed for this source.
    from huggingface_hub import hf_hub_download

    kwargs = dict(
        repo_id=HF_REPO_ID,
        filename=file_name,
        repo_type="dataset",
        revision=spec.revision,
        cache_dir=spec.cache_dir,
        local_dir=spec.local_dir,
    )
    try:  # a pre-seeded cache first: no network needed
        return Path(hf_hub_download(**kwargs, local_files_only=True))
    except Exception as cached_exc:  # noqa: BLE001 - hub raises several unrelated types offline
        cache_reason = f"{type(cached_exc).__name__}"
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise CorpusError(
            f"{file_name} at revision {spec.revision} is not in the Hugging Face cache "
            f"({cache_reason}) and HF_HUB_OFFLINE=1 forbids a download; pre-seed the cache or "
            "pass a local path",
            field="upstream",
        )
    try:
        return Path(hf_hub_download(**kwargs))
    except Exception as exc:  # noqa: BLE001 - offline hub 1.16 raises a bare RuntimeError
        raise CorpusError(
            f"could not download {HF_REPO_ID}/{file_name} at revision {spec.revision} "
            f"(not cached: {cache_reason}; download failed: {type(exc).__name__}: {exc}); "
            "pre-seed the Hugging Face cache or pass a local path",
            field="upstream",
        ) from None


def resolve_upstream(spec: UpstreamSpec, *, verify: bool = True) -> ResolvedUpstream:
    """Find the file for `spec`, check its pins and sha256; raise CorpusError otherwise."""
    check_variant(spec.variant)
    if spec.source == "sample":
        path, variant, revision, repo = SAMPLE_PATH, "sample", None, None
        expected = spec.sha256 or sample_pin()
    elif spec.source == "path":
        if not spec.path:
            raise CorpusError("source 'path' needs a path", field="upstream")
        path = Path(spec.path).expanduser()
        variant = _variant_from_name(path.name, spec.variant)
        check_variant(variant, path.name)
        revision, repo = None, None
        known = HF_FILES.get(variant)
        # A file named like the pinned upstream must match that pin; any other local file
        # is recorded by its own digest (and is comparable only to runs on the same digest).
        expected = spec.sha256 or (known[1] if known and path.name == known[0] else None)
    elif spec.source == "huggingface":
        check_revision(spec.revision)
        file_name, pinned_sha, _ = HF_FILES[spec.variant]
        expected = spec.sha256 or (pinned_sha if spec.revision == HF_REVISION else None)
        if expected is None:
            raise CorpusError(
                f"no sha256 pin for {file_name} at revision {spec.revision}; pass the "
                "expected sha256 explicitly",
                field="sha256",
            )
        path, variant, revision, repo = (
            _download(spec, file_name),
            spec.variant,
            spec.revision,
            HF_REPO_ID,
        )
    else:  # pragma: no cover - pydantic restricts the literal
        raise CorpusError(f"unknown source {spec.source!r}", field="source")

    if not path.is_file():
        raise CorpusError(f"upstream file not found: {path}", field="upstream")
    digest = file_sha256(path) if verify or expected else ""
    if expected and digest != expected:
        raise CorpusError(
            f"sha256 of {path.name} is {digest}, expected the pinned {expected}; the file is "
            "not the pinned upstream (corrupt, truncated or another revision)",
            field="sha256",
        )
    return ResolvedUpstream(
        source=spec.source,
        path=str(path.resolve()),
        file_name=path.name,
        variant=variant,
        repo_id=repo,
        revision=revision,
        sha256=digest,
        expected_sha256=expected,
        bytes=path.stat().st_size,
    )
