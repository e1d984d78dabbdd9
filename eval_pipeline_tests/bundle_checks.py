"""Checks on a written run bundle, recomputed independently from its results.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.score.retrieval_metrics import KS, LEVELS, METRIC_NAMES, VARIANTS


def assert_summary_recomputes(run_dir: Path, tier: str = "1") -> None:
    """Every retrieval mean and `n` of summary.json equals the plain mean of the non-null
    per-question values over the answerable questions, and coverage over the scored ones."""
    rows = [r for r in read_jsonl(run_dir / "results.jsonl") if str(r["tier"]) == tier]
    summary = json.loads((run_dir / "summary.json").read_text())["tiers"][tier]
    answerable = [r for r in rows if not r["abstention"]]
    for level in LEVELS:
        for variant in VARIANTS:
            for name in METRIC_NAMES:
                for k in KS:
                    key = f"{name}@{k}"
                    values = [r["retrieval_metrics"][level][variant][key] for r in answerable]
                    scored = [v for v in values if v is not None]
                    expected = sum(scored) / len(scored) if scored else None
                    got = summary["retrieval"][level][variant][key]
                    assert got["mean"] == pytest.approx(expected), (level, variant, key)
                    assert got["n"] == len(scored), (level, variant, key)
    covered = [r["covered"] for r in answerable if r["covered"] is not None]
    assert summary["coverage"]["rate"] == pytest.approx(sum(covered) / len(covered))
