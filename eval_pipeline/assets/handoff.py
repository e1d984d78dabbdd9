"""How stages hand each other their outputs: typed outputs through an IO manager.

Each asset writes its files into a directory of its own for the run that materializes it,
`<state>/artifacts/<run_id>/<asset>[/<partition>]/`, published atomically (staged beside it,
redacted, made private, then renamed into place) with `stage.json`: the `StageOutput` it
returns — what it vouches for (pins, counts, digests) and the outputs it consumed. Its
downstream assets receive that `StageOutput` as an input, loaded by `StageIOManager`.

Which materialization an input is: a chain (every stage run the chain driver launches carries
its id in CHAIN_TAG; a run launched alone is a chain of its own) indexes each output it makes
under `artifacts/chains/<chain>/`, and loads its inputs from there only, so two chains that
overlap never read each other's files, and a bundle's pins are the chain's own. A run outside
any chain that did not make an input itself (a re-materialization from the UI, a hand-run
`dagster asset materialize`) consumes the latest output of that asset (`artifacts/latest/`),
and its output records exactly which.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_origin

import dagster as dg
from pydantic import BaseModel, Field

from eval_pipeline.assets.tags import CHAIN_TAG
from eval_pipeline.atomic import publish_dir, write_text

STAGE_FILE = "stage.json"
ARTIFACTS_DIR = "artifacts"
# Artifacts of this many most recent runs are kept, plus whatever a latest output still uses.
KEEP_RUNS = 30


class StageOutput(BaseModel):
    """One stage's output, and the outputs it consumed (the chain a bundle's pins come from)."""

    asset: str
    run_id: str
    partition: str | None = None
    dir: str
    written_at: str
    facts: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, StageOutput] = Field(default_factory=dict)

    @property
    def path(self) -> Path:
        return Path(self.dir)

    def file(self, name: str) -> Path:
        return self.path / name

    def find(self, asset: str) -> StageOutput | None:
        """This output or the nearest consumed output of `asset`, up the input chain."""
        if self.asset == asset:
            return self
        for consumed in self.inputs.values():
            found = consumed.find(asset)
            if found is not None:
                return found
        return None


def stage_label(context: Any) -> str:
    """The stage as a progress line names it: `retrieval_results [batch-02-of-04]`."""
    name = context.asset_key.to_user_string()
    key = context.partition_key if context.has_partition_key else None
    # One batch of one needs no name: the chain's own line says which stage this is.
    return f"{name} [{key}]" if key and not key.endswith("-of-01") else name


def artifacts_root(root: Path) -> Path:
    return Path(root) / ARTIFACTS_DIR


def chain_of(run: dg.DagsterRun) -> str:
    return run.tags.get(CHAIN_TAG) or run.run_id


@dataclasses.dataclass
class Publication:
    """What `publish` yields: write files into `stage`, fill `facts`; `final` is where they
    will be; `output` is set once the block ends without an error."""

    stage: Path
    final: Path
    facts: dict[str, Any]
    output: StageOutput | None = None


@contextlib.contextmanager
def publish(
    context: Any, root: Path, inputs: dict[str, StageOutput] | None = None
) -> Iterator[Publication]:
    """Stage the artifact of the asset `context` executes (`publish_as`)."""
    with publish_as(
        root,
        context.asset_key.to_user_string(),
        context.run.run_id,
        context.partition_key if context.has_partition_key else None,
        inputs,
    ) as pub:
        yield pub


@contextlib.contextmanager
def publish_as(
    root: Path,
    asset: str,
    run_id: str,
    partition: str | None = None,
    inputs: dict[str, StageOutput] | None = None,
) -> Iterator[Publication]:
    """Stage an artifact; on success `stage.json` is written last and the directory renamed
    into place, so a reader never sees half an artifact. On failure nothing is left behind."""
    final = artifacts_root(root) / run_id / asset
    if partition is not None:
        final = final / partition
    final.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{final.name}.staging-", dir=final.parent))
    pub = Publication(stage=stage, final=final, facts={})
    try:
        yield pub
        output = StageOutput(
            asset=asset,
            run_id=run_id,
            partition=partition,
            dir=str(final),
            written_at=datetime.now(UTC).isoformat(),
            facts=pub.facts,
            inputs=inputs or {},
        )
        (stage / STAGE_FILE).write_text(output.model_dump_json(indent=2) + "\n", "utf-8")
        # Redacted and private, then renamed; a re-executed step of this same run replaces
        # its own earlier attempt.
        publish_dir(stage, final, replace=True)
        pub.output = output
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if pub.output is None:  # nothing published: no empty directory left for it either
            for parent in (final.parent, final.parent.parent):
                with contextlib.suppress(OSError):
                    parent.rmdir()


def index_output(root: Path, output: StageOutput, chain: str) -> None:
    """Make `output` the one chain `chain` hands on, and the latest of its asset."""
    name = _index_name(output.asset, output.partition)
    _write_pointer(artifacts_root(root) / "chains" / chain / name, output)
    _write_pointer(artifacts_root(root) / "latest" / name, output)


def chain_output(root: Path, chain: str, asset: str, partition: str | None) -> StageOutput | None:
    """The output of `asset` (`partition`) chain `chain` hands on now, if any."""
    return _read_pointer(artifacts_root(root) / "chains" / chain / _index_name(asset, partition))


def load_output(path: Path) -> StageOutput:
    return StageOutput.model_validate_json((Path(path) / STAGE_FILE).read_text("utf-8"))


def _index_name(asset: str, partition: str | None) -> str:
    return f"{asset}@{partition}.json" if partition else f"{asset}.json"


def _write_pointer(path: Path, output: StageOutput) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps({"run_id": output.run_id, "dir": output.dir}))


def _read_pointer(path: Path) -> StageOutput | None:
    try:
        pointer = json.loads(path.read_text("utf-8"))
        return load_output(Path(pointer["dir"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError) as exc:
        raise dg.Failure(f"the artifact {path} points at cannot be read ({exc})") from None


class StageIOManager(dg.IOManager):
    """Stores nothing itself (the asset published its artifact): indexes each output under
    its chain and as the latest of its asset, and loads inputs by that index."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _root(self) -> Path:
        return artifacts_root(self.root)

    def handle_output(self, context: dg.OutputContext, obj: StageOutput | None) -> None:
        if obj is None:  # an op's report (the chain's), not a stage output: nothing to keep
            return
        if not isinstance(obj, StageOutput):
            raise dg.Failure(f"{context.name} returned a {type(obj).__name__}, not a StageOutput")
        index_output(self.root, obj, chain_of(context.step_context.dagster_run))

    def load_input(self, context: dg.InputContext) -> StageOutput | dict[str, StageOutput]:
        asset = context.asset_key.to_user_string()
        if get_origin(context.dagster_type.typing_type) is dict:
            # Every batch of a partitioned asset, for one unpartitioned consumer.
            keys = context.asset_partition_keys if context.has_asset_partitions else []
            found = {k: self._find(context, asset, k, required=False) for k in keys}
            return {k: v for k, v in found.items() if v is not None}
        partition = None
        if context.has_asset_partitions:
            # The run's own partition: an asset check on a partitioned asset is given all of
            # them, but checks the one its run materialized.
            partition = context.partition_key if context.has_partition_key else None
            partition = partition or context.asset_partition_key
        found = self._find(context, asset, partition, required=True)
        assert found is not None
        return found

    def _find(
        self, context: dg.InputContext, asset: str, partition: str | None, *, required: bool
    ) -> StageOutput | None:
        run = context.step_context.dagster_run
        name = _index_name(asset, partition)
        found = _read_pointer(self._root() / "chains" / chain_of(run) / name)
        if found is None and CHAIN_TAG not in run.tags:
            found = _read_pointer(self._root() / "latest" / name)
        if found is None and required:
            where = f" for {partition}" if partition else ""
            what = "in this chain" if CHAIN_TAG in run.tags else "yet"
            raise dg.Failure(f"{asset}{where} has not been materialized {what}: materialize it")
        return found


def prune_artifacts(root: Path, keep_runs: int = KEEP_RUNS) -> list[Path]:
    """Remove run artifact directories beyond the `keep_runs` newest, except those a latest
    output (or an output it consumed) still uses. Returns what was removed."""
    base = artifacts_root(root)
    if not base.is_dir():
        return []
    protected: set[Path] = set()

    def keep(output: StageOutput) -> None:
        protected.add(output.path.resolve())
        for consumed in output.inputs.values():
            keep(consumed)

    for pointer in (base / "latest").glob("*.json"):
        try:
            output = _read_pointer(pointer)
        except dg.Failure:
            continue
        if output is not None:
            keep(output)
    runs = sorted(
        (p for p in base.iterdir() if p.is_dir() and p.name not in ("chains", "latest")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    removed = []
    for run_dir in runs[keep_runs:]:
        resolved = run_dir.resolve()
        if any(k == resolved or resolved in k.parents for k in protected):
            continue
        shutil.rmtree(run_dir, ignore_errors=True)
        removed.append(run_dir)
    return removed


@dg.io_manager(required_resource_keys={"paths"})
def stage_io_manager(init_context: dg.InitResourceContext) -> StageIOManager:
    """The IO manager of every stage, rooted in the `paths` resource's state dir."""
    return StageIOManager(init_context.resources.paths.root())
