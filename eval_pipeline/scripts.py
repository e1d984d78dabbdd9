"""How to print a command of this environment so that a shell runs it as printed."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

# A console script of this environment, when PATH does not find it: `python -m` of what.
SCRIPT_MODULES = {"eval-pipeline": "eval_pipeline.cli", "dagster": "dagster"}


def command(name: str) -> list[str]:
    """How to type console script `name` so that a shell runs this environment's one: its bare
    name when PATH finds exactly it, else its full path (a venv not activated), else
    `python -m`."""
    here = Path(sys.executable).parent / name
    found = shutil.which(name)
    if found and here.is_file() and Path(found).resolve() == here.resolve():
        return [name]
    if here.is_file():
        return [str(here)]
    return [sys.executable, "-m", SCRIPT_MODULES[name]]
