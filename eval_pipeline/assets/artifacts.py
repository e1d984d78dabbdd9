"""Run-scoped artifacts: how stages hand each other their outputs.

Each asset writes into a directory of its own for the Dagster run that materializes it,
`<state>/artifacts/<run_id>/<asset>/`, published atomically (staged beside it, then renamed),
with a `stage.json` record: what the stage vouches for (pins, counts, digests) and the records
of the inputs it consumed. Its materialization's metadata names the directory.

Every file is redacted (secret values from the environment, whole or in part) and made private
(0600, directories 0700) before the artifact is published.

A stage finds an input through the materializations, never through a fixed path: the input's
materialization in *this* run when the run materialized it, otherwise the latest one (a run
of only the downstream assets consumes what is there, and records exactly which). Two runs
that overlap can therefore never read each other's files, and a run's manifest is built from
the chain of records its own stages consumed (`StageRecord.inputs`), not from whatever is
latest on the instance.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import BaseModel, Field

from eval_pipeline.llm.credentials import redact_tree

ARTIFACT_META = "artifact_dir"
STAGE_FILE = "stage.json"
ARTIFACTS_DIR = "artifacts"
# Artifacts of this many most recent Dagster runs are kept (plus whatever the latest
# materialization of any asset still uses); older ones are pruned when a corpus is built. A
# chain runs each stage in a run of its own and six stages publish artifacts: about five chains.
KEEP_RUNS = 30
# Every asset that publishes an artifact, in chain order.
ARTIFACT_ASSETS = (
    "longmemeval_upstream",
    "goldens",
    "session_fixtures",
    "injected_graph",
    "reconciled_graph",
    "retrieval_results",
)


class StageRecord(BaseModel):
    """`stage.json`: one stage's output, and the records of the inputs it consumed."""

    asset: str
    run_id: str
    dir: str
    written_at: str
    facts: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, StageRecord] = Field(default_factory=dict)

    @property
    def path(self) -> Path:
        return Path(self.dir)

    def file(self, name: str) -> Path:
        return self.path / name

    def find(self, asset: str) -> StageRecord | None:
        """This record or the nearest input record of `asset`, searching the input chain."""
        if self.asset == asset:
            return self
        for record in self.inputs.values():
            found = record.find(asset)
            if found is not None:
                return found
        return None


def artifacts_root(state_root: Path) -> Path:
    return Path(state_root) / ARTIFACTS_DIR


def run_id_of(context: Any) -> str:
    """The Dagster run id of an asset or asset-check execution context."""
    run = getattr(context, "run", None)
    if run is not None:
        return run.run_id
    return context.run_id


def materialization_in_run(
    instance: dg.DagsterInstance, key: dg.AssetKey, run_id: str
) -> dg.EventLogEntry | None:
    """The latest materialization of `key` within run `run_id`, if that run made one."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
    ).records
    for record in reversed(records):
        event = record.event_log_entry.dagster_event
        if event is not None and event.asset_key == key:
            return record.event_log_entry
    return None


def consumed_materialization(
    instance: dg.DagsterInstance, key: dg.AssetKey, run_id: str, partition: str | None = None
) -> dg.EventLogEntry | None:
    """This run's materialization of `key`, else the latest one on the instance (of
    `partition`, for an asset partitioned by question batch)."""
    here = materialization_in_run(instance, key, run_id)
    if here is not None and (partition is None or here.dagster_event.partition == partition):
        return here
    if partition is None:
        return instance.get_latest_materialization_event(key)
    found = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]),
        limit=1,
        ascending=False,
    ).records
    return found[0].event_log_entry if found else None


def record_of(entry: dg.EventLogEntry | None, asset: str) -> StageRecord:
    """The stage record a materialization points at, or a one-line dg.Failure."""
    mat = entry.asset_materialization if entry is not None else None
    if mat is None:
        raise dg.Failure(f"{asset} has never been materialized: materialize it first")
    meta = mat.metadata.get(ARTIFACT_META)
    if meta is None:
        raise dg.Failure(
            f"the latest {asset} materialization has no run-scoped artifact (made by an older "
            f"version of the pipeline): materialize {asset} again"
        )
    path = Path(str(meta.value)) / STAGE_FILE
    try:
        return StageRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError:
        raise dg.Failure(
            f"the artifact of {asset} (run {entry.run_id}) is gone ({path}): materialize "
            f"{asset} again"
        ) from None


def _partition_of(context: Any, asset: str) -> str | None:
    """The question batch whose `asset` this execution consumes (None: not partitioned)."""
    from eval_pipeline.assets.batches import BATCHED_ASSETS

    if asset not in BATCHED_ASSETS or not getattr(context, "has_partition_key", False):
        return None  # an unpartitioned execution consumes the latest, whatever its batch
    return context.partition_key


def input_record(context: Any, asset: str) -> StageRecord:
    """The record of input `asset` as this execution consumes it (this run's, else latest;
    for a batch-partitioned input, that of this execution's batch)."""
    partition = _partition_of(context, asset)
    entry = consumed_materialization(
        context.instance, dg.AssetKey(asset), run_id_of(context), partition
    )
    if entry is None and partition is not None:
        raise dg.Failure(f"{asset} has never been materialized for {partition}: materialize it")
    return record_of(entry, asset)


def batch_record(
    context: Any, asset: str, partition: str, *, unpartitioned_ok: bool = False
) -> StageRecord:
    """For an unpartitioned consumer: the record of batch `partition` of `asset`; with
    `unpartitioned_ok` (a run of one batch), a newer materialization made without a partition
    counts too."""
    key, run_id = dg.AssetKey(asset), run_id_of(context)
    entry = consumed_materialization(context.instance, key, run_id, partition)
    if unpartitioned_ok:
        plain = consumed_materialization(context.instance, key, run_id)
        if (
            plain is not None
            and plain.dagster_event.partition is None
            and (entry is None or plain.timestamp > entry.timestamp)
        ):
            entry = plain
    if entry is None:
        raise dg.Failure(f"{asset} has never been materialized for {partition}: materialize it")
    return record_of(entry, asset)


def materialization_metadata(context: Any, asset: str) -> dict[str, Any]:
    """Plain metadata values of `asset`'s materialization in this run (else the latest)."""
    entry = consumed_materialization(
        context.instance, dg.AssetKey(asset), run_id_of(context), _partition_of(context, asset)
    )
    mat = entry.asset_materialization if entry is not None else None
    if mat is None:
        return {}
    return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}


def own_record(context: Any, asset: str) -> StageRecord:
    """For an asset check: the record of the materialization it checks (this run's first)."""
    return input_record(context, asset)


def artifact_dir(root: Path, run_id: str, asset: str) -> Path:
    """Where `asset`'s artifact of run `run_id` lives once published."""
    return artifacts_root(root) / run_id / asset


@dataclasses.dataclass
class Publication:
    """What `publish` yields: write files into `stage`, fill `facts`; `final` is where the
    artifact will be once the block ends without an error."""

    stage: Path
    final: Path
    facts: dict[str, Any]


@contextlib.contextmanager
def publish(
    root: Path, asset: str, run_id: str, inputs: dict[str, StageRecord] | None = None
) -> Iterator[Publication]:
    """Stage an artifact; on success `stage.json` is written last and the directory renamed
    into place, so a reader never sees half an artifact. On failure nothing is left behind."""
    final = artifact_dir(root, run_id, asset)
    final.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{asset}.staging-", dir=final.parent))
    pub = Publication(stage=stage, final=final, facts={})
    try:
        yield pub
        record = StageRecord(
            asset=asset,
            run_id=run_id,
            dir=str(final),
            written_at=datetime.now(UTC).isoformat(),
            facts=pub.facts,
            inputs=inputs or {},
        )
        (stage / STAGE_FILE).write_text(record.model_dump_json(indent=2) + "\n", "utf-8")
        # The same redaction as a run bundle, and private permissions, for every file.
        redact_tree(stage)
        if final.exists():  # a re-executed step of this same run: its own earlier attempt
            shutil.rmtree(final)
        os.replace(stage, final)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def load_record(path: Path) -> StageRecord:
    return StageRecord.model_validate_json((Path(path) / STAGE_FILE).read_text("utf-8"))


def prune_artifacts(root: Path, keep: set[Path], keep_runs: int = KEEP_RUNS) -> list[Path]:
    """Remove run artifact directories beyond the `keep_runs` newest, except those in `keep`
    (artifacts a latest materialization still points at). Returns what was removed."""
    base = artifacts_root(root)
    if not base.is_dir():
        return []
    runs = sorted(
        (p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    protected = {p.resolve() for p in keep}
    removed = []
    for run_dir in runs[keep_runs:]:
        if any(k == run_dir.resolve() or run_dir.resolve() in k.parents for k in protected):
            continue
        shutil.rmtree(run_dir, ignore_errors=True)
        removed.append(run_dir)
    return removed


def latest_artifact_dirs(
    instance: dg.DagsterInstance, assets: tuple[str, ...] = ARTIFACT_ASSETS
) -> set[Path]:
    """Artifact directories the latest materialization of each asset still uses: its own and
    those of every input record in its chain."""
    out: set[Path] = set()

    def walk(record: StageRecord) -> None:
        out.add(record.path)
        for child in record.inputs.values():
            walk(child)

    for asset in assets:
        entry = instance.get_latest_materialization_event(dg.AssetKey(asset))
        mat = entry.asset_materialization if entry is not None else None
        meta = mat.metadata.get(ARTIFACT_META) if mat is not None else None
        if meta is None:
            continue
        try:
            walk(load_record(Path(str(meta.value))))
        except (OSError, ValueError):
            out.add(Path(str(meta.value)))
    return out
