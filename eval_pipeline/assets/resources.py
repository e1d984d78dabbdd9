"""The Dagster resources: one per section of the run configuration (`eval_pipeline.config`),
each that section's fields as its config, plus what the assets need of it.

The graph resource is the graph client's lifecycle only: it builds a `GraphStore` (plain
Python, `eval_pipeline.graph`) per question batch from its config and closes them when the
step ends.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from pydantic import PrivateAttr

from eval_pipeline import build
from eval_pipeline.config import (
    SECTIONS,
    CalibrationConfig,
    ComparisonConfig,
    CorpusConfig,
    GraphConfig,
    PathsConfig,
    ReconcileConfig,
    RepeatConfig,
    RetrievalConfig,
    RunConfig,
    ScoringConfig,
)
from eval_pipeline.corpus.batches import BatchKey
from eval_pipeline.graph.store import GraphStore


class PathsResource(PathsConfig, dg.ConfigurableResource):
    pass  # root() and runs_dir() are PathsConfig's: preflight asks them too


class CorpusResource(CorpusConfig, dg.ConfigurableResource):
    pass


class GraphResource(GraphConfig, dg.ConfigurableResource):
    _store: GraphStore | None = PrivateAttr(default=None)

    def store(self, batch: BatchKey | None = None) -> GraphStore:
        """The instance of question batch `batch` (the one instance of a one-batch run)."""
        if self._store is None:
            self._store = build.graph_store(self)
        return self._store if batch is None else self._store.for_batch(batch)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


class ReconcileResource(ReconcileConfig, dg.ConfigurableResource):
    pass


class RetrievalResource(RetrievalConfig, dg.ConfigurableResource):
    pass


class ScoringResource(ScoringConfig, dg.ConfigurableResource):
    pass


class RepeatResource(RepeatConfig, dg.ConfigurableResource):
    pass


class ComparisonResource(ComparisonConfig, dg.ConfigurableResource):
    pass


class CalibrationResource(CalibrationConfig, dg.ConfigurableResource):
    pass


RESOURCE_CLASSES: dict[str, type[dg.ConfigurableResource]] = {
    "paths": PathsResource,
    "corpus": CorpusResource,
    "graph": GraphResource,
    "reconcile": ReconcileResource,
    "retrieval": RetrievalResource,
    "scoring": ScoringResource,
    "repeat": RepeatResource,
    "comparison": ComparisonResource,
    "calibration": CalibrationResource,
}
assert RESOURCE_CLASSES.keys() == SECTIONS.keys()


def resources_for(run: RunConfig) -> dict[str, dg.ConfigurableResource]:
    """The resources a chain configured by `run` builds (the code location's defaults)."""
    return {name: cls(**run.section(name).model_dump()) for name, cls in RESOURCE_CLASSES.items()}


def run_config_of(resources: Any) -> RunConfig:
    """The `RunConfig` a run's resources were configured with."""
    return RunConfig(
        **{
            name: SECTIONS[name].model_validate(
                {f: getattr(getattr(resources, name), f) for f in SECTIONS[name].model_fields}
            )
            for name in SECTIONS
        }
    )
