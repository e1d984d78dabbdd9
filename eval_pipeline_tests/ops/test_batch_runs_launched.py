"""Deployed: an eval_chain run over two question batches launches each batch as an
`eval_batch` run through the webserver's GraphQL API; the queued coordinator and the run
launcher (here the default one: a process per run) run them at once. Real webserver, daemon,
code server, embedded graph servers; the chain is launched as the Launchpad launches it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.assets.tags import WEBSERVER_ENV
from eval_pipeline.graph import server as graph_server
from eval_pipeline.ops.ui_check import isolated_env, launch_like_the_launchpad, prepare_instance
from eval_pipeline.ops.webserver import DagsterDaemon, DagsterWebserver
from eval_pipeline.ports import free_port


@pytest.mark.slow
def test_a_chain_over_two_batches_launches_one_run_per_batch(tmp_path):
    state = tmp_path / "state"
    env = isolated_env(state)
    port = free_port()
    env[WEBSERVER_ENV] = f"http://127.0.0.1:{port}"
    home = Path(env["DAGSTER_HOME"])
    prepare_instance(home)
    server = DagsterWebserver(port, log_path=tmp_path / "webserver.log", env=env)
    daemon = DagsterDaemon(log_path=tmp_path / "daemon.log", env=env)
    config = {
        "resources": {
            "corpus": {"config": {"batches": 2}},
            "paths": {"config": {"state_dir": str(state)}},
        }
    }
    try:
        with server, daemon:
            server.wait_ready(180)
            chain_id, _, _ = launch_like_the_launchpad(server, "eval_chain", config)
            instance = dg.DagsterInstance.from_config(str(home))
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                run = instance.get_run_by_id(chain_id)
                if run is not None and run.is_finished:
                    break
                time.sleep(2)
            run = instance.get_run_by_id(chain_id)
            assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS, (
                tmp_path / "daemon.log"
            ).read_text()[-3000:]
            batch_runs = instance.get_runs(dg.RunsFilter(job_name="eval_batch"))
            assert len(batch_runs) == 2
            assert {r.tags["eval_pipeline/graph_instance"] for r in batch_runs} == {
                "default/batch-01-of-02",
                "default/batch-02-of-02",
            }
            assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in batch_runs)
            assert all(r.tags["eval_pipeline/chain_run"] == chain_id for r in batch_runs)
            # The batches overlapped in time: launched side by side, not one after the other.
            spans = sorted(
                (r.start_time, r.end_time)
                for r in (instance.get_run_record_by_id(b.run_id) for b in batch_runs)
            )
            assert spans[1][0] < spans[0][1]
            # Each batch's stage runs are partitions of their batch, inside that batch's run.
            stage_runs = instance.get_runs(dg.RunsFilter(job_name="eval_stage"))
            by_partition = {r.tags.get("dagster/partition") for r in stage_runs}
            assert {"batch-01-of-02", "batch-02-of-02"} <= by_partition
            scored = instance.get_latest_materialization_event(dg.AssetKey("scored_run"))
            run_dir = Path(scored.asset_materialization.metadata["run_dir"].value)
            manifest = json.loads((run_dir / "manifest.json").read_text())
            assert [b["batch"] for b in manifest["batches"]] == [
                "batch-01-of-02",
                "batch-02-of-02",
            ]
            instance.dispose()
    finally:
        for i in (1, 2):
            graph_server.stop(state / "graph" / f"arcadedb-batch{i:02d}")
