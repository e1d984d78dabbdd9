"""Memory systems that own their storage, plugged in as they are (see `providers.base`).

- `base`: the interface (`MemoryProvider`) and what crosses it;
- `ingest`: feeding a provider from the injected graph, resumable;
- `retriever`: retrieval through the provider's own search;
- `audit`: the formation audit (supported, unsupported, unsourced memories);
- `mem0`: mem0 (open source), offline; `http` and `mem0_platform`: hosted APIs.

A provider is named like any reconciler (`--memory mem0`, a registered name, or
`pkg.mod:Class`) and loaded through the one plug-in registry (kind `reconciler`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eval_pipeline import plugins
from eval_pipeline.providers.base import (
    MemoryProvider,
    ProviderEnv,
    ProviderError,
    ProviderHit,
    ProviderSession,
    ProviderTurn,
    ProviderUnavailable,
    StoredMemory,
    is_provider,
    pins_digest,
)

KIND = "reconciler"


def is_provider_spec(spec: str) -> bool:
    """Does `spec` name a provider (rather than a reconciler or memory system)?"""
    return is_provider(plugins.resolve(KIND, spec))


def storage_dir(
    state_root: Path, where: str, spec: str, options: Mapping[str, Any], model: str
) -> Path:
    """A provider's own directory: one per graph instance (`where`: two instances never share
    a store, and a local vector store is locked by one process) and per configuration (so a
    re-run with the same configuration resumes, and another one starts apart)."""
    instance = hashlib.sha256(where.encode("utf-8")).hexdigest()[:12]
    config = pins_digest({"spec": spec, "options": dict(options), "model": model})
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in spec)[:40]
    return state_root / "memory_providers" / instance / f"{name}-{config}"


def load_provider(spec: str, options: Mapping[str, Any] | None, env: ProviderEnv) -> MemoryProvider:
    """A ready provider for `spec`, every failure the registry's one-line error."""
    plugin = plugins.find(KIND, spec)
    return plugins.construct(KIND, plugin.spec, plugin.target, env, options=options)


__all__ = [
    "MemoryProvider",
    "ProviderEnv",
    "ProviderError",
    "ProviderHit",
    "ProviderSession",
    "ProviderTurn",
    "ProviderUnavailable",
    "StoredMemory",
    "is_provider",
    "is_provider_spec",
    "load_provider",
    "storage_dir",
]
