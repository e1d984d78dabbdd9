"""Which tiers a batch holds: tier 1 (LongMemEval) and/or tier 2 (authored scenarios).

Tier-2 goldens and fixtures have exactly the tier-1 shapes, so they are appended to the same
files and every later stage runs unchanged; scores are aggregated per tier, never blended.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from eval_pipeline.corpus.convert import CorpusPlan
from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.jsonl import dumps_line, read_jsonl
from eval_pipeline.corpus.upstream import file_sha256


def select_tiers(plan: CorpusPlan, *, tier1: bool, tier2: bool, light: bool) -> CorpusPlan:
    """The plan with tier-1 goldens kept or dropped and the tier-2 goldens appended."""
    from eval_pipeline.tier2.convert import load_tier2

    goldens = list(plan.goldens) if tier1 else []
    tier2_stats = None
    if tier2:
        t2 = load_tier2(light)
        taken = {g["name"] for g in goldens}
        clash = sorted(g["name"] for g in t2.goldens if g["name"] in taken)
        if clash:
            raise CorpusError(
                f"tier-2 question ids collide with tier 1: {clash[:5]}", field="question_id"
            )
        goldens += t2.goldens
        tier2_stats = t2.stats
    tiers = "all" if tier1 and tier2 else ("2" if tier2 else "1")
    return dataclasses.replace(plan, goldens=goldens, tiers=tiers, light=light, tier2=tier2_stats)


def append_tier2_fixtures(plan: CorpusPlan, fixtures_path: Path, stats: dict[str, Any]) -> dict:
    """Append the tier-2 sessions to a written fixtures file; returns the updated stats."""
    if plan.tier2 is None:
        return stats
    from eval_pipeline.tier2.convert import load_tier2

    t2 = load_tier2(plan.light)
    tier1_ids = {fx["session_id"] for fx in read_jsonl(fixtures_path)}
    clash = sorted(fx["session_id"] for fx in t2.fixtures if fx["session_id"] in tier1_ids)
    if clash:
        # One id for two different sessions would merge them in the graph.
        raise CorpusError(
            f"tier-2 session ids collide with tier 1: {clash[:5]}", field="session_id"
        )
    with open(fixtures_path, "a", encoding="utf-8", newline="\n") as fh:
        for fx in t2.fixtures:
            fh.write(dumps_line(fx) + "\n")
    return {
        **stats,
        "sessions": stats["sessions"] + len(t2.fixtures),
        "turns": stats["turns"] + sum(len(fx["turns"]) for fx in t2.fixtures),
        "haystack_slots": stats["haystack_slots"] + t2.stats["haystack_slots"],
        "sha256": file_sha256(fixtures_path),
    }
