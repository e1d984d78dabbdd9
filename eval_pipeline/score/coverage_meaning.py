"""What a run's coverage measures, in one line, when no model read or judged it.

With the offline extractive reader (`retrieve.extractive`) and a judge that decided with no
model (the rules), "covered" means the evidence was retrieved and one sentence of it states
the reference answer. That is a measure of retrieval and extraction, not of an agent
answering: it is bounded by what one sentence can say (no count across sessions, no date
arithmetic, no recommendation), so evidence recall is what tells two memories apart.

This module states that line once; the CLI's summary (`run_cli.print_summary`), the HTML report
(`runs.report`) and scored_run's Dagster metadata (`assets.scoring`) show it from the
manifest's pins, so an older bundle's report says it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval_pipeline.retrieve.extractive import EXTRACTIVE_LABEL

OFFLINE_COVERAGE = (
    "offline coverage = the evidence was retrieved and one sentence of it, picked by the "
    "extractive reader, states the reference answer by the rule judge: a retrieval-and-"
    "extraction measure, not an agent's accuracy; evidence recall is the number that "
    "separates memories"
)


def coverage_meaning(pins: Mapping[str, Any] | None) -> str | None:
    """`OFFLINE_COVERAGE` for a run read by the extractive reader and judged with no model
    (the rules decided), else None: a model's coverage means what its reader and judge do."""
    pins = pins or {}
    judge = pins.get("judge")
    judge = judge if isinstance(judge, Mapping) else {}
    ruled = judge.get("model") == "offline" and judge.get("prompt_hash") is not None
    return OFFLINE_COVERAGE if pins.get("reader") == EXTRACTIVE_LABEL and ruled else None
