"""Pinned price table: USD per million input/output tokens, list prices as of PRICES_AS_OF.

Pinned in the package (not fetched) so a run's cost is reproducible from its pins. A model not
in the table has cost `None` ("unknown"), never 0: a local or gateway model may well cost
money, and a silent 0 would under-report it. Roles can override with their own prices.
Dated snapshots (`gpt-4o-mini-2024-07-18`, `claude-sonnet-4-5-20250929`) fall back to their
alias; nothing else is matched loosely (`gpt-4o` must not price `gpt-4o-mini`).
"""

from __future__ import annotations

import re

PRICES_AS_OF = "2025-11-30"

# (input, output) USD per 1M tokens; provider list prices, standard tier, no batch discount.
PRICE_TABLE_USD_PER_MTOK: dict[str, dict[str, tuple[float, float]]] = {
    "openai": {
        "gpt-4o": (2.50, 10.00),
        "gpt-4o-mini": (0.15, 0.60),
        "gpt-4.1": (2.00, 8.00),
        "gpt-4.1-mini": (0.40, 1.60),
        "gpt-4.1-nano": (0.10, 0.40),
        "o3": (2.00, 8.00),
        "o3-mini": (1.10, 4.40),
        "o4-mini": (1.10, 4.40),
        "gpt-5": (1.25, 10.00),
        "gpt-5-mini": (0.25, 2.00),
        "gpt-5-nano": (0.05, 0.40),
        "gpt-5.1": (1.25, 10.00),
    },
    "anthropic": {
        "claude-3-haiku": (0.25, 1.25),
        "claude-3-5-haiku": (0.80, 4.00),
        "claude-3-5-sonnet": (3.00, 15.00),
        "claude-3-7-sonnet": (3.00, 15.00),
        "claude-sonnet-4": (3.00, 15.00),
        "claude-sonnet-4-5": (3.00, 15.00),
        "claude-haiku-4-5": (1.00, 5.00),
        "claude-opus-4": (15.00, 75.00),
        "claude-opus-4-1": (15.00, 75.00),
        "claude-opus-4-5": (5.00, 25.00),
    },
}

# -2024-07-18 (OpenAI), -20250929 (Anthropic), -latest (Anthropic alias).
_SNAPSHOT_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


# The `local` provider runs on this machine: nothing is billed per token.
LOCAL_PRICE: tuple[float, float] = (0.0, 0.0)


def price_per_mtok(provider: str, model: str | None) -> tuple[float, float] | None:
    """(input, output) USD per million tokens, or None when the model is not priced."""
    if provider == "local":
        return LOCAL_PRICE
    if model is None:
        return None
    table = PRICE_TABLE_USD_PER_MTOK.get(provider, {})
    if model in table:
        return table[model]
    alias = _SNAPSHOT_SUFFIX.sub("", model)
    return table.get(alias)


def cost_usd(
    prices: tuple[float, float] | None, input_tokens: int, output_tokens: int
) -> float | None:
    if prices is None:
        return None
    return (input_tokens * prices[0] + output_tokens * prices[1]) / 1_000_000
