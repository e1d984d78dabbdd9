"""Judge throughput with the `local` provider versus the bare llama.cpp server, in one run.

    .venv/bin/python -m benchmarks.bench_local_judge [--model qwen2.5-coder-0.5b-instruct]
        [--calls 8] [--concurrency 1]

Both sides send the same judge requests (the LongMemEval judge's prompt and schema, as the
layer builds them) to the same server at the same concurrency, in alternating rounds (so a
shared machine's load falls on both; who goes first alternates, since the second meets
the server's cached prompt prefix): straight over HTTP (`bare`: urllib, no SDK, no layer),
and through the layer with its cache off (`layer`: SDK, limits, validation, repair and
fallback, accounting). It prints calls/s and prompt and
generation tokens/s for each, their ratio, and the share of the layer's calls that needed a
schema-mode fallback or a repair, or that failed. Prompt tokens/s counts what the server
reported as prompt tokens (llama.cpp reuses a cached prefix, so it is an upper bound).

The CPU is shared: run it on a quiet machine, and read the ratio, not the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from eval_pipeline.llm import LLMError, LLMLayer, LLMSettings, local_models, local_server
from eval_pipeline.llm.messages import normalise_messages
from eval_pipeline.llm.structured import parse_structured, wire_schema, with_schema_instruction
from eval_pipeline.score.judges import JudgeVerdict, judge_instruction

# (question, correct answer, response): right and wrong responses, so verdicts vary.
ITEMS = [
    ("What brand is my road bike?", "Trek", "You bought a red Trek Domane."),
    ("What is my dog's name?", "Biscuit", "Your golden retriever is called Max."),
    ("Who is my violin teacher?", "Anna Kowalski", "Your teacher is Anna Kowalski."),
    ("Where did I buy sourdough?", "at the bakery", "I don't know."),
    ("How many concerts did I go to?", "3", "You went to three concerts."),
    ("Which city did I move to?", "Lisbon", "You moved to Porto."),
    ("What did I cook on Friday?", "aglio e olio", "Spaghetti aglio e olio."),
    ("When did I adopt my kitten?", "May 5th", "On the 5th of May."),
]


def prompts(n: int) -> list[tuple[str, str]]:
    """(system, user) pairs; past len(ITEMS) the question is numbered, so none is repeated."""
    out = []
    for i in range(n):
        question, gold, answer = ITEMS[i % len(ITEMS)]
        if i >= len(ITEMS):
            question = f"{question} (#{i})"
        user = f"Question: {question}\n\nCorrect answer: {gold}\n\nAssistant's response: {answer}"
        out.append((judge_instruction("single-session-user", False), user))
    return out


def bare_body(system: str, user: str, max_tokens: int) -> dict[str, Any]:
    """The body the `local` provider sends for one judge call (same prompt, same schema)."""
    chat = with_schema_instruction(normalise_messages(user, system=system), JudgeVerdict)
    return {
        "model": "local",
        "messages": [{"role": m.role, "content": m.content} for m in chat],
        "temperature": 0.0,
        "max_tokens": max_tokens,
        **local_server.REQUEST_SAMPLING,
        "response_format": {"type": "json_object", "schema": wire_schema(JudgeVerdict)},
    }


def bare_call(record, item: tuple[str, str], max_tokens: int) -> tuple[int, int, bool]:
    data = json.dumps(bare_body(*item, max_tokens)).encode()
    request = urllib.request.Request(
        record.base_url + "/chat/completions",
        data=data,
        headers={"Authorization": f"Bearer {record.key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=900) as response:  # noqa: S310
        body = json.loads(response.read())
    usage = body.get("usage") or {}
    try:
        parse_structured(JudgeVerdict, body["choices"][0]["message"]["content"] or "")
        valid = True
    except Exception:  # noqa: BLE001 - counted, not raised: the bare side has no repair
        valid = False
    return usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0), valid


def run_both(record, spec: str, items, concurrency: int, max_tokens: int, cache: Path):
    """Rounds of `concurrency` calls, bare then layer, so both sides meet the same load on a
    shared machine; each side's wall time is the sum of its rounds."""
    settings = LLMSettings.from_specs(
        {"judge": spec},
        role_overrides={"judge": {"concurrency": concurrency, "cache": False}},
        cache_path=cache,
    )
    layer = LLMLayer(settings)
    judge = layer.role("judge")

    async def layer_round(chunk) -> None:
        async def one(item: tuple[str, str]) -> None:
            try:
                await judge.complete_structured(item[1], JudgeVerdict, system=item[0])
            except LLMError:
                pass  # counted by the ledger as a failure

        await asyncio.gather(*(one(i) for i in chunk))

    bare = {"wall_s": 0.0, "calls": 0, "prompt_tokens": 0, "output_tokens": 0, "invalid": 0}
    layer_wall = 0.0
    try:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for round_index, start in enumerate(range(0, len(items), concurrency)):
                chunk = items[start : start + concurrency]

                def bare_round(chunk=chunk) -> float:
                    began = time.perf_counter()
                    results = list(pool.map(lambda i: bare_call(record, i, max_tokens), chunk))
                    bare["calls"] += len(chunk)
                    bare["prompt_tokens"] += sum(r[0] for r in results)
                    bare["output_tokens"] += sum(r[1] for r in results)
                    bare["invalid"] += sum(not r[2] for r in results)
                    return time.perf_counter() - began

                def timed_layer_round(chunk=chunk) -> float:
                    began = time.perf_counter()
                    layer.run_sync(layer_round(chunk))
                    return time.perf_counter() - began

                # The second side of a round meets the server's cached prompt prefix: who goes
                # first alternates, so each side gets that advantage in half the rounds.
                if round_index % 2 == 0:
                    bare["wall_s"] += bare_round()
                    layer_wall += timed_layer_round()
                else:
                    layer_wall += timed_layer_round()
                    bare["wall_s"] += bare_round()
        usage = layer.snapshot().roles["judge"]
    finally:
        layer.close()
    return bare, {
        "wall_s": layer_wall,
        "calls": usage.calls,
        "prompt_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "requests": usage.provider_requests,
        "fallbacks": usage.fallbacks,
        "repairs": usage.repairs,
        "failures": usage.failures,
        "p50_s": usage.latency.p50_s,
        "p95_s": usage.latency.p95_s,
    }


def rates(r: dict[str, Any]) -> str:
    wall = r["wall_s"]
    return (
        f"{r['calls'] / wall:.3f} calls/s, prompt {r['prompt_tokens'] / wall:.1f} tok/s, "
        f"generation {r['output_tokens'] / wall:.1f} tok/s ({wall:.1f} s wall)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_local_judge")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args(argv)

    model = local_models.resolve(args.model)
    spec = f"local:{args.model}"
    max_tokens = LLMSettings.from_specs({"judge": spec}).role("judge").max_tokens
    items = prompts(args.calls)
    with local_server.owned_servers():
        record = local_server.ensure_running(model)
        bare_call(record, items[0], max_tokens)  # warm-up: the weights paged in
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp) / "cache.sqlite3"
            bare, layer = run_both(record, spec, items, args.concurrency, max_tokens, cache)

    n = layer["calls"]
    print(f"model     : {model.name} (sha256 {model.sha256[:16]}…), {record.version}")
    print(f"calls     : {args.calls} judge calls, concurrency {args.concurrency}")
    print(f"bare      : {rates(bare)}; {bare['invalid']} replies did not fit the schema")
    print(f"layer     : {rates(layer)}; p50 {layer['p50_s']:.2f} s, p95 {layer['p95_s']:.2f} s")
    print(f"ratio     : layer/bare wall {layer['wall_s'] / bare['wall_s']:.2f}")
    print(
        f"robustness: {layer['fallbacks'] / n:.0%} needed a fallback, "
        f"{layer['repairs'] / n:.0%} a repair, {layer['failures'] / n:.0%} failed "
        f"({layer['requests']} requests for {n} calls)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
