"""Tier 2 through the whole chain (light run): panels populated, never blended with tier 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from eval_pipeline.corpus.jsonl import read_jsonl

EXE = str(Path(sys.executable).with_name("eval-pipeline"))


def test_light_tier2_run_end_to_end(tmp_path):
    env = {
        **{k: v for k, v in os.environ.items() if k != "CONFIDENT_API_KEY"},
        "EVAL_PIPELINE_HOME": str(tmp_path / "state"),
        "DAGSTER_HOME": str(tmp_path / "state" / "dagster_home"),
    }
    try:
        res = subprocess.run(
            [EXE, "run", "--tier", "all", "--light"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        subprocess.run([EXE, "graph", "stop"], env=env, capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = Path(res.stdout.strip().splitlines()[-1])
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
