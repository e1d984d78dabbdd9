"""Backend dialects: what differs between graph servers, one small module each."""

from __future__ import annotations

from eval_pipeline.graph.dialects.arcadedb import ArcadeDBDialect
from eval_pipeline.graph.dialects.base import Dialect
from eval_pipeline.graph.dialects.memgraph import MemgraphDialect
from eval_pipeline.graph.errors import GraphError

DIALECTS: dict[str, type[Dialect]] = {"arcadedb": ArcadeDBDialect, "memgraph": MemgraphDialect}


def get_dialect(backend: str) -> Dialect:
    try:
        return DIALECTS[backend.lower()]()
    except KeyError:
        raise GraphError(
            f"unknown graph backend {backend!r}: expected one of {', '.join(DIALECTS)}"
        ) from None


__all__ = ["DIALECTS", "Dialect", "get_dialect"]
