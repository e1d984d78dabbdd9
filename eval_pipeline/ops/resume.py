"""`eval-pipeline run --resume RUN`: an interrupted or incomplete chain goes on, with its pins.

RUN names the chain: its run id (Ctrl-C prints it; an interrupted chain may have left no
bundle), or a bundle it wrote (a path, or a name in the runs dir: the manifest's `chain`). The
options are the chain's own, read from its `eval_chain` run in the Dagster instance; an option
given beside `--resume` that differs from them is refused with one line (it would change the
pins: start a new run instead). The resumed chain runs under the same chain id, so its stages
load what the interrupted ones handed on (`artifacts/chains/<chain>/`).

A stage is kept, not run again, when its output is the one the chain hands on, the run that
made it succeeded, and every output it consumed is still the chain's (so once a stage runs
again, everything after it does too). Retrieval is kept only when it left no question
unscored by infrastructure; run again, it keeps each question its journal holds measured
(`retrieve.journal`), and judging again replays the LLM cache (answers that failed were never
cached, so they are asked again). Repeats' retrieval and scoring are run again (their cache
makes that cheap). Not checked: whether someone rebuilt the graph instance in between — the
retrieval stage's own blocking check (the graph is the chain's) stops the chain then.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import BaseModel

from eval_pipeline.assets.graph_lease import GRAPH_STEPS
from eval_pipeline.assets.handoff import chain_output
from eval_pipeline.assets.resources import PathsResource
from eval_pipeline.assets.tags import CHAIN_JOB_NAME, CHAIN_TAG
from eval_pipeline.config import SECTIONS, RunConfig, ScoringConfig
from eval_pipeline.corpus.batches import BatchKey

VERDICT = ("scoring", "verdict")


class Kept(BaseModel):
    """A stage a resumed chain keeps: the run that made its output, and what it reported."""

    run_id: str
    metadata: dict[str, Any] = {}


class ResumeError(ValueError):
    """`--resume RUN` cannot go on: one line saying why."""


def _runs_dir(tree: Mapping[str, Any]) -> Path:
    paths = PathsResource(state_dir=(tree.get("paths") or {}).get("state_dir"))
    return paths.runs_dir(ScoringConfig(runs_dir=(tree.get("scoring") or {}).get("runs_dir")))


def chain_of_target(target: str, runs_dir: Path) -> str:
    """The chain id RUN names: a bundle's manifest `chain`, else RUN itself."""
    for candidate in (Path(target).expanduser(), runs_dir / target):
        manifest = candidate / "manifest.json"
        if manifest.is_file():
            chain = json.loads(manifest.read_text("utf-8")).get("chain")
            if not chain:
                raise ResumeError(f"--resume {target}: the bundle names no chain to resume")
            return str(chain)
    return target


def _leaves(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple, Any]]:
    out: list[tuple[tuple, Any]] = []
    for key, value in tree.items():
        if isinstance(value, Mapping) and (prefix or key in SECTIONS):
            out += _leaves(value, (*prefix, key))
        else:
            out.append(((*prefix, key), value))
    return out


def resumed_config(
    instance: dg.DagsterInstance, target: str, given: Mapping[str, Any], flag_of: Any
) -> RunConfig:
    """The RunConfig the chain RUN ran with, set to resume it; `given` (the options given
    beside --resume, RunConfig's nested shape) must agree with it. `flag_of(path)` names an
    option for the refusal."""
    chain = chain_of_target(target, _runs_dir(given))
    run = instance.get_run_by_id(chain)
    if run is None or run.job_name != CHAIN_JOB_NAME:
        raise ResumeError(
            f"--resume {target}: no eval_chain run {chain} in this Dagster instance "
            "(a chain run id as Ctrl-C printed it, or a run bundle of one)"
        )
    if not run.is_finished:
        raise ResumeError(f"--resume {target}: chain {chain} is still running")
    if run.status == dg.DagsterRunStatus.SUCCESS:
        raise ResumeError(f"--resume {target}: chain {chain} ended complete; nothing to resume")
    resources = (run.run_config or {}).get("resources") or {}
    old = RunConfig.model_validate(
        {name: (resources.get(name) or {}).get("config") or {} for name in SECTIONS}
    )
    recorded = old.model_dump()
    for path, value in _leaves(given):
        if path[0] == "paths":
            continue  # where state lives and what to resume: not the run's options
        have: Any = recorded
        for part in path:
            have = have.get(part) if isinstance(have, Mapping) else None
        if path == VERDICT and have != value:
            # An unset verdict was the judge's default: asking for that same method is no
            # change; the chain keeps its option as recorded.
            chosen = old.scoring.verdict_choice()
            if chosen.method == value:
                continue
            have = f"{chosen.method} ({chosen.chosen})"
        if have != value:
            raise ResumeError(
                f"--resume {target}: option {flag_of(path)} is {have!r} in that chain, not "
                f"{value!r}; a resumed run keeps its options (start a new run to change them)"
            )
    return old.model_copy(update={"paths": old.paths.model_copy(update={"resume": chain})})


def kept_stage(
    instance: dg.DagsterInstance,
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
    asset: str,
    batch: BatchKey,
) -> Kept | None:
    """What a resumed chain keeps of the stage (see the module docstring), or None: run it."""
    resources = run_config.get("resources") or {}
    paths = (resources.get("paths") or {}).get("config") or {}
    if not paths.get("resume") or CHAIN_TAG not in tags:
        return None
    repeat = (resources.get("repeat") or {}).get("config") or {}
    if repeat.get("index") and asset in REPEATED:
        return None  # a repeat's own sample: run again (the cache replays it)
    root = PathsResource(state_dir=paths.get("state_dir")).root()
    chain = tags[CHAIN_TAG]
    partition = batch.key if asset in GRAPH_STEPS else None
    output = chain_output(root, chain, asset, partition)
    if output is None:
        return None
    made = instance.get_run_by_id(output.run_id)
    if made is None or made.status != dg.DagsterRunStatus.SUCCESS:
        return None
    for consumed in output.inputs.values():
        now = chain_output(root, chain, consumed.asset, consumed.partition)
        if now is None or now.run_id != consumed.run_id:
            return None  # an upstream stage ran again: this one must too
    if asset == "retrieval_results" and output.facts.get("unscored"):
        return None  # questions left unscored by infrastructure: retrieve them again
    metadata = {"run_dir": output.facts["run_dir"]} if output.facts.get("run_dir") else {}
    return Kept(run_id=output.run_id, metadata=metadata)


REPEATED = ("retrieval_results", "scored_run", "reconciled_graph")
