"""Ctrl-C landing while SQLAlchemy closes one of Dagster's storage connections: the interrupt
goes on, the pool's error log with its traceback does not reach the terminal (found by
test_interrupt_resume: `Exception closing connection` and a DagsterExecutionInterruptedError
traceback on the stderr of an interrupted run)."""

from __future__ import annotations

import logging

import pytest
import sqlalchemy as sa
from dagster._core.errors import DagsterExecutionInterruptedError

from eval_pipeline import interrupts


def _closing_raises(monkeypatch, tmp_path, error: BaseException) -> sa.Connection:
    """A connection to a real SQLite file (as Dagster's storage holds it: NullPool) whose
    close raises `error` after closing."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'runs.db'}", poolclass=sa.pool.NullPool)
    conn = engine.connect()

    def close(dbapi_connection) -> None:
        dbapi_connection.close()
        raise error

    monkeypatch.setattr(engine.dialect, "do_close", close)
    return conn


def _pool_errors(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("sqlalchemy.pool")]


def test_an_interrupt_while_a_connection_closes_is_raised_not_logged(
    monkeypatch, caplog, tmp_path
) -> None:
    conn = _closing_raises(monkeypatch, tmp_path, DagsterExecutionInterruptedError())
    caplog.set_level(logging.ERROR)
    with interrupts.watch(), pytest.raises(DagsterExecutionInterruptedError):
        conn.close()
    assert _pool_errors(caplog) == []


def test_a_real_error_while_a_connection_closes_is_still_logged(
    monkeypatch, caplog, tmp_path
) -> None:
    conn = _closing_raises(monkeypatch, tmp_path, OSError("disk gone"))
    caplog.set_level(logging.ERROR)
    with interrupts.watch():
        conn.close()  # SQLAlchemy logs an Exception and goes on
    (record,) = _pool_errors(caplog)
    assert "Exception closing connection" in record.getMessage()
