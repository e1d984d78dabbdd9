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
HEAP = "512m"  # the session server's JVM heap
_databases = itertools.count()


def conformance_backends() -> list[str]:
    """The embedded ArcadeDB always; Memgraph when EVAL_TEST_MEMGRAPH_URI is set."""
    return ["arcadedb", *(["memgraph"] if os.environ.get(MEMGRAPH_URI_ENV) else [])]


def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        # Every test run through a backend's store is part of the conformance suite.
        if "backend_store" in fixtures:
            item.add_marker(pytest.mark.conformance)
        # A test that needs the local model server is a real-model test, wherever it is.
        if "local_model" in fixtures or "real_model" in item.path.parts:
            item.add_marker(pytest.mark.real_model)


@pytest.fixture(scope="session")
def graph_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's one embedded ArcadeDB (a JVM start costs seconds): every test that needs
    a graph gets a database of its own on it (`fresh_database`); a test that stops the server
    leaves it to the next user, whose `ensure_running()` starts it again."""
    from eval_pipeline.graph import server

    root = tmp_path_factory.mktemp("arcadedb")
    yield root
    server.stop(root)


def fresh_database(prefix: str = "db") -> str:
    return f"{prefix}{next(_databases)}"


@pytest.fixture(scope="session")
def conformance_arcadedb_dir(graph_dir: Path) -> Path:
    return graph_dir


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
        store = GraphStore(data_dir=str(root), database=fresh_database("conf"), heap=HEAP)
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


@pytest.fixture(autouse=True)
def _registered_secrets_stay_with_their_test() -> Iterator[None]:
    """The secrets a test registers (`credentials.register_secret`, process-wide by design: a
    key read once is never shown again) are forgotten after it, so one test's key cannot make
    another test's ordinary text read as a secret."""
    from eval_pipeline.llm import credentials

    before = set(credentials._known_secrets)
    yield
    with credentials._known_lock:
        credentials._known_secrets.intersection_update(before)
        credentials._known_secrets.update(before)


def pytest_sessionfinish(session, exitstatus):
    from eval_pipeline.graph import server

    server.stop(server.resolve_data_dir(None))
    shutil.rmtree(STATE, ignore_errors=True)


# Chains keep their state (Dagster's SQLite storage above all: a commit per event) in memory
# where the machine has a tmpfs: a third of an in-process chain's time was fsync on a disk.
CHAIN_TMPFS = Path("/dev/shm")


@pytest.fixture(scope="session")
def chain_base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the chains of this session keep their state dirs."""
    if CHAIN_TMPFS.is_dir() and os.access(CHAIN_TMPFS, os.W_OK):
        base = Path(tempfile.mkdtemp(prefix="eval-pipeline-chains-", dir=CHAIN_TMPFS))
        yield base
        shutil.rmtree(base, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("chains")


_chains = itertools.count()


def new_chain(base: Path, graph_dir: Path, *, persistent: bool = False):
    """A `chain_runner.Chain` of its own: state dir, Dagster instance (in memory unless
    `persistent`) and graph database."""
    from eval_pipeline_tests.chain_runner import Chain

    root = base / f"chain{next(_chains)}"
    return Chain(root, graph_dir, fresh_database("chain"), env={}, persistent=persistent)


@pytest.fixture
def chain(chain_base: Path, graph_dir: Path):
    """`eval-pipeline run` in this process, with a state dir, Dagster instance and graph
    database of this test's own (`chain_runner.Chain`)."""
    return new_chain(chain_base, graph_dir)


@pytest.fixture
def persistent_chain(chain_base: Path, graph_dir: Path):
    """The same with DAGSTER_HOME on disk: for a chain another process must see."""
    return new_chain(chain_base, graph_dir, persistent=True)


@pytest.fixture(scope="module")
def module_chain(chain_base: Path, graph_dir: Path):
    """The same, shared by the tests of one module (one chain's bundle, read many ways)."""
    return new_chain(chain_base, graph_dir)


@pytest.fixture(scope="session")
def light_tier2_run(chain_base: Path, graph_dir: Path):
    """One offline chain over both tiers, tier 2's light scenarios, with the consolidating
    reconciler (namespaced memory): `eval-pipeline run --tier all --light --reconciler
    consolidating`, once per session. test_tier2_run, runs/test_report_real_bundle and
    tier2/test_ingestion_axis each read its bundle (the report test rewrites report.html
    from it, as `eval-pipeline report` does). Returns (its Chain, its Ran)."""
    from eval_pipeline_tests.chain_runner import Chain

    chain = Chain(chain_base / "light-tier2", graph_dir, fresh_database("chain"), env={})
    res = chain.run("--tier", "all", "--light", "--reconciler", "consolidating")
    assert res.returncode == 0, res.stderr[-3000:]
    return chain, res
