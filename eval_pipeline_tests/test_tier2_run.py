"""Tier 2 through the whole chain (light run): panels populated, never blended with tier 1.
The chain is the session's light two-tier run (`light_tier2_run` in conftest.py)."""

from __future__ import annotations

import json

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl

# A whole two-tier chain: the full suite runs it, `make test-fast` not.
pytestmark = pytest.mark.slow


def test_light_tier2_run_end_to_end(light_tier2_run):
    _, res = light_tier2_run
    run_dir = res.run_dir
    summary = json.loads((run_dir / "summary.json").read_text())
    assert sorted(summary["tiers"]) == ["1", "2"]  # per tier, no blended headline
    assert "overall" not in summary and "coverage" not in summary
    t1, t2 = summary["tiers"]["1"], summary["tiers"]["2"]
    assert t1["counts"]["questions"] == 31 and t2["counts"]["questions"] == 5  # one per use case
    assert not set(t1["coverage_by_type"]) & set(t2["coverage_by_type"])
    panels = t2["panels"]
    assert sorted(panels["by_use_case"]) == ["BUG", "COMBO", "INFRA", "PREF", "TIME"]
    assert panels["by_difficulty"] and panels["by_source_mix"] and panels["by_dimension"]
    rows = list(read_jsonl(run_dir / "results.jsonl"))
    tier2_rows = [r for r in rows if r["tier"] == 2]
    assert all("citation_recall" in r["metrics"] for r in tier2_rows)
    assert all(r["metrics"]["criteria_score"]["score"] is None for r in tier2_rows)  # no judge
    hyps = [h["question_id"] for h in read_jsonl(run_dir / "hypotheses.jsonl")]
    assert len(hyps) == 31 and not any(h.startswith("t2-") for h in hyps)  # upstream scorer: tier 1
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["pins"]["corpus"]["tiers"] == "all" and manifest["pins"]["corpus"]["light"]
    assert manifest["pins"]["corpus"]["tier2_digest"]
    assert "tier 2: 5 questions" in res.stdout
