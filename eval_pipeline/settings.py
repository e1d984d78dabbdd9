"""Where the project keeps its state: the embedded graph, Dagster's home, corpus and runs.

`EVAL_PIPELINE_HOME` overrides the default `<repo>/.eval_state` (or `./.eval_state` when the
package is installed outside a checkout).
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
BUNDLED_CORPUS_DIR = REPO_DIR / "corpus"


def state_dir() -> Path:
    env = os.environ.get("EVAL_PIPELINE_HOME")
    if env:
        return Path(env).expanduser().resolve()
    if (REPO_DIR / "pyproject.toml").is_file():
        return REPO_DIR / ".eval_state"
    return Path.cwd() / ".eval_state"


def private_umask() -> None:
    """Files and directories the pipeline creates are private to its user (0600/0700): the
    state dir holds model answers, caches and Dagster's storage, never for other users."""
    os.umask(0o077)
