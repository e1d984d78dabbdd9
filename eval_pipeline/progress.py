"""Progress of a long stage, with rate and ETA, on the terminal and in the Dagster log.

    with Progress("retrieval_results", total=len(questions), unit="q", log=context.log.info) as p:
        for q in questions:
            ...
            p.update(failed=len(failed))   # one item done; named counts shown beside it

One reporter for every stage that can take more than a few seconds (injection,
reconciliation, provider ingestion, retrieval, the arms, judging, judge-check), so every
stage's line reads the same and no counter restarts unannounced: each phase of a stage is
its own named line (`reconciled_graph sessions`, then `reconciled_graph namespaces`).

Where it goes: stderr, which is the terminal of `eval-pipeline run` (the chain runs in its
process) and of each `--batches` worker process (they inherit it), and a run's compute log
under `dagster dev`. On a TTY, one line that updates in place (tqdm's bar, cleared when the
phase ends so the stage's `[i/n]` line follows); otherwise a plain line every `every_s`
seconds or `every_fraction` of the total (at most one per `min_gap_s`), and at the end.
`log` (the asset's `context.log.info`) gets the plain lines at the same cadence. A worker
process of a run over several batches calls `plain_only()`: two processes cannot share one
updating line.

Rate and ETA come from tqdm's own formatting (`tqdm.format_meter`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from tqdm import tqdm

# Environment switch: `plain` forces plain lines (a worker process, CI), `off` prints nothing
# on stderr (the Dagster log still gets its lines), `tty` the updating line (set by the CLI
# when its stderr is a terminal: `remember_terminal`).
PROGRESS_ENV = "EVAL_PIPELINE_PROGRESS"
EVERY_S = 10.0
EVERY_FRACTION = 0.05
MIN_GAP_S = 2.0
PLAIN_FORMAT = "{desc}: {n_fmt}/{total_fmt} ({percentage:.0f}%) [{elapsed}<{remaining}, {rate_fmt}]"
OPEN_FORMAT = "{desc}: {n_fmt} [{elapsed}, {rate_fmt}]"  # no total known: no ETA either
TTY_FORMAT = (
    "{desc}: {percentage:3.0f}%|{bar:20}| {n_fmt}/{total_fmt} "
    "[{elapsed}<{remaining}, {rate_fmt}]{postfix}"
)


def remember_terminal(stream: TextIO | None = None) -> None:
    """Say, before any stage runs, whether stderr is a terminal: inside a Dagster step fd 2
    is the compute-log capture's pipe (it still reaches the terminal), so a step cannot
    tell. The CLI calls this; an explicit EVAL_PIPELINE_PROGRESS wins."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    if callable(isatty) and isatty():
        os.environ.setdefault(PROGRESS_ENV, "tty")


def plain_only() -> None:
    """This process shows plain lines only (a batch worker beside others on one terminal)."""
    os.environ[PROGRESS_ENV] = "plain"


def _mode(stream: TextIO) -> str:
    forced = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if forced in ("plain", "off", "tty"):
        return forced
    isatty = getattr(stream, "isatty", None)
    return "tty" if callable(isatty) and isatty() else "plain"


def _counts(counts: dict[str, Any]) -> str:
    return ", ".join(f"{v} {k}" for k, v in counts.items() if v not in (None, 0))


class Progress:
    """One phase of a stage: `total` items (None: unknown), counted by `update`."""

    def __init__(
        self,
        what: str,
        total: int | None,
        *,
        unit: str = "it",
        log: Callable[[str], Any] | None = None,
        stream: TextIO | None = None,
        every_s: float = EVERY_S,
        every_fraction: float = EVERY_FRACTION,
        min_gap_s: float = MIN_GAP_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what, self.total, self.unit, self.log = what, total, unit, log
        self.stream = stream if stream is not None else sys.stderr
        self.every_s, self.min_gap_s, self.clock = every_s, min_gap_s, clock
        self.step = max(1, int((total or 0) * every_fraction)) if total else None
        self.n = 0
        self.counts: dict[str, Any] = {}
        self.started = clock()
        self._last_at = self.started
        self._last_n = 0
        self._lock = threading.Lock()
        self._closed = False
        self._mode = _mode(self.stream)
        self._bar: tqdm | None = None
        if self._mode == "tty" and total:
            self._bar = tqdm(
                total=total,
                desc=what,
                unit=unit,
                file=self.stream,
                leave=False,
                dynamic_ncols=True,
                mininterval=0.5,
                bar_format=TTY_FORMAT,
            )

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def line(self) -> str:
        """The plain line as it stands: `retrieval_results: 9/20 (45%) [00:03<00:04, 2.50q/s]`."""
        elapsed = self.clock() - self.started
        fmt = PLAIN_FORMAT if self.total else OPEN_FORMAT
        text = tqdm.format_meter(
            self.n, self.total, elapsed, prefix=self.what, unit=self.unit, bar_format=fmt
        )
        extra = _counts(self.counts)
        return f"{text}, {extra}" if extra else text

    def update(self, n: int = 1, **counts: Any) -> None:
        """`n` more items done; `counts` (e.g. failed=2) are shown beside the figures."""
        with self._lock:
            self.n += n
            self.counts.update(counts)
            if self._bar is not None:
                if counts:
                    self._bar.set_postfix_str(_counts(self.counts), refresh=False)
                self._bar.update(n)
            now = self.clock()
            since = now - self._last_at
            due = since >= self.every_s or (
                # Every step of the total, but not more often than min_gap_s: a fast stage
                # says a few lines, not one per item.
                self.step is not None
                and self.n - self._last_n >= self.step
                and since >= self.min_gap_s
            )
            if due:
                self._last_at, self._last_n = now, self.n
                self._emit(self.line())

    def _emit(self, text: str) -> None:
        if self._mode == "plain":
            print(text, file=self.stream, flush=True)
        if self.log is not None:
            self.log(text)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._bar is not None:
                self._bar.close()  # leave=False: the line is cleared for what follows
            if self.n != self._last_n:  # the end, if it was not just said
                self._emit(self.line())
