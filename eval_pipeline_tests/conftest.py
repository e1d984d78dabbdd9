"""Session-wide test setup.

deepeval is imported once here, hardened, at a shallow stack: imported lazily deep inside a
long test session, CPython 3.11.7 sometimes fails its import with "AST constructor recursion
depth mismatch" (a SystemError from the interpreter, not from our code), which then leaves a
half-imported deepeval behind for every later test.
"""

from eval_pipeline.llm import harden_deepeval_env

harden_deepeval_env()

import deepeval.metrics  # noqa: E402,F401
import deepeval.test_case  # noqa: E402,F401
