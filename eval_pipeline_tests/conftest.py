"""Session-wide test setup.

The tests never touch the user's state: EVAL_PIPELINE_HOME points at a temporary directory for
the whole session (failure records, the LLM cache, an embedded graph a test starts through the
default resources), and any embedded server started there is stopped at the end.

deepeval is imported once here, hardened, at a shallow stack: imported lazily deep inside a
long test session, CPython 3.11.7 sometimes fails its import with "AST constructor recursion
depth mismatch" (a SystemError from the interpreter, not from our code), which then leaves a
half-imported deepeval behind for every later test.
"""

import os
import shutil
import tempfile
from pathlib import Path

from eval_pipeline.llm import harden_deepeval_env

STATE = Path(tempfile.mkdtemp(prefix="eval-pipeline-tests-"))
os.environ["EVAL_PIPELINE_HOME"] = str(STATE)

harden_deepeval_env()

import deepeval.metrics  # noqa: E402,F401
import deepeval.test_case  # noqa: E402,F401


def pytest_sessionfinish(session, exitstatus):
    from eval_pipeline.graph import server

    server.stop(server.resolve_data_dir(None))
    shutil.rmtree(STATE, ignore_errors=True)
