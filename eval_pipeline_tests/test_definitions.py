"""The Dagster layer: definitions load, the asset graph is what we promise, the chain runs."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.definitions import defs
from eval_pipeline_tests.artifacts import artifact_dir

CORPUS_KEYS = {"longmemeval_upstream", "goldens", "session_fixtures"}


def test_definitions_load_with_the_promised_asset_keys():
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert CORPUS_KEYS <= keys
    graph = defs.resolve_asset_graph()
    assert graph.get(dg.AssetKey("goldens")).parent_keys == {dg.AssetKey("longmemeval_upstream")}
    assert graph.get(dg.AssetKey("session_fixtures")).parent_keys == {dg.AssetKey("goldens")}
    assert defs.resolve_job_def("eval_chain") is not None


def test_corpus_assets_materialize_in_process(tmp_path):
    """The assets' own job (each stage of the chain runs in it), limited to the corpus."""
    result = defs.resolve_job_def("eval_stage").execute_in_process(
        instance=dg.DagsterInstance.ephemeral(),
        asset_selection=[dg.AssetKey(k) for k in CORPUS_KEYS],
        run_config={
            "resources": {
                "paths": {"config": {"state_dir": str(tmp_path)}},
                "corpus": {"config": {"sample": 12, "seed": 1}},
            }
        },
    )
    assert result.success
    mats = {m.asset_key.to_user_string(): m for m in result.get_asset_materialization_events()}
    assert set(mats) == CORPUS_KEYS
    up_meta = mats["longmemeval_upstream"].materialization.metadata
    assert up_meta["source"].value == "sample" and up_meta["sha256_pinned"].value is True
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        "upstream_revision_pinned": True,
        "upstream_sha256_matches": True,
        "upstream_not_oracle": True,
        "goldens_have_evidence": True,
        "fixtures_cover_haystacks": True,
    }
    goldens = list(read_jsonl(artifact_dir(result, "goldens") / "goldens.jsonl"))
    assert len(goldens) == 12
    fixtures = list(read_jsonl(artifact_dir(result, "session_fixtures") / "fixtures.jsonl"))
    assert {sid for g in goldens for sid in g["additional_metadata"]["haystack_session_ids"]} == {
        f["session_id"] for f in fixtures
    }


def test_a_failing_stage_is_named_and_its_check_blocks(tmp_path):
    """A conflicting duplicate session fails session_fixtures, not an earlier stage."""
    import json

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
    result = defs.resolve_job_def("eval_stage").execute_in_process(
        instance=dg.DagsterInstance.ephemeral(),
        asset_selection=[dg.AssetKey(k) for k in CORPUS_KEYS],
        raise_on_error=False,
        run_config={
            "resources": {
                "paths": {"config": {"state_dir": str(tmp_path / "state")}},
                "corpus": {"config": {"source": "path", "path": str(up)}},
            }
        },
    )
    assert not result.success
    failed = [e.step_key for e in result.all_events if e.is_step_failure]
    assert failed == ["session_fixtures"]
    # Nothing half written: the failed stage published no artifact.
    assert not list((tmp_path / "state" / "artifacts").glob("*/session_fixtures"))
    plan = json.loads((artifact_dir(result, "goldens") / "plan.json").read_text())
    assert plan["selected"] == ["q1", "q2"]


def _launch_chain(instance, tmp_path, **resources):
    """eval_chain as the Launchpad launches it: resource config only."""
    config = {name: {"config": values} for name, values in resources.items()}
    config["paths"] = {"config": {"state_dir": str(tmp_path / "state")}}
    return defs.resolve_job_def("eval_chain").execute_in_process(
        instance=instance, raise_on_error=False, run_config={"resources": config}
    )


def test_eval_chain_runs_stage_by_stage_and_only_the_failed_stage_reads_failed(tmp_path):
    """A truncated upstream launched as eval_chain (the Launchpad's job): only
    longmemeval_upstream is in a failed run; nothing downstream was ever planned, so Dagster
    reads it as not run, and no check as execution-failed."""
    bad = tmp_path / "truncated.json"
    bad.write_text('[{"question_id": "q1", "question_type": "multi-ses')
    instance = dg.DagsterInstance.ephemeral()
    result = _launch_chain(instance, tmp_path, corpus={"source": "path", "path": str(bad)})
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "stage longmemeval_upstream failed" in failure.step_failure_data.error.message
    runs = [r for r in instance.get_runs() if r.run_id != result.run_id]
    assert [r.status for r in runs] == [dg.DagsterRunStatus.FAILURE]  # one stage run only
    assert runs[0].tags["eval_pipeline/chain_run"] == result.run_id
    keys = [dg.AssetKey(k) for k in ("longmemeval_upstream", "goldens", "injected_graph")]
    records = {
        r.asset_entry.asset_key.to_user_string(): r for r in instance.get_asset_records(keys)
    }
    # Planned only in the failed stage run: the UI's "latest run" of the upstream is that run...
    assert records["longmemeval_upstream"].asset_entry.last_run_id == runs[0].run_id
    # ...and nothing downstream was ever planned, so it cannot read as failed.
    assert "goldens" not in records and "injected_graph" not in records
    planned_checks = instance.get_records_for_run(
        runs[0].run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED
    ).records
    assert planned_checks == []  # checks run after their asset, in a run of their own


def test_eval_chain_refuses_a_bad_option_before_its_first_stage(tmp_path):
    """The Launchpad path gets the CLI's preflight: nothing launched, one line naming it."""
    instance = dg.DagsterInstance.ephemeral()
    result = _launch_chain(instance, tmp_path, retrieval={"retriever": "nope.module:Thing"})
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "preflight: --retriever nope.module:Thing" in failure.step_failure_data.error.message
    assert [r.run_id for r in instance.get_runs()] == [result.run_id]  # no stage was run


def test_eval_chain_over_two_batches_materializes_each_partition_then_one_scored_run(tmp_path):
    """The Launchpad path with `corpus.batches: 2`: each batch's graph stages are runs of
    their own partition, on their own embedded server, and one scored_run reads both."""
    from eval_pipeline.graph import server

    (tmp_path / "dagster_home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster_home"))
    data_dir = tmp_path / "graph" / "arcadedb"
    try:
        result = _launch_chain(
            instance, tmp_path, corpus={"batches": 2}, graph={"data_dir": str(data_dir)}
        )
        assert result.success
        stage_runs = [r for r in instance.get_runs() if r.run_id != result.run_id]
        partitions = sorted(
            (r.tags.get("dagster/partition"), r.tags["eval_pipeline/graph_instance"])
            for r in stage_runs
            if r.tags.get("dagster/partition")
        )
        # An asset run and a check run per graph stage and batch, each naming its instance.
        assert partitions == sorted(
            (key, f"default/{key}")
            for key in ("batch-01-of-02", "batch-02-of-02")
            for _ in range(6)
        )
        assert all(r.tags["eval_pipeline/chain_run"] == result.run_id for r in stage_runs)
        scored = instance.get_latest_materialization_event(dg.AssetKey("scored_run"))
        run_dir = scored.asset_materialization.metadata["run_dir"].value
        manifest = json.loads((Path(run_dir) / "manifest.json").read_text())
        assert manifest["pins"]["partitioning"]["batches"] == 2
        assert [b["batch"] for b in manifest["batches"]] == ["batch-01-of-02", "batch-02-of-02"]
    finally:
        for i in (1, 2):
            server.stop(data_dir.with_name(f"arcadedb-batch{i:02d}"))
        instance.dispose()
