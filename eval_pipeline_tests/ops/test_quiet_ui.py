"""A quieter UI (issue 27, part 9), on a real Dagster instance in memory.

- a chain's stage runs carry the chain's id as Dagster's backfill id, so the Runs list's
  default view (runs outside backfills) shows the chain run alone;
- only the current K's question batches exist as partitions (a run still in progress keeps
  the ones it uses), so "Materialize all → All" never mixes K=1's and K=2's;
- plot series are named by the options that tell configurations apart (top-k included).
"""

from __future__ import annotations

import dagster as dg

from eval_pipeline.assets.batches import QUESTION_BATCHES, register_batches
from eval_pipeline.assets.tags import (
    CHAIN_JOB_NAME,
    CHAIN_TAG,
    GROUPED_UNDER_TAG,
    STAGE_TAG,
    stage_run_tags,
)
from eval_pipeline.runs.series_label import series_label


def _partitions(instance: dg.DagsterInstance) -> list[str]:
    return sorted(instance.get_dynamic_partitions(QUESTION_BATCHES.name))


def test_stage_runs_are_grouped_under_their_chain_and_out_of_the_default_list() -> None:
    tags = stage_run_tags({CHAIN_TAG: "chain-1", "eval_pipeline/trigger": "cli"}, "goldens")
    assert tags[GROUPED_UNDER_TAG] == "chain-1" and tags[STAGE_TAG] == "goldens"
    assert GROUPED_UNDER_TAG not in stage_run_tags({}, "goldens")  # outside a chain: as it was

    instance = dg.DagsterInstance.ephemeral()

    @dg.op
    def noop() -> None:
        return None

    @dg.job(name="eval_stage_probe")
    def probe():
        noop()

    chain = probe.execute_in_process(instance=instance, tags={CHAIN_TAG: "x"}).run_id
    stage = probe.execute_in_process(
        instance=instance, tags=stage_run_tags({CHAIN_TAG: chain}, "goldens")
    ).run_id
    # What the Runs page's default view asks the run storage for (`exclude_subruns`).
    roots = {r.run_id for r in instance.get_runs(dg.RunsFilter(exclude_subruns=True))}
    assert chain in roots and stage not in roots
    # ...and how a chain's stage runs are found: its tag (docs/chain.md, "The UI").
    found = instance.get_runs(dg.RunsFilter(tags={CHAIN_TAG: chain}))
    assert [r.run_id for r in found] == [stage]


def test_only_the_current_batches_are_partitions() -> None:
    instance = dg.DagsterInstance.ephemeral()
    register_batches(instance, 2)
    assert _partitions(instance) == ["batch-01-of-02", "batch-02-of-02"]
    register_batches(instance, 1)
    assert _partitions(instance) == ["batch-01-of-01"]

    # A chain over three batches still running keeps its keys while a K=1 chain registers.
    running = dg.DagsterRun(
        job_name=CHAIN_JOB_NAME,
        run_id="0" * 8 + "-running-chain",
        status=dg.DagsterRunStatus.STARTED,
        run_config={"resources": {"corpus": {"config": {"batches": 3}}}},
    )
    instance.add_run(running)
    register_batches(instance, 3)
    register_batches(instance, 1)
    assert _partitions(instance) == [
        "batch-01-of-01",
        "batch-01-of-03",
        "batch-02-of-03",
        "batch-03-of-03",
    ]
    instance.report_run_failed(instance.get_run_by_id(running.run_id))
    register_batches(instance, 1)
    assert _partitions(instance) == ["batch-01-of-01"]


def test_series_labels_tell_top_k_apart() -> None:
    pins = {
        "reconciler": {"name": "extractive"},
        "retriever": {"retriever": "fulltext"},
        "top_k": 5,
        "graph": {"backend": "arcadedb"},
        "corpus": {"sample_spec": {"sample": None}},
        "reader": "offline:extractive",
        "judge": {"model": "offline"},
        "scope": "question",
    }
    five = series_label(pins, "9ea6e1da33a63448")
    ten = series_label({**pins, "top_k": 10}, "1234abcd99")
    assert five == (
        "memory extractive, fulltext top-5, arcadedb, sample all, reader offline:extractive, "
        "judge offline · cfg 9ea6e1da"
    )
    assert "fulltext top-10" in ten and ten.endswith("cfg 1234abcd")
    assert "scope haystack" in series_label({**pins, "scope": "haystack"}, "0" * 16)
    lme = {**pins, "reader": "openai:gpt-4o", "reader_prompt": {"prompt": "longmemeval-cot"}}
    assert "reader openai:gpt-4o (longmemeval-cot prompt)," in series_label(lme, "0" * 16)
    project = {**lme, "reader_prompt": {"prompt": "project"}}
    assert "reader openai:gpt-4o, judge" in series_label(project, "0" * 16)
