"""The CI script of issue 27, as a test: run, calibrate, run a candidate, compare, and fail on
the regression using nothing but exit codes and the `--json` documents on stdout.

The baseline is two repeats of the default configuration on the bundled sample; the
candidate is a memory system that forms no memory (`canary_plugins.ForgetfulReconciler`),
a real regression of every question it used to cover. Canaries are off in both runs: a memory
that returns nothing fails them by design, and the point here is the comparison.
"""

from __future__ import annotations

import json

import pytest

FORGETFUL = "eval_pipeline_tests.canary_plugins:ForgetfulReconciler"


def _doc(ran) -> dict:
    """stdout must be exactly one JSON document: what a CI script parses."""
    return json.loads(ran.stdout)


@pytest.mark.slow
def test_a_ci_script_fails_on_a_real_regression_from_exit_codes_and_json(chain):
    base = chain.run("--repeat", "2", "--no-canaries", "--label", "base", "--json")
    assert base.returncode == 0, base.stderr[-3000:]
    doc = _doc(base)
    assert doc["command"] == "run" and doc["outcome"] == "complete" and doc["exit_code"] == 0
    assert [r["status"] for r in doc["repeats"]] == ["complete", "complete"]
    first, second = (r["path"] for r in doc["runs"])
    headline = doc["runs"][0]["tiers"][0]
    assert headline["tier"] == "1" and headline["coverage"] > 0  # something to lose
    assert "tier 1:" in base.stderr  # the human summary went to stderr

    floor = chain.cli("calibrate", first, second, "--json")
    assert floor.returncode == 0, floor.stderr
    assert _doc(floor)["outcome"] == "calibrated"

    cand = chain.run("--no-canaries", "--memory", FORGETFUL, "--label", "forgetful", "--json")
    assert cand.returncode == 0, cand.stderr[-3000:]
    (forgetful,) = (r["path"] for r in _doc(cand)["runs"])
    assert _doc(cand)["runs"][0]["tiers"][0]["coverage"] == 0

    # The repeat against its twin: no change, exit 0.
    same = chain.cli("compare", first, second, "--json")
    assert same.returncode == 0, same.stderr
    assert _doc(same)["outcome"] == "inconclusive" and _doc(same)["failed_on"] == []

    # The regression: exit 5, and the document says why.
    worse = chain.cli("compare", first, forgetful, "--json")
    assert worse.returncode == 5, worse.stderr
    verdict = _doc(worse)
    assert verdict["outcome"] == "regressed" and verdict["failed_on"] == ["regressed"]
    tier = verdict["comparison"]["tiers"][0]
    assert tier["classification"] == "real" and tier["delta_pp"] == pytest.approx(
        -100 * headline["coverage"]
    )
    assert verdict["comparison"]["calibrated"] is True

    # The leaderboard to pick a baseline from: comparable runs, best coverage first.
    board = chain.cli("runs", "--comparable-with", first, "--sort", "coverage", "--json")
    assert board.returncode == 0, board.stderr
    labels = [e["label"] for e in _doc(board)["runs"]]
    assert labels[-1] == "forgetful" and set(labels[:2]) == {"base-repeat1", "base-repeat2"}
