"""The Dagster layer: definitions load, the asset graph is what we promise, the chain runs
stage by stage, and each stage receives exactly the outputs of its own chain."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.assets.jobs import asset_order, stage_job
from eval_pipeline.assets.tags import CHAIN_TAG
from eval_pipeline.config import RunConfig
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.definitions import defs
from eval_pipeline.ops.chain import chain_stages, outcome_of
from eval_pipeline_tests.artifacts import artifact_dir, artifact_output, materialize

CORPUS_KEYS = ["longmemeval_upstream", "goldens", "session_fixtures"]


def test_definitions_load_with_the_promised_asset_keys():
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert set(CORPUS_KEYS) <= keys
    assert graph.get(dg.AssetKey("goldens")).parent_keys == {dg.AssetKey("longmemeval_upstream")}
    assert graph.get(dg.AssetKey("session_fixtures")).parent_keys == {dg.AssetKey("goldens")}
    # The hand-off is by inputs: retrieval reads the goldens, fixtures and memory it is given.
    assert graph.get(dg.AssetKey("retrieval_results")).parent_keys == {
        dg.AssetKey("goldens"),
        dg.AssetKey("session_fixtures"),
        dg.AssetKey("reconciled_graph"),
    }
    for job in ("eval_chain", "eval_stage", "eval_batch"):
        assert defs.resolve_job_def(job) is not None


def test_the_chain_is_the_asset_graph_in_dependency_order():
    stages = chain_stages(stage_job(), asset_order())
    assert stages == (
        "longmemeval_upstream",
        "goldens",
        "session_fixtures",
        "injected_graph",
        "reconciled_graph",
        "retrieval_results",
        "scored_run",
        "run_comparison",
        "noise_floor",
    )


def test_corpus_assets_materialize_with_their_own_checks(tmp_path):
    result = materialize(
        CORPUS_KEYS,
        dg.DagsterInstance.ephemeral(),
        paths={"state_dir": str(tmp_path)},
        corpus={"sample": 12, "seed": 1},
    )
    assert result.success
    mats = {m.asset_key.to_user_string(): m for m in result.get_asset_materialization_events()}
    assert set(mats) == set(CORPUS_KEYS)
    up_meta = mats["longmemeval_upstream"].materialization.metadata
    assert up_meta["source"].value == "sample" and up_meta["sha256_pinned"].value is True
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        "upstream_revision_pinned": True,
        "upstream_sha256_matches": True,
        "upstream_not_oracle": True,
        "goldens_have_evidence": True,
        "fixtures_cover_haystacks": True,
        "protocol_repeated_sessions": True,
    }
    goldens = list(read_jsonl(artifact_dir(result, "goldens") / "goldens.jsonl"))
    assert len(goldens) == 12
    fixtures = list(read_jsonl(artifact_dir(result, "session_fixtures") / "fixtures.jsonl"))
    # The planted canaries are apart from the goldens, their sessions among the fixtures.
    canaries = list(read_jsonl(artifact_dir(result, "goldens") / "canaries.jsonl"))
    assert len(canaries) == 4 and not {g["name"] for g in goldens} & {c["name"] for c in canaries}
    haystacks = [*goldens, *canaries]
    assert {sid for g in haystacks for sid in g["additional_metadata"]["haystack_session_ids"]} == {
        f["session_id"] for f in fixtures
    }
    # Each output names the one it was made from: the chain a bundle's pins come from.
    output = artifact_output(result, "session_fixtures")
    assert output.inputs["goldens"].facts["goldens_sha256"] == output.facts["goldens_sha256"]
    assert output.find("longmemeval_upstream").run_id == result.run_id


def test_a_failing_stage_is_named_and_leaves_nothing_half_written(tmp_path):
    """A conflicting duplicate session fails session_fixtures, not an earlier stage."""
    from eval_pipeline_tests.corpus.records import record, session, write_upstream

    recs = [
        record(
            "q1", sessions=[("answer_q1_1", session("q1", evidence_at=0)), ("pool", session("A"))]
        ),
        record(
            "q2", sessions=[("answer_q2_1", session("q2", evidence_at=0)), ("pool", session("B"))]
        ),
    ]
    up = write_upstream(tmp_path / "up.json", recs)
    result = materialize(
        CORPUS_KEYS,
        dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
        paths={"state_dir": str(tmp_path / "state")},
        corpus={"upstream": str(up)},
    )
    assert not result.success
    failed = [e.step_key for e in result.all_events if e.is_step_failure]
    assert failed == ["session_fixtures"]
    assert not list((tmp_path / "state" / "artifacts").glob("*/session_fixtures"))
    plan = json.loads((artifact_dir(result, "goldens") / "plan.json").read_text())
    assert plan["selected"] == ["q1", "q2"]


def _stage(instance, asset: str, chain: str, state: Path, **sections) -> dg.ExecuteInProcessResult:
    """One stage run of chain `chain`, as the driver launches it."""
    run = RunConfig.model_validate({"paths": {"state_dir": str(state)}, **sections})
    key = dg.AssetKey(asset)
    job = stage_job()
    checks = {k for k in job.asset_layer.asset_graph.asset_check_keys if k.asset_key == key}
    return job.get_subset(asset_selection={key}, asset_check_selection=checks).execute_in_process(
        run_config={"resources": run.resources_config()}, instance=instance, tags={CHAIN_TAG: chain}
    )


def test_two_chains_that_overlap_each_read_their_own_outputs(tmp_path):
    """Chain A's stages interleaved with chain B's on one instance and one state dir: each
    stage consumes its own chain's input, never the other's newer one."""
    instance = dg.DagsterInstance.ephemeral()
    state = tmp_path / "state"
    corpus_a, corpus_b = {"sample": 12, "seed": 1}, {"sample": 16, "seed": 2}
    for asset in ("longmemeval_upstream", "goldens"):
        _stage(instance, asset, "chain-a", state, corpus=corpus_a)
        _stage(instance, asset, "chain-b", state, corpus=corpus_b)
    a = artifact_output(_stage(instance, "session_fixtures", "chain-a", state), "session_fixtures")
    b = artifact_output(_stage(instance, "session_fixtures", "chain-b", state), "session_fixtures")
    assert a.inputs["goldens"].facts["questions"] == 12
    assert b.inputs["goldens"].facts["questions"] == 16
    assert (
        a.inputs["goldens"].find("longmemeval_upstream").run_id
        != b.inputs["goldens"].find("longmemeval_upstream").run_id
    )


def test_a_stage_run_alone_in_a_chain_refuses_an_input_its_chain_never_made(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    state = tmp_path / "state"
    _stage(instance, "longmemeval_upstream", "chain-a", state)
    _stage(instance, "goldens", "chain-a", state)
    with pytest.raises(dg.Failure, match="goldens has not been materialized in this chain"):
        _stage(instance, "session_fixtures", "chain-b", state)


def test_a_rematerialization_outside_any_chain_takes_the_latest_input(tmp_path):
    """The UI's "Materialize" of one asset: its inputs are the latest outputs, and its own
    output names exactly which."""
    instance = dg.DagsterInstance.ephemeral()
    state = {"paths": {"state_dir": str(tmp_path)}}
    first = materialize(CORPUS_KEYS[:2], instance, corpus={"sample": 12}, **state)
    second = materialize(["goldens"], instance, corpus={"sample": 16}, **state)
    fixtures = artifact_output(
        materialize(["session_fixtures"], instance, **state), "session_fixtures"
    )
    assert fixtures.inputs["goldens"].run_id == second.run_id != first.run_id
    assert fixtures.inputs["goldens"].facts["questions"] == 16


def _launch_chain(instance, tmp_path, **sections):
    """eval_chain as the Launchpad launches it: resource config only."""
    run = RunConfig.model_validate({"paths": {"state_dir": str(tmp_path / "state")}, **sections})
    return defs.resolve_job_def("eval_chain").execute_in_process(
        instance=instance, raise_on_error=False, run_config={"resources": run.resources_config()}
    )


def test_eval_chain_runs_stage_by_stage_and_only_the_failed_stage_reads_failed(tmp_path):
    """A truncated upstream launched as eval_chain (the Launchpad's job): only
    longmemeval_upstream was in a run, which failed; nothing downstream was ever planned, so
    Dagster reads it as not run, and the only checks planned are the failed asset's own.
    (Pinned by its own sha256: preflight reads only a file nobody pinned record by record, so
    this one fails in its stage.)"""
    bad = tmp_path / "truncated.json"
    bad.write_text('[{"question_id": "q1", "question_type": "multi-ses')
    pin = hashlib.sha256(bad.read_bytes()).hexdigest()
    instance = dg.DagsterInstance.ephemeral()
    result = _launch_chain(instance, tmp_path, corpus={"upstream": str(bad), "sha256": pin})
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "stage longmemeval_upstream failed" in failure.step_failure_data.error.message
    outcome = outcome_of(result)
    assert [s.asset for s in outcome.repeats[0].stages] == ["longmemeval_upstream"]
    runs = [r for r in instance.get_runs() if r.run_id != result.run_id]
    assert [r.status for r in runs] == [dg.DagsterRunStatus.FAILURE]  # one stage run only
    assert runs[0].tags[CHAIN_TAG] == result.run_id
    keys = [dg.AssetKey(k) for k in ("longmemeval_upstream", "goldens", "injected_graph")]
    records = {
        r.asset_entry.asset_key.to_user_string(): r for r in instance.get_asset_records(keys)
    }
    # Planned only in the failed stage run: the UI's "latest run" of the upstream is that run...
    assert records["longmemeval_upstream"].asset_entry.last_run_id == runs[0].run_id
    # ...and nothing downstream was ever planned, so it cannot read as failed.
    assert "goldens" not in records and "injected_graph" not in records
    planned = instance.get_records_for_run(
        runs[0].run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED
    ).records
    planned_for = {
        r.event_log_entry.dagster_event.event_specific_data.asset_check_key.asset_key
        for r in planned
    }
    assert planned and planned_for == {dg.AssetKey("longmemeval_upstream")}


def test_eval_chain_refuses_a_bad_option_before_its_first_stage(tmp_path):
    """The Launchpad path gets the CLI's preflight: nothing launched, one line naming it."""
    instance = dg.DagsterInstance.ephemeral()
    result = _launch_chain(instance, tmp_path, retrieval={"retriever": "nope.module:Thing"})
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "preflight: --retriever nope.module:Thing" in failure.step_failure_data.error.message
    assert [r.run_id for r in instance.get_runs()] == [result.run_id]  # no stage was run


@pytest.mark.slow
def test_a_stage_materialized_by_hand_after_a_chain(persistent_chain, tmp_path):
    chain = persistent_chain
    """`dagster asset materialize` as a user types it, after `eval-pipeline run`: the graph
    stage's partition is the chain's, its inputs the latest outputs, and its bundle is new."""
    ran = chain.run("--sample", "12", "--label", "first")
    assert ran.returncode == 0, ran.stderr
    env = chain.subprocess_env()
    cli = str(Path(sys.executable).with_name("dagster"))
    # The graph the chain used: its database on the session's server (the code location's
    # defaults are the embedded one under the state dir, which this chain did not use).
    config = tmp_path / "hand.yaml"
    config.write_text(json.dumps({"resources": chain.graph_section()}))
    for select, partition in (
        ("retrieval_results", ["--partition", "batch-01-of-01"]),
        ("scored_run", []),
    ):
        res = subprocess.run(
            [cli, "asset", "materialize", "-m", "eval_pipeline.definitions", "--select", select,
             "-c", str(config), *partition],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
    with chain.environment():
        instance = chain.instance()
        scored = instance.get_latest_materialization_event(dg.AssetKey("scored_run"))
        run_dir = Path(scored.asset_materialization.metadata["run_dir"].value)
        instance.dispose()
    assert run_dir != ran.run_dir and (run_dir / "manifest.json").is_file()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["chain"] is None  # not part of a chain
    assert manifest["pins"]["corpus"]["sample_spec"]["sample"] == 12  # the chain's goldens
