"""docker-compose.yml: offline validation and the services the graph issue requires."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
DAGSTER_SERVICES = ("dagster_code", "dagster_webserver", "dagster_daemon")
SECRET_KEY = re.compile(r"PASSWORD|API_KEY|TOKEN|SECRET")
# `${NAME}`, `${NAME:-}` or `${NAME:?message}`: a value that can only come from the host.
HOST_ONLY = re.compile(r"^\$\{[A-Z0-9_]+(:-|:\?[^}]*)?\}$")


def _compose_config(tmp_path: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.skip("docker-compose not installed: run scripts/install-system-deps.sh as root")
    # A clean environment, so a developer's exported secrets cannot make the file look valid.
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), **env_extra}
    # An empty --env-file: a developer's untracked .env must not change the outcome either.
    empty_env_file = tmp_path / "empty.env"
    empty_env_file.write_text("")
    return subprocess.run(
        [exe, "--env-file", str(empty_env_file), "-f", str(COMPOSE_FILE), "config", "-q"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_compose_file_validates_offline(tmp_path):
    result = _compose_config(tmp_path, {"DAGSTER_POSTGRES_PASSWORD": "placeholder"})
    assert result.returncode == 0, result.stderr


def test_compose_refuses_to_start_without_a_postgres_password(tmp_path):
    result = _compose_config(tmp_path, {})
    assert result.returncode != 0
    assert "DAGSTER_POSTGRES_PASSWORD" in result.stderr


def test_required_services(compose):
    assert set(compose["services"]) >= {"memgraph", "postgres", *DAGSTER_SERVICES}


def _pinned(image: str) -> bool:
    name, _, tag = image.rpartition(":")
    return bool(name) and tag != "latest" and re.search(r"\d", tag) is not None


def test_memgraph_service(compose):
    memgraph = compose["services"]["memgraph"]
    assert memgraph["image"].startswith("memgraph/memgraph-mage:")
    assert _pinned(memgraph["image"]), memgraph["image"]
    assert "--schema-info-enabled=True" in memgraph["command"]
    assert "--telemetry-enabled=false" in memgraph["command"]
    assert "mgconsole" in " ".join(memgraph["healthcheck"]["test"])
    assert any(v.endswith(":/var/lib/memgraph") for v in memgraph["volumes"])


def test_postgres_service(compose):
    postgres = compose["services"]["postgres"]
    assert _pinned(postgres["image"]), postgres["image"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])


def test_dagster_services_share_one_built_image(compose):
    services = compose["services"]
    images = {services[name]["image"] for name in DAGSTER_SERVICES}
    assert len(images) == 1
    for name in DAGSTER_SERVICES:
        assert services[name]["build"]["context"] == "."
    code = services["dagster_code"]
    assert code["command"][:5] == [
        "dagster",
        "code-server",
        "start",
        "-m",
        "eval_pipeline.definitions",
    ]
    assert code["command"][-4:] == ["-h", "0.0.0.0", "-p", "4000"]
    # The run launcher starts each run from the image the code server advertises.
    assert code["environment"]["DAGSTER_CURRENT_IMAGE"] == code["image"]
    assert "grpc-health-check" in code["healthcheck"]["test"]


def test_every_dependency_waits_for_health(compose):
    for name, service in compose["services"].items():
        for dep, spec in service.get("depends_on", {}).items():
            assert spec == {"condition": "service_healthy"}, (name, dep)
            assert "healthcheck" in compose["services"][dep], dep
    assert set(compose["services"]["dagster_code"]["depends_on"]) == {"memgraph", "postgres"}
    for name in ("dagster_webserver", "dagster_daemon"):
        assert set(compose["services"][name]["depends_on"]) == {"postgres", "dagster_code"}


def test_pipeline_reaches_memgraph(compose):
    for name in DAGSTER_SERVICES:
        env = compose["services"][name]["environment"]
        assert env["EVAL_GRAPH_BACKEND"] == "memgraph"
        assert env["EVAL_GRAPH_URI"] == "bolt://memgraph:7687"
        assert env["EVAL_GRAPH_DATABASE"] == "memgraph"
        assert env["DEEPEVAL_TELEMETRY_OPT_OUT"] == "1"
        for key in (
            "EVAL_GRAPH_USER",
            "EVAL_GRAPH_PASSWORD",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
        ):
            assert HOST_ONLY.match(env[key]), (name, key, env[key])


def test_daemon_and_webserver_can_drive_the_docker_engine(compose):
    for name in ("dagster_webserver", "dagster_daemon"):
        service = compose["services"][name]
        assert "/var/run/docker.sock:/var/run/docker.sock" in service["volumes"]
        assert service["group_add"], name


def test_no_secret_value_in_the_compose_file(compose):
    for name, service in compose["services"].items():
        env = service.get("environment", {})
        assert isinstance(env, dict), f"{name}: use a mapping so values can be checked"
        for key, value in env.items():
            if SECRET_KEY.search(key):
                assert HOST_ONLY.match(str(value)), f"{name}.{key} must come from the host"
    text = COMPOSE_FILE.read_text()
    # Shapes of real provider keys, in case one is pasted somewhere other than `environment`.
    assert not re.search(r"sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}", text)


def test_batch_instances_are_memgraph_itself_behind_a_profile(compose):
    """A run over K question batches needs K instances: memgraph-N, the same server and
    flags as `memgraph`, each with its own volume, started only with `--profile batches`;
    the pipeline names them through EVAL_GRAPH_BATCH_URI."""
    services = compose["services"]
    base = services["memgraph"]
    batches = sorted(name for name in services if re.fullmatch(r"memgraph-\d+", name))
    assert batches == ["memgraph-1", "memgraph-2"]
    volumes = {base["volumes"][0].split(":")[0]}
    for name in batches:
        service = services[name]
        assert service["profiles"] == ["batches"], name
        for key in ("image", "command", "healthcheck", "networks"):
            assert service[key] == base[key], (name, key)
        assert "ports" not in service, name  # reached by service name, never from the host
        volume = service["volumes"][0].split(":")[0]
        assert volume not in volumes and volume in compose["volumes"], name
        volumes.add(volume)
    for name in DAGSTER_SERVICES:
        uri = compose["services"][name]["environment"]["EVAL_GRAPH_BATCH_URI"]
        assert uri == "bolt://memgraph-{batch}:7687"
        assert {uri.replace("{batch}", str(i)).split("//")[1].split(":")[0] for i in (1, 2)} == (
            set(batches)
        )
