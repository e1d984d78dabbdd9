"""Test helpers for run-scoped artifacts: find what a run published, or publish inputs for an
asset materialized on its own (as a later run of a partial selection would find them)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.assets.artifacts import ARTIFACT_META, StageRecord, load_record, publish


def artifact_dir(result: Any, asset: str) -> Path:
    """The artifact directory `asset`'s materialization in `result` points at."""
    for mat in result.get_asset_materialization_events():
        if mat.asset_key.to_user_string() == asset:
            return Path(str(mat.materialization.metadata[ARTIFACT_META].value))
    raise AssertionError(f"{asset} was not materialized")


def artifact_record(result: Any, asset: str) -> StageRecord:
    return load_record(artifact_dir(result, asset))


def seed_artifact(
    instance: dg.DagsterInstance,
    root: Path,
    asset: str,
    *,
    files: dict[str, Path] | None = None,
    facts: dict[str, Any] | None = None,
    inputs: dict[str, StageRecord] | None = None,
    run_id: str = "seeded-run",
) -> StageRecord:
    """Publish an artifact for `asset` and record a materialization of it on `instance`."""
    with publish(root, asset, run_id, inputs) as pub:
        for name, src in (files or {}).items():
            shutil.copyfile(src, pub.stage / name)
        pub.facts.update(facts or {})
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            asset, metadata={ARTIFACT_META: dg.MetadataValue.path(str(pub.final))}
        )
    )
    return load_record(pub.final)


def seed_corpus_and_graph(
    instance: dg.DagsterInstance, root: Path, goldens: list[dict], store: Any
) -> None:
    """Records of goldens, session_fixtures, injected_graph and reconciled_graph consistent
    with the graph `store` already holds (injected by the test itself), so retrieval_results
    and scored_run can be materialized alone over it."""
    from eval_pipeline.corpus.jsonl import write_jsonl
    from eval_pipeline.corpus.upstream import file_sha256
    from eval_pipeline.graph.checks import read_graph_fingerprint

    src = root / "seed"
    src.mkdir(parents=True, exist_ok=True)
    write_jsonl(src / "goldens.jsonl", goldens)
    digest = file_sha256(src / "goldens.jsonl")
    (src / "manifest.json").write_text("{}\n")
    g = seed_artifact(
        instance,
        root,
        "goldens",
        files={"goldens.jsonl": src / "goldens.jsonl"},
        facts={"goldens_sha256": digest},
    )
    fixtures = seed_artifact(
        instance,
        root,
        "session_fixtures",
        facts={"fixtures_sha256": "seeded", "goldens_sha256": digest},
        inputs={"goldens": g},
    )
    record = read_graph_fingerprint(store)
    injected = seed_artifact(
        instance,
        root,
        "injected_graph",
        facts={"fingerprint": record["fingerprint"]},
        inputs={"session_fixtures": fixtures},
    )
    seed_artifact(instance, root, "reconciled_graph", inputs={"injected_graph": injected})
