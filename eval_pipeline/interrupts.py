"""Ctrl-C (SIGINT, and SIGTERM) during a chain: seen wherever it lands, acted on between stages.

Dagster swaps the SIGINT handler around every run it executes in process (`capture_interrupts`
records an interrupt and, when the run ends, forgets it; `raise_execution_interrupts` raises
it inside a step). A chain is a run of runs, so an interrupt that lands just as a stage ends
was forgotten, and the chain went on to exit 0 with a complete bundle; one that landed between
stages raised in the middle of the driver. So the driver does not rely on any handler:

- `watch()` sets the process's signal wake-up fd (`signal.set_wakeup_fd`): the interpreter's
  C-level handler writes every signal's number there, whichever Python handler is installed,
  so `received()` knows of every SIGINT since the chain began;
- `deferred()` installs a handler that does nothing for the time the driver itself runs (the
  stage runs install Dagster's over it and put it back): an interrupt between stages raises
  nowhere, and the driver stops before the next stage.

An interrupt inside a stage's step still stops that step at once (Dagster raises it there).
A bundle written by a scored_run that was interrupted is withdrawn (`withdraw_bundle`): it is
moved out of the runs directory, so nothing reads it as a complete run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)
WITHDRAWN_DIR = ".interrupted"  # beside the bundles; dot-named like the staging dirs
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C


class _Watch:
    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self.seen = False

    def received(self) -> bool:
        with contextlib.suppress(BlockingIOError, OSError):
            while data := os.read(self._read, 512):
                self.seen = self.seen or any(b in data for b in SIGNALS)
        return self.seen

    def close(self) -> None:
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)


_current: list[_Watch] = []


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def watch() -> Iterator[None]:
    """Record every interrupt this process receives while the block runs (main thread only:
    elsewhere signals are not delivered, and nothing is recorded). Nested blocks share one."""
    if _current or not _main_thread():
        yield
        return
    quiet_interrupted_closes()
    w = _Watch()
    previous = signal.set_wakeup_fd(w._write, warn_on_full_buffer=False)
    _current.append(w)
    try:
        yield
    finally:
        _current.remove(w)
        signal.set_wakeup_fd(previous)
        w.close()


class _InterruptIsNoError(logging.Filter):
    """Drops a record whose exception is an interrupt (KeyboardInterrupt, Dagster's
    DagsterExecutionInterruptedError: BaseException, not Exception)."""

    def filter(self, record: logging.LogRecord) -> bool:
        kind = record.exc_info[0] if record.exc_info else None
        return kind is None or issubclass(kind, Exception)


_QUIET = _InterruptIsNoError()


def quiet_interrupted_closes() -> None:
    """A Ctrl-C that lands while SQLAlchemy closes a connection of Dagster's storage (every
    event write of a SQLite instance opens and closes one) is logged by the pool as an error
    with its traceback, then raised on (`Pool._close_connection` re-raises what is not an
    Exception). The raise is the interrupt; the log line is noise, so the pools' loggers drop it."""
    from sqlalchemy import pool

    for cls in vars(pool).values():
        if isinstance(cls, type) and issubclass(cls, pool.Pool):
            logger = logging.getLogger(f"{cls.__module__}.{cls.__name__}")
            if _QUIET not in logger.filters:
                logger.addFilter(_QUIET)


def received() -> bool:
    """An interrupt arrived since the watch began (False outside any watch)."""
    return bool(_current) and _current[0].received()


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT/SIGTERM raise nothing while the block runs (they are still recorded by
    `watch`); the handlers before it are put back at its end."""
    if not _main_thread():
        yield
        return
    before = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, lambda *_: None)
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def is_interrupt(error_class: str | None) -> bool:
    """A step's error class that says it was interrupted, not that it failed."""
    return bool(error_class) and any(
        name in str(error_class)
        for name in ("DagsterExecutionInterruptedError", "KeyboardInterrupt")
    )


def withdraw_bundle(run_dir: Path) -> Path | None:
    """Move an interrupted run's bundle out of the runs directory (into `.interrupted/`), so
    no listing, comparison or calibration takes it for a run; where it went (None: no bundle)."""
    run_dir = Path(run_dir)
    target = run_dir.parent / WITHDRAWN_DIR / run_dir.name
    if not run_dir.is_dir():
        return target if target.is_dir() else None  # withdrawn already (by its asset)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(run_dir), str(target))
    return target
