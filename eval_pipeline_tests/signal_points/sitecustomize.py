"""A signal sent to the process at a named point of a chain, for the interrupt tests.

Python imports `sitecustomize` at start from the path; a console script started with this
directory first on PYTHONPATH and `EVAL_TEST_SIGNAL_AT=<asset>:<point>` sends itself SIGINT
(or the signal named by `EVAL_TEST_SIGNAL`) once, at that point, from inside the process:
the same window every time, which a test reading stderr from outside cannot hit.

Points: `output` — the asset's output has just been handed to the stage IO manager (its
artifact published, a scored_run's bundle written), the step not yet ended: "just as the
stage ends".
"""

from __future__ import annotations

import os
import signal

_AT = os.environ.get("EVAL_TEST_SIGNAL_AT", "")


def _install(asset: str, point: str) -> None:
    from eval_pipeline.assets import handoff

    if point != "output":
        raise ValueError(f"EVAL_TEST_SIGNAL_AT: unknown point {point!r}")
    sig = getattr(signal, os.environ.get("EVAL_TEST_SIGNAL", "SIGINT"))
    original = handoff.StageIOManager.handle_output
    fired = []

    def handle_output(self, context, obj) -> None:
        original(self, context, obj)
        if not fired and context.asset_key.to_user_string() == asset:
            fired.append(True)
            os.kill(os.getpid(), sig)

    handoff.StageIOManager.handle_output = handle_output


if _AT:
    _asset, _, _point = _AT.partition(":")
    _install(_asset, _point)
