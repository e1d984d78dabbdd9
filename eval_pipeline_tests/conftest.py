"""Session-wide test setup.

The tests never touch the user's state: EVAL_PIPELINE_HOME points at a temporary directory for
the whole session (failure records, the LLM cache, an embedded graph a test starts through the
default resources), and any embedded server started there is stopped at the end.

deepeval is imported once here, hardened, at a shallow stack: imported lazily deep inside a
long test session, CPython 3.11.7 sometimes fails its import with "AST constructor recursion
depth mismatch" (a SystemError from the interpreter, not from our code), which then leaves a
half-imported deepeval behind for every later test.

The backend conformance suite (marker `conformance`, `pytest -m conformance`) runs each of its
tests once per graph backend through the `backend_store` fixture: always against the embedded
ArcadeDB, and against a Memgraph server too when EVAL_TEST_MEMGRAPH_URI names one
(bolt://host:7687; credentials from EVAL_TEST_MEMGRAPH_USER / EVAL_TEST_MEMGRAPH_PASSWORD).
That Memgraph instance is wiped before every test: point it at a disposable one.
"""

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.llm import harden_deepeval_env

STATE = Path(tempfile.mkdtemp(prefix="eval-pipeline-tests-"))
os.environ["EVAL_PIPELINE_HOME"] = str(STATE)

harden_deepeval_env()

import deepeval.metrics  # noqa: E402,F401
import deepeval.test_case  # noqa: E402,F401

MEMGRAPH_URI_ENV = "EVAL_TEST_MEMGRAPH_URI"
_conformance_databases = itertools.count()


def conformance_backends() -> list[str]:
    """The embedded ArcadeDB always; Memgraph when EVAL_TEST_MEMGRAPH_URI is set."""
    return ["arcadedb", *(["memgraph"] if os.environ.get(MEMGRAPH_URI_ENV) else [])]


def pytest_collection_modifyitems(config, items):
    # Every test run through a backend's store is part of the conformance suite.
    for item in items:
        if "backend_store" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.conformance)


@pytest.fixture(scope="session")
def conformance_arcadedb_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from eval_pipeline.graph import server

    root = tmp_path_factory.mktemp("conformance_arcadedb")
    yield root
    server.stop(root)


@pytest.fixture(params=conformance_backends())
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backend_store(backend: str, request: pytest.FixtureRequest) -> Iterator:
    """A fresh, empty graph on `backend`: a new database on the shared embedded ArcadeDB, or
    the Memgraph instance of EVAL_TEST_MEMGRAPH_URI wiped (community edition has one database
    per instance)."""
    from eval_pipeline.graph.store import GraphStore

    if backend == "arcadedb":
        root = request.getfixturevalue("conformance_arcadedb_dir")
        store = GraphStore(
            data_dir=str(root), database=f"conf{next(_conformance_databases)}", heap="512m"
        )
    else:
        store = GraphStore(
            backend="memgraph",
            uri=os.environ[MEMGRAPH_URI_ENV],
            database="memgraph",
            user=os.environ.get("EVAL_TEST_MEMGRAPH_USER") or None,
            password=os.environ.get("EVAL_TEST_MEMGRAPH_PASSWORD") or None,
            disposable=True,
        )
        store.ensure_running()
        store.wipe()
    store.ensure_running()
    yield store
    store.close()


def pytest_sessionfinish(session, exitstatus):
    from eval_pipeline.graph import server

    server.stop(server.resolve_data_dir(None))
    shutil.rmtree(STATE, ignore_errors=True)
