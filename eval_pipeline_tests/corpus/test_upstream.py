"""Resolving the upstream file: pins, refusals, the Hugging Face cache path, offline."""

from __future__ import annotations

import shutil

import pytest

from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.upstream import (
    HF_FILES,
    HF_REPO_ID,
    HF_REVISION,
    SAMPLE_PATH,
    UpstreamSpec,
    file_sha256,
    resolve_upstream,
    sample_pin,
)


def test_bundled_sample_is_the_default_and_matches_its_pin():
    up = resolve_upstream(UpstreamSpec())
    assert up.source == "sample" and up.sha256 == sample_pin() == file_sha256(SAMPLE_PATH)
    assert up.pinned


@pytest.mark.parametrize("rev", ["main", "98d7416", "v1.0", HF_REVISION.upper(), HF_REVISION + "0"])
def test_revision_must_be_a_full_commit(rev):
    with pytest.raises(CorpusError, match="40-hex commit"):
        resolve_upstream(UpstreamSpec(source="huggingface", revision=rev))


@pytest.mark.parametrize("source", ["huggingface", "sample", "path"])
def test_oracle_refused_by_variant(source, tmp_path):
    path = str(SAMPLE_PATH) if source == "path" else None
    with pytest.raises(CorpusError, match="oracle.*by construction"):
        resolve_upstream(UpstreamSpec(source=source, path=path, variant="oracle"))


def test_file_names_decide_nothing_bytes_do(tmp_path):
    """Was: a file named like the pinned upstream (or like the oracle) was judged by its name.
    Now its bytes decide: the bundled sample's bytes are the sample, whatever the name; the
    oracle is refused by content (test_identity.py)."""
    for name in (HF_FILES["s"][0], "longmemeval_oracle.json"):
        f = tmp_path / name
        shutil.copy(SAMPLE_PATH, f)
        up = resolve_upstream(UpstreamSpec(source="path", path=str(f)))
        assert (up.variant, up.expected_sha256, up.sha256) == ("sample", sample_pin(), sample_pin())


def test_explicit_sha256_still_binds_a_local_file(tmp_path):
    f = tmp_path / HF_FILES["s"][0]
    shutil.copy(SAMPLE_PATH, f)
    pin = HF_FILES["s"][1]
    with pytest.raises(CorpusError, match="sha256 .* expected the pinned d6f21ea9"):
        resolve_upstream(UpstreamSpec(source="path", path=str(f), sha256=pin), verify=False)


def _seed_hf_cache(cache, content_from):
    """The layout huggingface_hub reads for an exact commit: snapshots/<rev>/<file>."""
    snap = cache / f"datasets--{HF_REPO_ID.replace('/', '--')}" / "snapshots" / HF_REVISION
    snap.mkdir(parents=True)
    shutil.copy(content_from, snap / HF_FILES["s"][0])


def test_pre_seeded_cache_is_used_and_still_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _seed_hf_cache(tmp_path / "hub", SAMPLE_PATH)
    spec = UpstreamSpec(source="huggingface", cache_dir=str(tmp_path / "hub"))
    # The cached file is not the real upstream: our own sha256 check refuses it.
    with pytest.raises(CorpusError, match="not the pinned upstream"):
        resolve_upstream(spec)
    # With the digest it really has, the cached file is accepted: the cache path works.
    up = resolve_upstream(spec.model_copy(update={"sha256": file_sha256(SAMPLE_PATH)}))
    assert up.source == "huggingface" and up.revision == HF_REVISION
    assert up.source_label() == f"{HF_REPO_ID}/longmemeval_s_cleaned.json@{HF_REVISION}"


def test_nothing_cached_offline_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = UpstreamSpec(source="huggingface", cache_dir=str(tmp_path / "empty"))
    with pytest.raises(CorpusError, match="not in the Hugging Face cache.*local path"):
        resolve_upstream(spec)


def test_download_failure_is_a_clear_error(tmp_path, monkeypatch):
    # No network here (and an unroutable endpoint guarantees it): the message says what to do.
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    spec = UpstreamSpec(source="huggingface", cache_dir=str(tmp_path / "empty"))
    with pytest.raises(CorpusError, match="could not download .*pre-seed"):
        resolve_upstream(spec)
