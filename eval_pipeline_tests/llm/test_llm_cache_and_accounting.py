"""The cache file under concurrent processes; backoff; prices and the usage snapshot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline.llm import LLMSettings, RetryPolicy
from eval_pipeline.llm.accounting import LatencySummary, UsageLedger
from eval_pipeline.llm.cache import CachedResponse, ResponseCache, cache_key
from eval_pipeline.llm.layer import backoff_delay
from eval_pipeline.llm.prices import price_per_mtok

WRITER = """
import sys
from pathlib import Path
from eval_pipeline.llm.cache import CachedResponse, ResponseCache, cache_key
cache = ResponseCache(Path(sys.argv[1]))
worker = sys.argv[2]
for i in range(100):
    key = cache_key({"worker": worker, "i": i})
    cache.put(key, "openai", CachedResponse(text=f"{worker}-{i}", input_tokens=i, output_tokens=1))
    # every write is immediately readable, also while the other processes write
    assert cache.get(key).text == f"{worker}-{i}"
    shared = cache_key({"shared": i})
    cache.put(shared, "openai", CachedResponse(text=f"shared-{i}"))
"""


def test_concurrent_processes_share_one_cache_file(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite3"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"w{n}"], stderr=subprocess.PIPE)
        for n in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    cache = ResponseCache(path)
    assert len(cache) == 4 * 100 + 100
    assert cache.get(cache_key({"worker": "w3", "i": 99})).text == "w3-99"
    assert cache.get(cache_key({"shared": 7})).text == "shared-7"


def test_cache_key_is_stable_and_order_independent() -> None:
    assert cache_key({"a": 1, "b": [1, 2]}) == cache_key({"b": [1, 2], "a": 1})
    assert cache_key({"a": 1}) != cache_key({"a": 2})


def test_unreadable_entry_is_a_miss(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite3")
    cache.put("k", "openai", CachedResponse(text="x"))
    cache._connection().execute("UPDATE responses SET body = 'not json'")
    assert cache.get("k") is None


def test_backoff_grows_exponentially_and_respects_the_cap() -> None:
    policy = RetryPolicy(backoff_base_s=0.1, backoff_max_s=1.0, jitter=False)
    assert [backoff_delay(policy, i, None) for i in range(5)] == [0.1, 0.2, 0.4, 0.8, 1.0]
    assert backoff_delay(policy, 0, retry_after_s=0.5) == 0.5  # the server's word wins...
    assert backoff_delay(policy, 0, retry_after_s=60) == 1.0  # ...up to our cap
    jittered = RetryPolicy(backoff_base_s=0.1, backoff_max_s=1.0, jitter=True)
    assert all(0.05 <= backoff_delay(jittered, 0, None) <= 0.1 for _ in range(50))


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("openai", "gpt-4o-mini", (0.15, 0.60)),
        ("openai", "gpt-4o-mini-2024-07-18", (0.15, 0.60)),  # dated snapshot → alias
        ("openai", "gpt-4o", (2.50, 10.00)),  # not confused with gpt-4o-mini
        ("anthropic", "claude-sonnet-4-5-20250929", (3.00, 15.00)),
        ("anthropic", "claude-3-5-haiku-latest", (0.80, 4.00)),
        ("openai", "gpt-4o-mini-custom", None),
        ("openai_compatible", "gpt-4o-mini", None),  # a local model of that name is not priced
        ("openai", None, None),
    ],
)
def test_price_lookup(provider: str, model: str | None, expected: tuple | None) -> None:
    assert price_per_mtok(provider, model) == expected


def test_snapshot_is_serialisable_and_totals_costs() -> None:
    settings = LLMSettings.from_specs(
        {"judge": "openai:gpt-4o-mini", "reader": "anthropic:claude-haiku-4-5"}
    )
    ledger = UsageLedger(settings)
    ledger.call_started("judge")
    ledger.request_sent("judge")
    ledger.usage("judge", 1_000_000, 1_000_000)
    ledger.call_succeeded("judge", 0.25)
    snapshot = ledger.snapshot()
    assert snapshot.roles["judge"].cost_usd == pytest.approx(0.75)
    assert snapshot.total_cost_usd == pytest.approx(0.75)
    metadata = snapshot.to_metadata()
    assert metadata["roles"]["judge"]["latency"]["p50_s"] == 0.25
    assert metadata["roles"]["reconciler"]["provider"] == "offline"
    assert metadata["prices_as_of"]


def test_latency_summary() -> None:
    summary = LatencySummary.of([0.1] * 19 + [2.0])
    assert (summary.count, summary.p50_s, summary.p95_s, summary.max_s) == (20, 0.1, 0.1, 2.0)
    assert LatencySummary.of([]).mean_s is None


def test_wire_server_process_serves_and_counts() -> None:
    import asyncio

    from eval_pipeline.llm import LLMLayer, RoleConfig
    from eval_pipeline_tests.wire_server import WireServerProcess

    with WireServerProcess(text="from the child") as server:
        role = RoleConfig(provider="openai", model="gpt-4o-mini", base_url=server.openai_base_url)
        layer = LLMLayer(
            LLMSettings(roles={"reconciler": role.model_copy(update={"cache": False})})
        )

        async def go() -> str:
            async with layer:
                return await layer.role("reconciler").complete_text("hi")

        assert asyncio.run(go()) == "from the child"
        assert server.stats() == {"requests": 1, "max_in_flight": 1}
        server.reset_counts()
        assert server.stats()["requests"] == 0
