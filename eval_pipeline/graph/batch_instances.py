"""The graph instances of a partitioned run's question batches, one store each.

A run over K > 1 question batches puts each batch on an instance of its own (`StoreConfig.
batch_config`): a URI with `{batch}` replaced, or an embedded server per batch. The store of
the whole run makes each batch's store once and closes them when it closes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from eval_pipeline.corpus.batches import BatchKey
from eval_pipeline.graph.config import StoreConfig


class Closable(Protocol):
    def close(self) -> None: ...


S = TypeVar("S", bound=Closable)


class BatchInstances(Generic[S]):
    def __init__(self, config: StoreConfig, make: Callable[[StoreConfig], S]) -> None:
        self._config = config
        self._make = make
        self._stores: dict[str, S] = {}
        self._lock = threading.Lock()

    def get(self, batch: BatchKey) -> S | None:
        """Batch `batch`'s store, made on first use; None when the batch's instance is the
        run's own (a run of one batch)."""
        config = self._config.batch_config(batch)
        if config is None:
            return None
        with self._lock:
            store = self._stores.get(batch.key)
            if store is None:
                store = self._stores[batch.key] = self._make(config)
        return store

    def close(self) -> None:
        with self._lock:
            stores = list(self._stores.values())
        for store in stores:
            store.close()
