"""Dockerfile, .dockerignore and scripts/install-system-deps.sh, checked as text and by running
the script's no-op branches. The image build itself needs a Docker engine and is not run here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()
INSTALL_SCRIPT = REPO / "scripts" / "install-system-deps.sh"


def _pins() -> dict[str, str]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return dict(dep.split("==", 1) for dep in deps if "==" in dep)


def test_base_image_is_python_311_slim():
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim", DOCKERFILE, re.M)
    assert re.search(r"^FROM \$\{PYTHON_IMAGE\}", DOCKERFILE, re.M)


def test_image_adds_dagster_postgres_matching_the_docker_integration():
    # Integration packages share one version line: dagster-postgres must follow dagster-docker.
    assert f"dagster-postgres=={_pins()['dagster-docker']}" in DOCKERFILE
    assert "dagster-postgres" not in (REPO / "pyproject.toml").read_text()


def test_image_installs_the_project_and_runs_unprivileged():
    assert "pip install --no-deps --editable ." in DOCKERFILE
    assert "pip check" in DOCKERFILE
    users = re.findall(r"^USER (\S+)", DOCKERFILE, re.M)
    assert users and users[-1] not in ("root", "0")


def test_image_dagster_home_holds_the_deployment_files(compose):
    match = re.search(r"DAGSTER_HOME=(\S+)", DOCKERFILE)
    assert match
    home = match.group(1)
    assert 'cp deploy/dagster.yaml deploy/workspace.yaml "$DAGSTER_HOME"/' in DOCKERFILE
    for name in ("dagster_webserver", "dagster_daemon"):
        command = compose["services"][name]["command"]
        assert command[command.index("-w") + 1] == f"{home}/workspace.yaml"


def test_dockerignore_keeps_state_and_secrets_out():
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".git", ".venv", ".eval_state", ".env"} <= ignored


def _run_script(tmp_path: Path, uid: str) -> subprocess.CompletedProcess:
    # A PATH holding only a fake `id`: docker-compose and apt-get look missing.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(parents=True)
    (fake_bin / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (fake_bin / "id").chmod(0o755)
    return subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(INSTALL_SCRIPT)],
        env={"PATH": str(fake_bin)},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_install_script_only_notifies_when_it_cannot_install(tmp_path):
    for uid in ("1000", "0"):  # not root; root without apt-get
        result = _run_script(tmp_path / uid, uid)
        assert result.returncode == 0, result.stderr
        assert "docker-compose" in result.stderr


def test_install_script_is_a_no_op_when_everything_is_present():
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose not installed: the script would try to install it")
    result = subprocess.run(["bash", str(INSTALL_SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0
    assert result.stdout == result.stderr == ""
