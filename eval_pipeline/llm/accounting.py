"""Per-role accounting: calls, cache hits, requests, failures, tokens, cost, latency.

Tokens and cost count what was *spent in this process* (provider requests, including retries
that got an answer and repair attempts); a cache hit spends nothing. Cost is `None` when the
role's model has no price or a server did not report usage: unknown is not zero.

Replays: `cache_hits` counts every answer served from the cache; `cache_replayed` counts the
hits on entries written by ANOTHER origin (another layer, i.e. another run or process; or an
entry from before origins were recorded). A run whose hits are all its own (the same prompt
asked twice in one run) has `cache_replayed == 0`. Together with `sample_identity` (the layer's
`LLMSettings.sample_identity`, also part of every cache key) this is what `calibrate` reads to
tell a fresh sample from a replay of another run.
"""

from __future__ import annotations

import statistics
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from eval_pipeline.llm.config import ROLE_NAMES, LLMSettings, RoleConfig
from eval_pipeline.llm.prices import PRICES_AS_OF, cost_usd, price_per_mtok


class LatencySummary(BaseModel):
    """Wall time of calls answered by the provider (retries included; cache hits excluded)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = 0
    total_s: float = 0.0
    mean_s: float | None = None
    p50_s: float | None = None
    p95_s: float | None = None
    max_s: float | None = None

    @classmethod
    def of(cls, samples: list[float]) -> LatencySummary:
        if not samples:
            return cls()
        ordered = sorted(samples)
        p95_index = min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))
        return cls(
            count=len(ordered),
            total_s=round(sum(ordered), 6),
            mean_s=round(statistics.fmean(ordered), 6),
            p50_s=round(statistics.median(ordered), 6),
            p95_s=round(ordered[p95_index], 6),
            max_s=round(ordered[-1], 6),
        )


class RoleUsage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str
    provider: str
    model: str | None
    calls: int = 0  # logical calls asked of the layer
    cache_hits: int = 0
    cache_replayed: int = 0  # ... of the hits, those on entries written by another origin
    sample_identity: str | None = None  # the layer's sample identity (in every cache key)
    provider_requests: int = 0  # HTTP requests sent, retries and repairs included
    retries: int = 0
    repairs: int = 0
    # calls whose server refused the structured-output mode, asked again in a lesser one
    fallbacks: int = 0
    failures: int = 0  # calls that ended in LLMCallFailed (or LLMCacheError: kind "cache")
    failures_by_kind: dict[str, int] = {}
    input_tokens: int = 0
    output_tokens: int = 0
    requests_without_usage: int = 0
    cost_usd: float | None = 0.0
    latency: LatencySummary = LatencySummary()


class UsageSnapshot(BaseModel):
    """Serialisable accounting for Dagster metadata and the run manifest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prices_as_of: str = PRICES_AS_OF
    roles: dict[str, RoleUsage]
    total_cost_usd: float | None
    sample_identity: str | None = None  # LLMSettings.sample_identity of the layer
    origin: str | None = None  # the token this layer wrote its cache entries with

    def to_metadata(self) -> dict[str, Any]:
        """Plain JSON-safe values (wrap in dagster.MetadataValue.json at the asset)."""
        return self.model_dump(mode="json")


@dataclass
class _RoleCounters:
    calls: int = 0
    cache_hits: int = 0
    cache_replayed: int = 0
    provider_requests: int = 0
    retries: int = 0
    repairs: int = 0
    fallbacks: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    input_tokens: int = 0
    output_tokens: int = 0
    requests_without_usage: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    latencies: list[float] = field(default_factory=list)


class UsageLedger:
    """Thread-safe counters for every role of one layer."""

    def __init__(self, settings: LLMSettings, *, origin: str | None = None) -> None:
        self._sample_identity = settings.sample_identity
        self._origin = origin if origin is not None else settings.origin
        self._configs: dict[str, RoleConfig] = {name: settings.role(name) for name in ROLE_NAMES}
        self._prices = {name: _role_prices(config) for name, config in self._configs.items()}
        self._counters = {name: _RoleCounters() for name in ROLE_NAMES}
        self._lock = threading.Lock()

    def call_started(self, role: str) -> None:
        with self._lock:
            self._counters[role].calls += 1

    def cache_hit(self, role: str, *, replayed: bool = False) -> None:
        """A call answered from the cache; `replayed`: the entry was written by another origin."""
        with self._lock:
            self._counters[role].cache_hits += 1
            if replayed:
                self._counters[role].cache_replayed += 1

    def request_sent(self, role: str) -> None:
        with self._lock:
            self._counters[role].provider_requests += 1

    def retry(self, role: str) -> None:
        with self._lock:
            self._counters[role].retries += 1

    def repair(self, role: str) -> None:
        with self._lock:
            self._counters[role].repairs += 1

    def fallback(self, role: str) -> None:
        with self._lock:
            self._counters[role].fallbacks += 1

    def usage(self, role: str, input_tokens: int | None, output_tokens: int | None) -> None:
        with self._lock:
            counters = self._counters[role]
            if input_tokens is None or output_tokens is None:
                counters.requests_without_usage += 1
                counters.cost_known = False
                counters.input_tokens += input_tokens or 0
                counters.output_tokens += output_tokens or 0
                return
            counters.input_tokens += input_tokens
            counters.output_tokens += output_tokens
            cost = cost_usd(self._prices[role], input_tokens, output_tokens)
            if cost is None:
                counters.cost_known = False
            else:
                counters.cost_usd += cost

    def call_succeeded(self, role: str, latency_s: float) -> None:
        with self._lock:
            self._counters[role].latencies.append(latency_s)

    def call_failed(self, role: str, kind: str) -> None:
        with self._lock:
            self._counters[role].failures[kind] += 1

    def snapshot(self) -> UsageSnapshot:
        with self._lock:
            roles = {name: self._role_usage(name) for name in ROLE_NAMES}
        costs = [usage.cost_usd for usage in roles.values()]
        known = [c for c in costs if c is not None]
        total = round(sum(known), 10) if len(known) == len(costs) else None
        return UsageSnapshot(
            roles=roles,
            total_cost_usd=total,
            sample_identity=self._sample_identity,
            origin=self._origin,
        )

    def _role_usage(self, name: str) -> RoleUsage:
        counters, config = self._counters[name], self._configs[name]
        # A role never called spent nothing. A role that was called has a known cost only
        # when its model is priced (and every request reported usage): a re-run answered
        # wholly from the cache still reports null for an unpriced model, never 0.0.
        priced = self._prices[name] is not None and counters.cost_known
        known = priced or counters.calls == 0
        return RoleUsage(
            role=name,
            provider=config.provider,
            model=config.model,
            calls=counters.calls,
            cache_hits=counters.cache_hits,
            cache_replayed=counters.cache_replayed,
            sample_identity=self._sample_identity,
            provider_requests=counters.provider_requests,
            retries=counters.retries,
            repairs=counters.repairs,
            fallbacks=counters.fallbacks,
            failures=sum(counters.failures.values()),
            failures_by_kind=dict(sorted(counters.failures.items())),
            input_tokens=counters.input_tokens,
            output_tokens=counters.output_tokens,
            requests_without_usage=counters.requests_without_usage,
            cost_usd=round(counters.cost_usd, 10) if known else None,
            latency=LatencySummary.of(counters.latencies),
        )


def _role_prices(config: RoleConfig) -> tuple[float, float] | None:
    if config.input_usd_per_mtok is not None and config.output_usd_per_mtok is not None:
        return (config.input_usd_per_mtok, config.output_usd_per_mtok)
    return price_per_mtok(config.provider, config.model)


def merge_usage(snapshots: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """K layers' accounting (`UsageSnapshot.to_metadata()`, one per question batch) as one:
    counters and latency totals summed per role, cost summed (None when any is unknown).
    Percentiles cannot be merged from summaries: p50/p95 are None, each batch keeps its own."""
    present = [s for s in snapshots if s]
    if len(snapshots) <= 1 or not present:
        return present[0] if present else None
    roles: dict[str, dict[str, Any]] = {}
    for snap in present:
        for name, usage in (snap.get("roles") or {}).items():
            merged = roles.get(name)
            if merged is None:
                merged = roles[name] = {
                    **usage,
                    "failures_by_kind": dict(usage.get("failures_by_kind") or {}),
                    "latency": {"count": 0, "total_s": 0.0, "max_s": None},
                }
            else:
                for key, value in usage.items():
                    if isinstance(value, int) and not isinstance(value, bool):
                        merged[key] = merged.get(key, 0) + value
                merged["cost_usd"] = _sum_or_none(merged.get("cost_usd"), usage.get("cost_usd"))
                kinds = merged["failures_by_kind"]
                for kind, n in (usage.get("failures_by_kind") or {}).items():
                    kinds[kind] = kinds.get(kind, 0) + n
            lat, theirs = merged["latency"], usage.get("latency") or {}
            lat["count"] += theirs.get("count") or 0
            lat["total_s"] = round(lat["total_s"] + (theirs.get("total_s") or 0.0), 6)
            maxima = [m for m in (lat["max_s"], theirs.get("max_s")) if m is not None]
            lat["max_s"] = max(maxima) if maxima else None
    for merged in roles.values():
        lat = merged["latency"]
        lat["mean_s"] = round(lat["total_s"] / lat["count"], 6) if lat["count"] else None
        lat["p50_s"] = lat["p95_s"] = None
    costs = [s.get("total_cost_usd") for s in present]
    identities = {s.get("sample_identity") for s in present}
    origins = {s.get("origin") for s in present}
    return {
        "prices_as_of": present[0].get("prices_as_of"),
        "roles": roles,
        "total_cost_usd": None if any(c is None for c in costs) else round(sum(costs), 6),
        "sample_identity": identities.pop() if len(identities) == 1 else None,
        "origin": origins.pop() if len(origins) == 1 else None,
        "batches": len(snapshots),
    }


def _sum_or_none(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a + b, 6)
