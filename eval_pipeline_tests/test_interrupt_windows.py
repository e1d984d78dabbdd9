"""Interrupts at named points of a chain, sent from inside the process so the window is the
same every time (issue 28, probe finding 8): `signal_points/sitecustomize.py` sends SIGINT
(or SIGTERM) as the stage IO manager takes the asset's output, i.e. as the stage ends.

The probe saw SIGINT just as injected_graph ended swallowed (exit 0, complete bundle) and
SIGINT in scored_run exit 1 with a complete bundle. An interrupted run exits 130 naming the
stage, and leaves no bundle that reads complete in the runs dir (a bundle written before the
interrupt is withdrawn into `runs/.interrupted/`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.interrupts import WITHDRAWN_DIR
from eval_pipeline_tests.chain_runner import finished

pytestmark = pytest.mark.slow
POINTS = str(Path(__file__).parent / "signal_points")


@pytest.mark.parametrize(
    ("stage", "sig"),
    [
        ("injected_graph", "SIGINT"),
        ("scored_run", "SIGINT"),
    ],
)
def test_an_interrupt_as_a_stage_ends_stops_the_chain(chain, stage: str, sig: str) -> None:
    env = {"PYTHONPATH": POINTS, "EVAL_TEST_SIGNAL_AT": f"{stage}:output", "EVAL_TEST_SIGNAL": sig}
    ran = finished(chain.spawn_run("--sample", "10", "--label", "windows", env=env), 120)
    assert ran.returncode == 130, ran.stderr
    assert ran.stderr_lines[-1].startswith(f"eval-pipeline: interrupted at {stage}"), ran.stderr
    assert "Traceback" not in ran.stderr
    assert f"] {stage}: interrupted" in ran.stderr
    assert not chain.bundles()  # nothing in the runs dir reads as a finished run
    withdrawn = chain.state / "runs" / WITHDRAWN_DIR
    if stage == "scored_run":  # its bundle was written, then withdrawn
        assert [p for p in withdrawn.iterdir() if (p / "manifest.json").is_file()]
