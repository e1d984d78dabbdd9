"""Test helpers for stage outputs: find what a run published, seed inputs for an asset
materialized on its own (as a later run of a partial selection finds them: the latest output
of each input), and the resources of a run configured for a test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.assets.batches import register_batches
from eval_pipeline.assets.handoff import (
    StageOutput,
    index_output,
    load_output,
    publish_as,
    stage_io_manager,
)
from eval_pipeline.assets.jobs import ASSETS, CHECKS
from eval_pipeline.assets.resources import resources_for
from eval_pipeline.config import RunConfig

ONE_BATCH = "batch-01-of-01"


def artifact_dir(result: Any, asset: str) -> Path:
    """The artifact directory `asset`'s materialization in `result` points at."""
    for mat in result.get_asset_materialization_events():
        if mat.asset_key.to_user_string() == asset:
            return Path(str(mat.materialization.metadata["artifact_dir"].value))
    raise AssertionError(f"{asset} was not materialized")


def artifact_output(result: Any, asset: str) -> StageOutput:
    return load_output(artifact_dir(result, asset))


def seed_output(
    root: Path,
    asset: str,
    *,
    files: dict[str, Path] | None = None,
    facts: dict[str, Any] | None = None,
    inputs: dict[str, StageOutput] | None = None,
    partition: str | None = None,
    run_id: str = "seeded-run",
) -> StageOutput:
    """Publish an output of `asset` under state dir `root` and make it the latest one."""
    with publish_as(root, asset, run_id, partition, inputs) as pub:
        for name, src in (files or {}).items():
            shutil.copyfile(src, pub.stage / name)
        pub.facts.update(facts or {})
    assert pub.output is not None
    index_output(root, pub.output, chain=run_id)
    return pub.output


def graph_section(store: Any) -> dict[str, Any]:
    """The `graph` section of a run on the embedded server and database `store` is a client
    of (a test's fresh database on the session's server)."""
    return {"data_dir": store.data_dir, "database": store.database, "heap": store.heap}


def run_resources(**sections: Any) -> dict[str, Any]:
    """The resources of a run configured with `sections` (e.g. `corpus={"sample": 12}`), and
    the stage IO manager."""
    return {**resources_for(RunConfig.model_validate(sections)), "io_manager": stage_io_manager}


def materialize(
    selection: list[str],
    instance: dg.DagsterInstance,
    *,
    partition: str | None = None,
    raise_on_error: bool = True,
    **sections: Any,
) -> dg.ExecuteInProcessResult:
    """Materialize the assets named in `selection` (with their checks) as a run outside any
    chain does: inputs it does not make are the latest ones."""
    register_batches(instance, 1)
    return dg.materialize(
        [*ASSETS, *CHECKS],
        selection=selection,
        instance=instance,
        resources=run_resources(**sections),
        partition_key=partition,
        raise_on_error=raise_on_error,
    )


def seed_corpus_and_graph(root: Path, goldens: list[dict], store: Any) -> None:
    """Outputs of goldens, session_fixtures, injected_graph and reconciled_graph consistent
    with the graph `store` already holds (injected by the test itself), so retrieval_results
    and scored_run can be materialized alone over it."""
    from eval_pipeline.corpus.jsonl import write_jsonl
    from eval_pipeline.corpus.upstream import file_sha256
    from eval_pipeline.graph.checks import read_graph_fingerprint

    src = root / "seed"
    src.mkdir(parents=True, exist_ok=True)
    write_jsonl(src / "goldens.jsonl", goldens)
    digest = file_sha256(src / "goldens.jsonl")
    # The corpus manifest scored_run pins the bundle's corpus from (`build_manifest`).
    corpus_manifest = {
        "upstream": {"source": "seeded", "file_name": "seeded.json", "sha256": "seeded"},
        "sample_spec": {"sample": None, "seed": 0, "floor": 1},
        "comparable": True,
        "tiers": "1",
        "files": {"goldens.jsonl": digest, "fixtures.jsonl": "seeded"},
    }
    (src / "manifest.json").write_text(json.dumps(corpus_manifest, indent=1) + "\n")
    g = seed_output(
        root,
        "goldens",
        files={"goldens.jsonl": src / "goldens.jsonl"},
        facts={"goldens_sha256": digest},
    )
    fixtures = seed_output(
        root,
        "session_fixtures",
        files={"manifest.json": src / "manifest.json"},  # scored_run reads the corpus manifest
        facts={"fixtures_sha256": "seeded", "goldens_sha256": digest},
        inputs={"goldens": g},
    )
    record = read_graph_fingerprint(store)
    injected = seed_output(
        root,
        "injected_graph",
        facts={"fingerprint": record["fingerprint"]},
        inputs={"session_fixtures": fixtures},
        partition=ONE_BATCH,
    )
    seed_output(root, "reconciled_graph", inputs={"injected_graph": injected}, partition=ONE_BATCH)
