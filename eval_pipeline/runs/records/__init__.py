"""Typed, versioned records of a run bundle: `Manifest` (manifest.json), `Summary`
(summary.json), `ResultRow` (a line of results.jsonl), `Hypothesis` (a line of
hypotheses.jsonl), `CanaryRow` (a line of canaries.jsonl, when canaries were planted); and,
outside the bundle, `eval_pipeline.failure_records.FailureRecord`.

Each carries `schema_version`, an integer per record kind (`*_SCHEMA_VERSION`). Bump it when
a field changes meaning or type, is removed or becomes required; a field added with a
default needs no bump (older readers keep it as an unknown field). A record without the
field is version 1. `write_bundle` validates what it writes through these models
(`base.for_writing`); `load_run` reads through them. Their JSON Schemas are published under
docs/schemas/ by `python -m eval_pipeline.runs.records`.
"""

from eval_pipeline.runs.records.base import LEGACY_VERSION, RecordError, for_reading, for_writing
from eval_pipeline.runs.records.canaries import CANARY_ROW_SCHEMA_VERSION, CanaryRow
from eval_pipeline.runs.records.manifest import MANIFEST_SCHEMA_VERSION, Manifest, Pins
from eval_pipeline.runs.records.results import (
    HYPOTHESIS_SCHEMA_VERSION,
    RESULT_ROW_SCHEMA_VERSION,
    Hypothesis,
    Metric,
    ResultRow,
)
from eval_pipeline.runs.records.summary import SUMMARY_SCHEMA_VERSION, Summary, TierSummary

__all__ = [
    "CANARY_ROW_SCHEMA_VERSION",
    "CanaryRow",
    "HYPOTHESIS_SCHEMA_VERSION",
    "LEGACY_VERSION",
    "MANIFEST_SCHEMA_VERSION",
    "RESULT_ROW_SCHEMA_VERSION",
    "SUMMARY_SCHEMA_VERSION",
    "Hypothesis",
    "Manifest",
    "Metric",
    "Pins",
    "RecordError",
    "ResultRow",
    "Summary",
    "TierSummary",
    "for_reading",
    "for_writing",
]
