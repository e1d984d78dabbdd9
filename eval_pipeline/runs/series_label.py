"""A readable name for a run's configuration: what tells two plot series apart.

`scored_run` charts its headline numbers once per configuration (one series per floor key:
every comparability and configuration pin), so a run of another configuration never joins a
series and reads as a regression. A bare key (`cfg 1a2b3c4d`) told nobody which series was
which, and the old label left out top-k, so top-k 5 and 10 read the same. The label names the
options that make a configuration: memory, retriever and its top-k, graph backend, the
sample, reader and judge; the key's first hex digits stay at its end, for what the label
cannot show (a prompt hash, a tokenizer).
"""

from __future__ import annotations

from typing import Any


def _name(value: Any, field: str) -> str | None:
    if isinstance(value, dict):
        got = value.get(field)
        return str(got) if got is not None else None
    return str(value) if value is not None else None


def configuration_words(pins: dict[str, Any]) -> list[str]:
    """The configuration's options, each a few words, in a fixed order."""
    reconciler = _name(pins.get("reconciler"), "name") or "mixed/none"
    retriever = _name(pins.get("retriever"), "retriever") or "?"
    top_k = pins.get("top_k")
    backend = _name(pins.get("graph"), "backend") or "?"
    sample = (pins.get("corpus") or {}).get("sample_spec", {}).get("sample") or "all"
    judge = _name(pins.get("judge"), "model") or "?"
    # The reader's prompt when not the project's (a LongMemEval prompt reads apart).
    prompt = _name(pins.get("reader_prompt"), "prompt")
    reader = f"{pins.get('reader') or '?'}" + (
        f" ({prompt} prompt)" if prompt not in (None, "project") else ""
    )
    words = [
        f"memory {reconciler}",
        f"{retriever} top-{top_k}" if top_k is not None else retriever,
        backend,
        f"sample {sample}",
        f"reader {reader}",
        f"judge {judge}",
    ]
    scope = pins.get("scope")
    if scope not in (None, "question"):  # the protocol's own scope goes without saying
        words.append(f"scope {scope}")
    return words


def series_label(pins: dict[str, Any], key: str) -> str:
    """`memory extractive, fulltext top-10, arcadedb, sample all, ... · cfg 1a2b3c4d`."""
    return f"{', '.join(configuration_words(pins))} · cfg {key[:8]}"
