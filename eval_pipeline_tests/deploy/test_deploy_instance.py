"""Both Dagster instance files, loaded through Dagster itself.

The deployment instance goes through `InstanceRef.from_dir`, which validates the whole file
against Dagster's instance schema (the `storage: postgres` block against core's Postgres
schema, credentials as unresolved `env:` sources) and records which storage class to load,
without importing it. It is then instantiated with only its storage swapped for a temporary
SQLite (dagster-postgres is installed in the image, not here) and its artifact/log directories
moved under tmp: the real DockerRunLauncher and QueuedRunCoordinator are built from the file,
and the effective run queue and pool limits read back from the instance. Not covered: a
connection to Postgres, and whether the env variables hold working values.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance, QueuedRunCoordinator
from dagster._config import validate_config
from dagster._core.instance.ref import InstanceRef
from dagster._serdes.config_class import class_from_code_pointer
from dagster_docker import DockerRunLauncher

REPO = Path(__file__).resolve().parents[2]
DEPLOY_DIR = REPO / "deploy"
GRAPH_TAG_LIMIT = {
    "key": "eval_pipeline/graph_instance",
    "value": {"applyLimitPerUniqueValue": True},
    "limit": 1,
}


def _deploy_instance(tmp_path) -> DagsterInstance:
    overrides = {
        "storage": {"sqlite": {"base_dir": str(tmp_path / "storage")}},
        "local_artifact_storage": {
            "module": "dagster._core.storage.root",
            "class": "LocalArtifactStorage",
            "config": {"base_dir": str(tmp_path / "artifacts")},
        },
        "compute_logs": {
            "module": "dagster._core.storage.local_compute_log_manager",
            "class": "LocalComputeLogManager",
            "config": {"base_dir": str(tmp_path / "logs")},
        },
    }
    ref = InstanceRef.from_dir(str(tmp_path), config_dir=str(DEPLOY_DIR), overrides=overrides)
    return DagsterInstance.from_ref(ref)


def _assert_graph_runs_never_overlap(instance: DagsterInstance) -> None:
    assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
    concurrency = instance.get_concurrency_config()
    assert GRAPH_TAG_LIMIT in concurrency.run_queue_config.tag_concurrency_limits
    assert concurrency.pool_config.default_pool_limit == 1


def test_deploy_instance_ref_uses_postgres_from_env(tmp_path):
    ref = InstanceRef.from_dir(str(tmp_path), config_dir=str(DEPLOY_DIR))
    assert ref.storage_data.module_name == "dagster_postgres"
    assert ref.storage_data.class_name == "DagsterPostgresStorage"
    postgres_db = yaml.safe_load(ref.storage_data.config_yaml)["postgres_db"]
    for field in ("hostname", "username", "password", "db_name"):
        assert set(postgres_db[field]) == {"env"}, field


def test_deploy_storage_paths_fit_their_classes(deploy_instance_yaml):
    # Swapped out when the instance is built below (their directories exist only in the
    # image), so check their config against the classes' schemas here.
    for section in ("local_artifact_storage", "compute_logs"):
        entry = deploy_instance_yaml[section]
        klass = class_from_code_pointer(entry["module"], entry["class"])
        result = validate_config(klass.config_type(), entry["config"])
        assert result.success, (section, result.errors)
        assert entry["config"]["base_dir"].startswith("/var/lib/eval_pipeline/")


def test_deploy_instance_loads(tmp_path, deploy_instance_yaml):
    with _deploy_instance(tmp_path) as instance:
        _assert_graph_runs_never_overlap(instance)
        launcher = instance.run_launcher
        assert isinstance(launcher, DockerRunLauncher)
        assert launcher.networks == [deploy_instance_yaml["run_launcher"]["config"]["network"]]
        assert not instance.telemetry_enabled
        # Every run is retried once if it crashed, from scratch, never when a step failed
        # (however it was launched: eval_chain, Materialize all, the schedule).
        assert instance.run_retries_enabled
        assert instance.run_retries_max_retries == 1
        assert not instance.run_retries_retry_on_asset_or_op_failure
        # A crashed run worker must fail the run, not resume it into a half-injected graph.
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_max_resume_run_attempts == 0


def test_run_containers_get_what_they_need(compose, deploy_instance_yaml):
    launcher = deploy_instance_yaml["run_launcher"]["config"]
    forwarded = set(launcher["env_vars"])
    # DockerRunLauncher raises at launch for a forwarded name unset in the daemon.
    daemon_env = compose["services"]["dagster_daemon"]["environment"]
    assert forwarded <= set(daemon_env), forwarded - set(daemon_env)
    postgres_env = {
        spec["env"]
        for spec in deploy_instance_yaml["storage"]["postgres"]["postgres_db"].values()
        if isinstance(spec, dict)
    }
    assert postgres_env <= forwarded
    assert {"EVAL_GRAPH_URI", "EVAL_GRAPH_PASSWORD", "OPENAI_API_KEY"} <= forwarded

    # Network and state volume are named in the compose file with fixed, unprefixed names.
    assert compose["networks"][launcher["network"]]["name"] == launcher["network"]
    for mount in launcher["container_kwargs"]["volumes"]:
        volume, target = mount.split(":")[:2]
        assert compose["volumes"][volume]["name"] == volume
        assert f"{volume}:{target}" in compose["services"]["dagster_code"]["volumes"]


def test_local_instance_loads(tmp_path):
    shutil.copy(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert not instance.telemetry_enabled
        # The local instance has no queued coordinator, so only its pool limit applies here.
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1


@pytest.mark.parametrize("path", ["workspace.yaml", "deploy/workspace.yaml"])
def test_workspace_files_are_valid(path):
    from dagster._core.workspace.config_schema import ensure_workspace_config

    config = ensure_workspace_config(yaml.safe_load((REPO / path).read_text()), str(REPO / path))
    (entry,) = config["load_from"]
    (kind,) = entry
    assert entry[kind]["location_name"] == "eval_pipeline"


def test_deploy_workspace_points_at_the_code_server(compose):
    (entry,) = yaml.safe_load((DEPLOY_DIR / "workspace.yaml").read_text())["load_from"]
    grpc = entry["grpc_server"]
    assert grpc["host"] in compose["services"]
    command = compose["services"][grpc["host"]]["command"]
    assert command[command.index("-p") + 1] == str(grpc["port"])
