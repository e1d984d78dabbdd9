"""Resources shared by the assets: where files live, and which corpus a run uses."""

import json
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.corpus.upstream import HF_REVISION, UpstreamSpec
from eval_pipeline.settings import state_dir


def json_options(text: str | None, what: str) -> dict[str, Any]:
    """A resource field holding a JSON object of keyword options (plug-in configuration)."""
    try:
        options = json.loads(text or "{}")
    except ValueError as exc:
        raise dg.Failure(f"{what} is not JSON: {exc}") from None
    if not isinstance(options, dict):
        raise dg.Failure(f"{what} must be a JSON object")
    return options


class ProjectPaths(dg.ConfigurableResource):
    """Directories of the pipeline's state: run-scoped artifacts under `artifacts/`
    (`assets/artifacts.py`), run bundles under `runs/`."""

    state_dir: str | None = None

    def root(self) -> Path:
        return Path(self.state_dir).expanduser().resolve() if self.state_dir else state_dir()

    def runs_dir(self) -> Path:
        return self.root() / "runs"


class CorpusSettings(dg.ConfigurableResource):
    """Which upstream file and which sample. Defaults: the bundled sample, every question."""

    source: str = "sample"  # sample | path | huggingface
    path: str | None = None
    variant: str | None = None  # what the user says; else a pinned sha256 identifies it
    revision: str = HF_REVISION
    sha256: str | None = None
    cache_dir: str | None = None
    sample: int | None = None
    seed: int = 0
    floor: int = 1
    max_sessions_per_question: int | None = None
    tiers: str = "1"  # 1 | 2 | all (tier 2: the authored organizational-memory scenarios)
    light: bool = False  # tier 2: only the one light scenario per use case
    # Question batches, each on a graph instance of its own (corpus/batches.py): the
    # partitions of the graph-bound assets a run materializes, and scored_run reads.
    batches: int = 1

    def tier_selection(self) -> tuple[bool, bool]:
        """(tier 1 included, tier 2 included); a light run is a tier-2 quick check."""
        if self.tiers not in ("1", "2", "all"):
            raise ValueError(f"tiers must be 1, 2 or all, not {self.tiers!r}")
        tier2 = self.tiers in ("2", "all") or self.light
        return self.tiers in ("1", "all"), tier2

    def upstream_spec(self) -> UpstreamSpec:
        return UpstreamSpec(
            source=self.source,
            path=self.path,
            variant=self.variant,
            revision=self.revision,
            sha256=self.sha256,
            cache_dir=self.cache_dir,
        )

    def sample_spec(self) -> SampleSpec:
        return SampleSpec(
            sample=self.sample,
            seed=self.seed,
            floor=self.floor,
            max_sessions_per_question=self.max_sessions_per_question,
        )
