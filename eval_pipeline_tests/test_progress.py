"""The progress reporter every long stage uses (eval_pipeline.progress), and Ctrl-C seen
whichever handler is installed (eval_pipeline.interrupts)."""

from __future__ import annotations

import io
import os
import signal

from eval_pipeline import interrupts
from eval_pipeline.progress import Progress


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_per_step_with_rate_and_eta_and_to_the_log(monkeypatch) -> None:
    monkeypatch.delenv("EVAL_PIPELINE_PROGRESS", raising=False)
    clock, out, logged = _Clock(), io.StringIO(), []
    with Progress(
        "retrieval_results", 40, unit="q", stream=out, log=logged.append, clock=clock
    ) as bar:
        for i in range(40):
            clock.now += 0.5  # 2 q/s
            bar.update(failed=1 if i >= 30 else 0)
    lines = out.getvalue().splitlines()
    # 5 % of 40 is 2 items, but never more than one line per 2 s: a line every 4 items.
    assert lines[0] == "retrieval_results: 4/40 (10%) [00:02<00:18,  2.00q/s]"
    assert lines[-1] == "retrieval_results: 40/40 (100%) [00:20<00:00,  2.00q/s], 1 failed"
    assert len(lines) == 10 and "\r" not in out.getvalue()
    assert logged == lines  # the Dagster log gets the same lines


def test_a_slow_stage_says_something_every_ten_seconds(monkeypatch) -> None:
    monkeypatch.delenv("EVAL_PIPELINE_PROGRESS", raising=False)
    clock, out = _Clock(), io.StringIO()
    bar = Progress("scored_run judging questions", 1000, unit="q", stream=out, clock=clock)
    for _ in range(3):
        clock.now += 12.0  # one judged answer every 12 s: far below 5 %
        bar.update()
    assert out.getvalue().splitlines() == [
        "scored_run judging questions: 1/1000 (0%) [00:12<3:19:48, 12.00s/q]",
        "scored_run judging questions: 2/1000 (0%) [00:24<3:19:36, 12.00s/q]",
        "scored_run judging questions: 3/1000 (0%) [00:36<3:19:24, 12.00s/q]",
    ]


def test_a_terminal_gets_one_updating_line_cleared_at_the_end(monkeypatch) -> None:
    monkeypatch.delenv("EVAL_PIPELINE_PROGRESS", raising=False)
    out = _Tty()
    with Progress("reconciled_graph sessions", 3, unit="session", stream=out) as bar:
        for _ in range(3):
            bar.update()
    text = out.getvalue()
    assert "\r" in text and "reconciled_graph sessions:" in text and "\n" not in text.strip()


def test_a_batch_worker_prints_plain_lines_even_on_a_terminal(monkeypatch) -> None:
    monkeypatch.setenv("EVAL_PIPELINE_PROGRESS", "plain")
    out = _Tty()
    with Progress("retrieval_results [batch-02-of-02]", 2, unit="q", stream=out) as bar:
        bar.update(2)
    text = out.getvalue()
    assert text.startswith("retrieval_results [batch-02-of-02]: 2/2 (100%)")
    assert "\r" not in text and text.count("\n") == 1


def test_an_interrupt_is_seen_under_any_handler_and_raises_nowhere() -> None:
    assert not interrupts.received()  # outside a watch: nothing
    with interrupts.watch(), interrupts.deferred():
        assert not interrupts.received()
        # Dagster's capture_interrupts-style handler: it records and forgets.
        before = signal.signal(signal.SIGINT, lambda *_: None)
        try:
            os.kill(os.getpid(), signal.SIGINT)
        finally:
            signal.signal(signal.SIGINT, before)
        assert interrupts.received()
        assert interrupts.received()  # and it stays seen
    assert not interrupts.received()


def test_the_cli_remembers_a_terminal_a_step_cannot_see(monkeypatch) -> None:
    from eval_pipeline.progress import PROGRESS_ENV, _mode, remember_terminal

    # setenv then delenv: monkeypatch restores the variable's absence afterwards, so the "tty"
    # remember_terminal writes cannot leak into later tests' subprocesses.
    monkeypatch.setenv(PROGRESS_ENV, "")
    monkeypatch.delenv(PROGRESS_ENV)
    remember_terminal(_Tty())
    # Inside a step stderr is the compute-log pipe: the remembered terminal still decides.
    assert _mode(io.StringIO()) == "tty"
    monkeypatch.setenv(PROGRESS_ENV, "plain")  # an explicit choice (a batch worker) wins
    remember_terminal(_Tty())
    assert _mode(_Tty()) == "plain"
