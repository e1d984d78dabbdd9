"""Ctrl-C and --resume, as a shell sees them: SIGINT while retrieval's progress line is on
stderr stops the chain with one line and exit 130 (no Dagster traceback); `run --resume`
keeps the finished stages and the questions retrieval had measured; SIGINT in scored_run
leaves no bundle that reads complete (issue 27, parts 2 and 3)."""

from __future__ import annotations

import re
import signal
import time

import pytest

from eval_pipeline_tests.chain_runner import finished

pytestmark = pytest.mark.slow
NOISE = ("Traceback", "DagsterExecutionInterruptedError", "Event loop is closed")


def _interrupt_when(proc, pattern: str, timeout: float = 300) -> list[str]:
    """Read stderr until a line matches `pattern`, then SIGINT the run; the lines read."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        if re.search(pattern, line):
            proc.send_signal(signal.SIGINT)
            return seen
    proc.kill()
    raise AssertionError(f"never saw {pattern!r}: {seen[-20:]}")


UNHURRIED = "eval_pipeline_tests.flaky_plugins:UnhurriedRetriever"


def test_ctrl_c_in_retrieval_then_resume(chain) -> None:
    # A quarter second a question: on a fast machine retrieval could otherwise measure every
    # question before the signal lands, and the resume would have nothing left to show.
    slow = {"EVAL_TEST_RETRIEVAL_DELAY_S": "0.25"}
    proc = chain.spawn_run("--label", "interrupted", "--retriever", UNHURRIED, env=slow)
    before = _interrupt_when(proc, r"^retrieval_results: \d+/\d+")
    ran = finished(proc)
    lines = before + ran.stderr.splitlines()
    assert ran.returncode == 130, ran.stderr
    assert not any(n in ran.stderr for n in NOISE), ran.stderr
    last = lines[-1]
    assert last.startswith("eval-pipeline: interrupted at retrieval_results; kept: ")
    assert "reconciled_graph" in last
    chain_id = last.rsplit("--resume ", 1)[1]
    assert not chain.bundles()  # nothing reads as a finished run

    # Resuming with another option is refused before anything runs.
    refused = chain.shell_run("--resume", chain_id, "--top-k", "3")
    assert refused.returncode == 2 and "--top-k" in refused.stderr

    resumed = chain.shell_run("--resume", chain_id)
    assert resumed.returncode == 0, resumed.stderr
    kept = [s for s in resumed.stderr.splitlines() if ": kept (made by run" in s]
    assert [k.split("] ")[1].split(":")[0] for k in kept] == [
        "longmemeval_upstream",
        "goldens",
        "session_fixtures",
        "injected_graph",
        "reconciled_graph",
    ]
    # Retrieval retrieved only what the interrupted run had not measured.
    done = re.findall(r"^retrieval_results: \d+/(\d+)", resumed.stderr, re.M)
    total = int(re.findall(r"^retrieval_results: \d+/(\d+)", "\n".join(before), re.M)[0])
    assert done and int(done[-1]) < total, resumed.stderr
    assert len(chain.bundles()) == 1


def test_ctrl_c_in_scored_run_leaves_no_complete_bundle(chain) -> None:
    proc = chain.spawn_run("--label", "scoring")
    _interrupt_when(proc, r"^\[6/9\] retrieval_results: ok")
    ran = finished(proc)
    assert ran.returncode == 130, ran.stderr
    assert not any(n in ran.stderr for n in NOISE), ran.stderr
    assert "interrupted at scored_run" in ran.stderr.splitlines()[-1]
    assert not chain.bundles()
