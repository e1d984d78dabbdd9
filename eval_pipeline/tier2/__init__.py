"""Tier 2: authored organisational-memory scenarios about a synthetic company, scored apart.

- `schema`: pydantic models of the universe (company + source events) and the scenarios;
- `load`: reads `corpus/tier2/` YAML, every problem named by file, scenario id and field
  (`expectations`: ingestion expectations said in the scenario's own signal turns);
- `convert`: scenarios → goldens rows and session fixtures in the tier-1 shapes (tier = 2),
  an event's turns by `turns.render_turns`;
- `metrics`: citation precision / recall against must_cite / must_not_cite, criteria judge;
- `panels`: per use case, difficulty, source mix and COMBO dimension.
- `ingestion`: the ingestion axis, read from the graph through the declared searchable texts
  (`terms`: the matching rule it shares with the corpus check);
- `pass_criteria`: per-use-case axis weights, thresholds and the scenario / bucket pass rule.
"""

from eval_pipeline.tier2.convert import (
    Tier2Corpus,
    Tier2CorpusError,
    build_tier2,
    collisions,
    load_tier2,
    tier2_goldens_and_fixtures,
)
from eval_pipeline.tier2.load import corpus_digest, corpus_issues, load_scenarios, load_universe
from eval_pipeline.tier2.metrics import (
    add_tier2_metrics,
    citation_metrics,
    criteria_judge,
    criteria_judge_batch,
    criteria_prompt_hash,
)
from eval_pipeline.tier2.panels import tier2_panels, tier2_panels_markdown
from eval_pipeline.tier2.schema import Tier2SchemaError

__all__ = [
    "Tier2Corpus",
    "Tier2CorpusError",
    "Tier2SchemaError",
    "add_tier2_metrics",
    "build_tier2",
    "citation_metrics",
    "collisions",
    "corpus_digest",
    "corpus_issues",
    "criteria_judge",
    "criteria_judge_batch",
    "criteria_prompt_hash",
    "load_scenarios",
    "load_tier2",
    "load_universe",
    "tier2_goldens_and_fixtures",
    "tier2_panels",
    "tier2_panels_markdown",
]
