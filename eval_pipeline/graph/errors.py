"""Errors of the graph stage: one line each, saying what failed and what to do about it."""

from __future__ import annotations


class GraphError(RuntimeError):
    """Base of every graph-stage error; its message is meant to be printed as is."""


class GraphUnavailableError(GraphError):
    """The server does not answer (not started, killed, wrong address)."""


class GraphServerError(GraphError):
    """The embedded server could not be started or stopped."""


class GraphQueryError(GraphError):
    """The server refused or failed a statement."""


class GraphTimeoutError(GraphError):
    """A read did not finish within its time budget."""


class GraphRowLimitError(GraphError):
    """A read returned more rows than its cap."""


class GraphPayloadError(GraphError):
    """A single row is too large to send in one Bolt message (an oversize message hangs)."""


class ForeignDataError(GraphError):
    """The instance holds data the pipeline did not write: refuse to wipe it."""


class FixtureError(ValueError):
    """fixtures.jsonl breaks its contract (bad session id, duplicate, bad turn index)."""


class InjectionMismatchError(GraphError):
    """After injection the graph does not hold exactly what the fixtures imply."""
