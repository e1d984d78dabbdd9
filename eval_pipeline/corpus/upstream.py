"""Resolve the LongMemEval file: bundled sample, a local path, or Hugging Face.

Every source ends in a local file whose sha256 we compute ourselves: `hf_hub_download`
happily returns whatever already sits in a `local_dir`, so its word is not a check.

What a file *is* (its variant, whether it is pinned) comes from what the user says
(`UpstreamSpec.variant`) or from what a known sha256 pin identifies, never from its name:
`mydata.json` holding the bundled sample's bytes is the sample, and `longmemeval_x.json`
holding bytes nobody pinned is a local file recorded by its own digest.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Literal, NamedTuple

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
HF_DEFAULT_VARIANT = "s"
SAMPLE_PATH = BUNDLED_CORPUS_DIR / "upstream" / "longmemeval_sample.json"
SAMPLE_PIN_PATH = BUNDLED_CORPUS_DIR / "upstream" / "longmemeval_sample.json.sha256"
# The variant of the bundled sample, and of any file holding its exact bytes.
SAMPLE_VARIANT = "sample"
# The variant of a file nobody declared and no pin identifies: it is recorded by its digest.
LOCAL_VARIANT = "local"

_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_VARIANT_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

SourceKind = Literal["sample", "path", "huggingface"]


class UpstreamSpec(BaseModel):
    """Which upstream file to use. The default is the bundled sample (works offline)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: SourceKind = "sample"
    path: str | None = None  # source=path
    # What the user says the file is; None = not said. source=path: identified by its sha256
    # (a known pin), else "local"; source=huggingface: "s". "oracle" is always refused.
    variant: str | None = None
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
        """`source_file` of the goldens: upstream file + revision (or its digest)."""
        if self.revision:
            return f"{self.repo_id}/{self.file_name}@{self.revision}"
        if self.expected_sha256:
            return f"{self.source}:{self.file_name}@sha256:{self.expected_sha256}"
        if self.sha256:  # an unpinned local file: its own digest is its revision
            return f"{self.source}:{self.file_name}@sha256:{self.sha256}"
        return f"{self.source}:{self.file_name}"


class KnownPin(NamedTuple):
    """A sha256 that identifies a file whatever it is called."""

    variant: str
    sha256: str
    bytes: int | None  # None: unknown size (the file must be hashed to rule it out)
    what: str  # for messages


def check_revision(revision: str) -> None:
    if not _HEX40.match(revision or ""):
        raise CorpusError(
            f"revision {revision!r} is not a full 40-hex commit id; a branch or tag can move "
            "under us, so only an exact commit is accepted",
            field="revision",
        )


def check_variant(variant: str | None, file_name: str = "") -> None:
    """Refuse a variant label that is not a plain label, and the oracle variant.

    This judges the *label* (what the user said, or what a pin identified). The oracle
    variant is also refused by content (`convert.check_not_oracle_content`), whatever the
    file or its variant is called. `file_name` is accepted for old callers and ignored: a
    file's name never decides what it is.
    """
    del file_name
    if variant is None:
        return
    if not isinstance(variant, str) or not _VARIANT_LABEL.match(variant):
        raise CorpusError(
            f"variant {variant!r} is not a label (1-64 letters, digits, '_', '-', '.')",
            field="variant",
        )
    if "oracle" in variant.lower():
        raise CorpusError(
            f"the oracle variant is refused (variant {variant!r}): its haystacks hold only "
            "the evidence sessions, so precision and payload efficiency would score well by "
            "construction",
            field="variant",
        )


def file_sha256(path: str | Path, chunk: int = 8 * 1024 * 1024) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sample_pin() -> str:
    return SAMPLE_PIN_PATH.read_text(encoding="utf-8").split()[0]


def known_pins() -> list[KnownPin]:
    """Every sha256 that identifies a variant: the pinned Hugging Face files, the sample."""
    pins = [
        KnownPin(variant, sha, size, f"{HF_REPO_ID}/{name}@{HF_REVISION}")
        for variant, (name, sha, size) in HF_FILES.items()
        if sha
    ]
    sample_size = SAMPLE_PATH.stat().st_size if SAMPLE_PATH.is_file() else None
    pins.append(KnownPin(SAMPLE_VARIANT, sample_pin(), sample_size, "the bundled sample"))
    return pins


def identify(sha256: str) -> KnownPin | None:
    """The known pin with this digest, if any."""
    return next((p for p in known_pins() if p.sha256 == sha256), None)


def _could_be_pinned(size: int) -> bool:
    """False when no known pin can match a file of this size (its hash cannot identify it)."""
    return any(p.bytes is None or p.bytes == size for p in known_pins())


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


def _contradiction(declared: str, pin: KnownPin, digest: str, name: str) -> CorpusError:
    return CorpusError(
        f"--variant {declared} contradicts the file: {name} has sha256 {digest}, the pin of "
        f"{pin.what} (variant {pin.variant!r}); drop --variant or pass the file it names",
        field="variant",
    )


def _identify_path(spec: UpstreamSpec, path: Path, *, verify: bool) -> tuple[str, str | None, str]:
    """(variant, expected sha256, digest or "") of a local file, from its digest and the spec.

    A known pin decides (and a declared variant that contradicts it is refused); else the
    declared variant is recorded as said, pinned only by the user's own --sha256; else the
    file is `local`, recorded by its own digest. With `verify=False` a file whose size no pin
    has is not hashed here: the converter's streaming pass computes its digest.
    """
    size = path.stat().st_size
    must_hash = verify or spec.sha256 is not None or _could_be_pinned(size)
    digest = file_sha256(path) if must_hash else ""
    declared = spec.variant
    pin = identify(digest) if digest else None
    if pin is not None:
        if declared is not None and declared != pin.variant:
            raise _contradiction(declared, pin, digest, path.name)
        return pin.variant, spec.sha256 or pin.sha256, digest
    if declared == SAMPLE_VARIANT:
        # The sample is a file we wrote: only its exact bytes are it.
        raise CorpusError(
            f"--variant {SAMPLE_VARIANT} names the bundled sample (sha256 {sample_pin()}); "
            f"{path.name} is another file"
            + (f" (sha256 {digest})" if digest else f" ({size} bytes)"),
            field="variant",
        )
    return declared or LOCAL_VARIANT, spec.sha256, digest


def _hf_target(spec: UpstreamSpec) -> tuple[str, str, str]:
    """(variant, file name, expected sha256) of a Hugging Face spec, or a CorpusError."""
    check_revision(spec.revision)
    variant = spec.variant or HF_DEFAULT_VARIANT
    if variant not in HF_FILES:
        raise CorpusError(
            f"variant {variant!r} has no file on Hugging Face; expected one of {sorted(HF_FILES)}",
            field="variant",
        )
    file_name, pinned_sha, _ = HF_FILES[variant]
    expected = spec.sha256 or (pinned_sha if spec.revision == HF_REVISION else None)
    if expected is None:
        raise CorpusError(
            f"no sha256 pin for {file_name} at revision {spec.revision}; pass the "
            "expected sha256 explicitly",
            field="sha256",
        )
    return variant, file_name, expected


def check_resolvable(spec: UpstreamSpec) -> None:
    """Preflight: would `resolve_upstream(spec)` find a file? Raises its CorpusError if not,
    without downloading anything (a Hugging Face file not yet cached is left to the run,
    unless HF_HUB_OFFLINE=1 forbids the download)."""
    check_variant(spec.variant)
    if spec.source != "huggingface":
        resolve_upstream(spec, verify=False)
        return
    _, file_name, _ = _hf_target(spec)
    if os.environ.get("HF_HUB_OFFLINE") != "1":
        return
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(
        HF_REPO_ID, file_name, cache_dir=spec.cache_dir, revision=spec.revision, repo_type="dataset"
    )
    if not isinstance(cached, str):
        raise CorpusError(
            f"{file_name} at revision {spec.revision} is not in the Hugging Face cache and "
            "HF_HUB_OFFLINE=1 forbids a download; pre-seed the cache or pass a local path",
            field="upstream",
        )


def resolve_upstream(spec: UpstreamSpec, *, verify: bool = True) -> ResolvedUpstream:
    """Find the file for `spec`, check its pins and sha256; raise CorpusError otherwise."""
    check_variant(spec.variant)
    digest: str | None = None  # None: not computed yet
    if spec.source == "sample":
        if spec.variant not in (None, SAMPLE_VARIANT):
            raise CorpusError(
                f"--variant {spec.variant} contradicts the bundled sample (variant "
                f"{SAMPLE_VARIANT!r}); drop --variant or pass the file it names",
                field="variant",
            )
        path, variant, revision, repo = SAMPLE_PATH, SAMPLE_VARIANT, None, None
        expected = spec.sha256 or sample_pin()
    elif spec.source == "path":
        if not spec.path:
            raise CorpusError("source 'path' needs a path", field="upstream")
        path = Path(spec.path).expanduser()
        if not path.is_file():
            raise CorpusError(f"upstream file not found: {path}", field="upstream")
        variant, expected, digest = _identify_path(spec, path, verify=verify)
        revision, repo = None, None
    elif spec.source == "huggingface":
        variant, file_name, expected = _hf_target(spec)
        path, revision, repo = _download(spec, file_name), spec.revision, HF_REPO_ID
    else:  # pragma: no cover - pydantic restricts the literal
        raise CorpusError(f"unknown source {spec.source!r}", field="source")

    if not path.is_file():
        raise CorpusError(f"upstream file not found: {path}", field="upstream")
    if digest is None:
        digest = file_sha256(path) if verify or expected else ""
    if expected and digest and digest != expected:
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
