"""Parsed deployment files shared by the deploy tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def compose() -> dict:
    # safe_load resolves the file's anchors and `<<` merge keys as docker-compose does.
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


@pytest.fixture(scope="session")
def deploy_instance_yaml() -> dict:
    return yaml.safe_load((REPO / "deploy" / "dagster.yaml").read_text())
