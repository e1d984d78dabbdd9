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


def test_oracle_refused_by_variant_and_by_name(tmp_path):
    with pytest.raises(CorpusError, match="oracle.*by construction"):
        resolve_upstream(UpstreamSpec(source="huggingface", variant="oracle"))
    f = tmp_path / "longmemeval_oracle.json"
    shutil.copy(SAMPLE_PATH, f)
    with pytest.raises(CorpusError, match="oracle"):
        resolve_upstream(UpstreamSpec(source="path", path=str(f)))


def test_local_file_named_like_the_pinned_upstream_must_match_the_pin(tmp_path):
    f = tmp_path / HF_FILES["s"][0]
    shutil.copy(SAMPLE_PATH, f)
    with pytest.raises(CorpusError, match="sha256 .* expected the pinned d6f21ea9"):
        resolve_upstream(UpstreamSpec(source="path", path=str(f)))


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
