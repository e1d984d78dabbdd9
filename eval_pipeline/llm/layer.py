"""The LLM layer: one object per run, one client per role.

    layer = LLMLayer(LLMSettings.from_specs({"judge": "openai:gpt-4o-mini"}))
    judge = layer.role("judge")
    if judge.is_offline:
        ...  # report "unscored: no judge"
    verdict = await judge.complete(prompt, schema=Verdict)   # Completion; .parsed is a Verdict

A call: cache lookup → (semaphores → per-call timeout → SDK request) with retries and backoff
on 429 / 5xx / timeouts → for a schema, validation and at most one repair → cache store →
accounting. A call that cannot produce a usable answer raises `LLMCallFailed` (already counted).

SDK clients and semaphores belong to an event loop, so they are kept per loop: the layer can be
driven by several `asyncio.run` calls in turn (wrap each in `async with layer:` so its clients
are closed with it). Sync callers (`complete_sync`, deepeval's `generate`) all run on one
background loop owned by the layer, so they share its limits; `layer.close()` stops it.

Samples and replays: `LLMSettings.sample_identity` (e.g. "<salt>/<k>" for repeat k) is part of
every cache key when set, so repeats of one configuration are fresh samples, and re-running a
repeat with its identity reproduces it from the cache. Every entry is stored with the layer's
`origin` (`LLMSettings.origin`, else a random token per layer, `LLMLayer.origin`); a hit on an
entry of another origin is counted as `cache_replayed` in the ledger. An unreadable cache file
raises `LLMCacheError` (counted as a failure of kind "cache"), never a raw sqlite3 error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from eval_pipeline.llm.accounting import UsageLedger, UsageSnapshot
from eval_pipeline.llm.cache import CachedResponse, ResponseCache, cache_key
from eval_pipeline.llm.config import (
    ROLE_NAMES,
    LLMSettings,
    RetryPolicy,
    RoleConfig,
    plugin_provider,
)
from eval_pipeline.llm.credentials import install_log_redaction, read_api_key, redact
from eval_pipeline.llm.deepeval_env import ensure_no_confident_upload
from eval_pipeline.llm.errors import (
    LLMCacheError,
    LLMCallFailed,
    LLMConfigError,
    OfflineRoleError,
    StructuredOutputInvalid,
)
from eval_pipeline.llm.messages import (
    ChatMessage,
    Completion,
    MessagesInput,
    ProviderReply,
    normalise_messages,
)
from eval_pipeline.llm.providers import (
    ChatProvider,
    SchemaModeRefused,
    classify_failure,
    is_provider_error,
    make_provider,
)
from eval_pipeline.llm.structured import (
    STRUCTURED_PROMPT_VERSION,
    StructuredOutputError,
    parse_structured,
    repair_messages,
    schema_fingerprint,
    with_schema_instruction,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

CACHE_FILE_NAME = "llm_cache.sqlite3"
# openai_compatible servers need no key; the SDK still insists on a non-empty string.
_NO_KEY_PLACEHOLDER = "no-key"


def backoff_delay(policy: RetryPolicy, retry_index: int, retry_after_s: float | None) -> float:
    """Exponential in the retry index, with equal jitter; a server's Retry-After is honoured
    up to the policy's cap."""
    delay = min(policy.backoff_max_s, policy.backoff_base_s * (2**retry_index))
    if policy.jitter:
        delay = delay / 2 + random.uniform(0, delay / 2)
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, policy.backoff_max_s))
    return delay


class _BackgroundLoop:
    """An event loop on a daemon thread, for sync callers.

    Sync calls from any thread run here, so they share one set of SDK clients (connection
    pools) and, more importantly, the same per-role and per-provider concurrency limits.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._ensure_started()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError("a sync LLM call from inside the layer's own loop would deadlock")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def _ensure_started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's loop thread does not exist here
                self._loop = self._thread = None
                self._pid = os.getpid()
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="llm-layer-sync", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def stop(self, before_stop: Coroutine[Any, Any, None] | None = None) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            if before_stop is not None:
                before_stop.close()
            return
        if before_stop is not None:
            asyncio.run_coroutine_threadsafe(before_stop, loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


class _LoopState:
    """What must not cross event loops: SDK clients (connection pools) and semaphores."""

    def __init__(self) -> None:
        self.providers: dict[str, ChatProvider] = {}
        self.role_limits: dict[str, asyncio.Semaphore] = {}
        self.provider_limits: dict[tuple[str, str | None], asyncio.Semaphore] = {}


class LLMLayer:
    """Holds the settings, the response cache, the usage ledger and one RoleClient per role.

    Construction refuses to start when a Confident AI key is configured (deepeval would upload
    results), checks every non-offline role's key is in the environment (fail at start, not on
    the thousandth call) and installs log redaction for the process.
    """

    def __init__(self, settings: LLMSettings | None = None) -> None:
        install_log_redaction()
        ensure_no_confident_upload()
        self.settings = settings or LLMSettings()
        # Recorded on every cache entry this layer writes; hits on other origins are replays.
        self.origin = self.settings.origin or secrets.token_hex(8)
        self.ledger = UsageLedger(self.settings, origin=self.origin)
        self._cache: ResponseCache | None = None
        self._cache_lock = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )
        self._loops_lock = threading.Lock()
        self._sync_loop = _BackgroundLoop()
        self._roles = {
            name: RoleClient(
                self, name, self.settings.role(name), _api_key_for(self.settings.role(name))
            )
            for name in ROLE_NAMES
        }

    def __repr__(self) -> str:
        specs = ", ".join(f"{name}={client.config.spec}" for name, client in self._roles.items())
        return f"LLMLayer({specs})"

    def role(self, name: str) -> RoleClient:
        if name not in self._roles:
            raise LLMConfigError(f"unknown role {name!r}; roles are {list(ROLE_NAMES)}")
        return self._roles[name]

    def snapshot(self) -> UsageSnapshot:
        return self.ledger.snapshot()

    def pins(self) -> dict[str, Any]:
        """Every role's pins and `sample_identity` (None for a plain run)."""
        return self.settings.pins()

    @property
    def sample_identity(self) -> str | None:
        return self.settings.sample_identity

    @property
    def cache(self) -> ResponseCache:
        with self._cache_lock:
            if self._cache is None:
                path = self.settings.cache_path
                if path is None:
                    from eval_pipeline.settings import state_dir

                    path = state_dir() / CACHE_FILE_NAME
                self._cache = ResponseCache(path)
            return self._cache

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        with self._loops_lock:
            state = self._loops.get(loop)
            if state is None:
                state = self._loops[loop] = _LoopState()
            return state

    async def aclose(self) -> None:
        """Close the SDK clients opened on the running loop (call before the loop ends)."""
        with self._loops_lock:
            state = self._loops.pop(asyncio.get_running_loop(), None)
        if state is not None:
            for provider in state.providers.values():
                await provider.aclose()

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the layer's background loop and wait for it (for sync callers)."""
        return self._sync_loop.run(coro)

    def close(self) -> None:
        """Stop the background loop (closing its SDK clients) and the cache connection."""
        self._sync_loop.stop(before_stop=self.aclose())
        if self._cache is not None:
            self._cache.close()

    def __enter__(self) -> LLMLayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> LLMLayer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _api_key_for(config: RoleConfig) -> str | None:
    if config.is_offline:
        return None
    env_name = config.key_env_name
    if config.provider == "local":
        return _NO_KEY_PLACEHOLDER  # the local server's own key is read when it starts
    if config.provider == "openai_compatible" and env_name is None:
        return _NO_KEY_PLACEHOLDER
    if env_name is None:
        assert config.is_plugin  # openai and anthropic always name a variable
        return None  # a plug-in provider that takes no key
    return read_api_key(env_name, required=True)


class RoleClient:
    """Calls for one role. `is_offline` roles refuse every call (OfflineRoleError)."""

    def __init__(self, layer: LLMLayer, name: str, config: RoleConfig, api_key: str | None) -> None:
        self._layer = layer
        self.name = name
        self.config = config
        self.__api_key = api_key  # name-mangled and never in repr, logs or cache keys
        # Structured-output modes this role's server refused (json_schema, json_object): later
        # calls start at the first mode not refused, instead of paying a refusal each time.
        self._refused_modes: set[str] = set()

    def __repr__(self) -> str:
        return f"RoleClient(role={self.name!r}, spec={self.config.spec!r})"

    @property
    def is_offline(self) -> bool:
        return self.config.is_offline

    # -- public API ----------------------------------------------------------------------
    async def complete(
        self,
        messages: MessagesInput,
        *,
        schema: type[BaseModel] | None = None,
        system: str | None = None,
        accept: Callable[[Completion], str | None] | None = None,
    ) -> Completion:
        """One logical call; with `schema`, `Completion.parsed` is a validated instance.

        `accept(completion)` is the caller's own check of a reply that parsed (a count that
        must match, a text that must not be empty): the problem it returns makes the call
        fail as invalid output, and such a reply is never cached, nor a cached one that fails
        it replayed — so a re-run (or `--resume`) asks again."""
        if self.is_offline:
            raise OfflineRoleError(
                f"role {self.name!r} is offline (no model): use the offline implementation "
                "or report the item unscored"
            )
        chat = normalise_messages(messages, system)
        ledger = self._layer.ledger
        ledger.call_started(self.name)
        started = time.perf_counter()

        key = self._cache_key(chat, schema) if self.config.cache else None
        if key is not None:
            hit = self._cached(key, schema)
            if hit is not None and accept is not None and accept(hit[0]) is not None:
                hit = None  # cached before the caller's check existed: ask again
            if hit is not None:
                completion, origin = hit
                ledger.cache_hit(self.name, replayed=origin != self._layer.origin)
                return completion

        sent = with_schema_instruction(chat, schema) if schema is not None else chat
        replies: list[ProviderReply] = []
        parsed: BaseModel | None = None
        if schema is None:
            replies.append(await self._request(sent, None))
        else:
            parsed = await self._structured(sent, schema, replies)
        final = replies[-1]
        latency = time.perf_counter() - started
        input_tokens = _sum_or_none(r.input_tokens for r in replies)
        output_tokens = _sum_or_none(r.output_tokens for r in replies)
        if accept is not None:
            problem = accept(
                Completion(role=self.name, text=final.text, parsed=parsed, cached=False)
            )
            if problem is not None:
                ledger.call_failed(self.name, "invalid_output")
                message = redact(f"{self.name}: {self.config.spec}: reply refused: {problem}")
                log.warning("%s", message)
                raise StructuredOutputInvalid(
                    message, role=self.name, kind="invalid_output", attempts=len(replies)
                )
        if key is not None:
            try:
                self._layer.cache.put(
                    key,
                    self.config.provider,
                    CachedResponse(
                        text=final.text,
                        input_tokens=input_tokens,
                        output_tokens=output_tokens,
                        model=final.model,
                    ),
                    origin=self._layer.origin,
                )
            except LLMCacheError:
                # The answer cannot be kept, so a re-run could not reproduce it: unusable.
                ledger.call_failed(self.name, "cache")
                raise
        ledger.call_succeeded(self.name, latency)
        return Completion(
            role=self.name,
            text=final.text,
            parsed=parsed,
            cached=False,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency_s=latency,
            requests=len(replies),
        )

    def _modes(self) -> list[str]:
        """The structured-output modes to try, in order: the configured one, then each
        more lenient one (json_schema → json_object → prompt), less those refused before."""
        order = ["json_schema", "json_object", "prompt"]
        start = order.index(self.config.structured_output_mode)
        modes = [m for m in order[start:] if m not in self._refused_modes]
        return modes or ["prompt"]

    async def _structured(
        self, sent: list[ChatMessage], schema: type[BaseModel], replies: list[ProviderReply]
    ) -> BaseModel:
        """Ask in the first mode the server accepts; in that mode, one repair. A server that
        refuses the mode (HTTP 400 to the schema) is asked in the next one, with one repair
        there too. Every request made is appended to `replies` (usage is summed over them)."""
        ledger = self._layer.ledger
        modes = self._modes()
        for position, mode in enumerate(modes):
            try:
                reply = await self._request(sent, schema, mode=mode)
                replies.append(reply)
                try:
                    return parse_structured(schema, reply.text)
                except StructuredOutputError as first_error:
                    ledger.repair(self.name)
                    repair = repair_messages(
                        sent, reply.text, first_error, truncated=reply.truncated
                    )
                    reply = await self._request(repair, schema, mode=mode)
                    replies.append(reply)
                    try:
                        return parse_structured(schema, reply.text)
                    except StructuredOutputError as second_error:
                        ledger.call_failed(self.name, "invalid_output")
                        cut = " (cut at max_tokens)" if reply.truncated else ""
                        message = redact(
                            f"{self.name}: {self.config.spec}: reply did not fit "
                            f"{schema.__name__} after one repair{cut}: {second_error}"
                        )
                        log.warning("%s", message)
                        raise StructuredOutputInvalid(
                            message,
                            role=self.name,
                            kind="invalid_output",
                            attempts=len(replies),
                        ) from None
            except SchemaModeRefused as refused:
                self._refused_modes.add(mode)
                if position + 1 >= len(modes):  # pragma: no cover - prompt mode sends none
                    ledger.call_failed(self.name, "client_error")
                    raise LLMCallFailed(
                        redact(f"{self.name}: {self.config.spec}: {refused.summary}"),
                        role=self.name,
                        kind="client_error",
                        attempts=len(replies) + 1,
                    ) from None
                ledger.fallback(self.name)
                log.warning(
                    "%s: %s refused structured-output mode %s (%s); asking in mode %s",
                    self.name,
                    self.config.spec,
                    mode,
                    refused.summary,
                    modes[position + 1],
                )
        raise AssertionError("unreachable")  # pragma: no cover

    async def complete_text(self, messages: MessagesInput, *, system: str | None = None) -> str:
        return (await self.complete(messages, system=system)).text

    async def complete_structured(
        self,
        messages: MessagesInput,
        schema: type[M],
        *,
        system: str | None = None,
        accept: Callable[[M], str | None] | None = None,
    ) -> M:
        """The validated instance; `accept(instance)` as in `complete`."""
        check = None if accept is None else (lambda c: accept(c.parsed))  # type: ignore[arg-type]
        completion = await self.complete(messages, schema=schema, system=system, accept=check)
        return completion.parsed  # type: ignore[return-value]

    def complete_sync(
        self,
        messages: MessagesInput,
        *,
        schema: type[BaseModel] | None = None,
        system: str | None = None,
    ) -> Completion:
        """Blocking form, for sync callers (from any thread; not from inside a coroutine
        running on the layer's own loop)."""
        return self._layer.run_sync(self.complete(messages, schema=schema, system=system))

    # -- internals -----------------------------------------------------------------------
    def _cache_key(self, chat: list[ChatMessage], schema: type[BaseModel] | None) -> str:
        config = self.config
        # A model name on a local server says little about the weights behind it, so the
        # endpoint is part of the address there (and for a plug-in, whose servers we don't know).
        by_endpoint = config.provider == "openai_compatible" or config.is_plugin
        parts: dict[str, Any] = {
            "provider": config.provider,
            "model": config.model,
            "endpoint": config.endpoint if by_endpoint else None,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
            "structured_output": config.structured_output_mode if schema else None,
            "schema": schema_fingerprint(schema) if schema else None,
            "prompt_version": STRUCTURED_PROMPT_VERSION if schema else None,
            "messages": [m.model_dump() for m in chat],
        }
        if config.provider == "local":
            # The weights' sha256 and the server's version and sampling decide a local answer,
            # not the file's name or where it lies.
            from eval_pipeline.llm.config import local_pins

            local = local_pins(config.model)
            parts["model"] = "sha256:" + local["weights"]["sha256"]
            parts["server"] = local["server"]
            parts["sampling"] = local["sampling"]
        if config.is_plugin:
            # Which class answers under the plug-in's name, and its version (only there: the
            # built-ins' keys stay those of every existing cache file).
            parts["plugin"] = plugin_provider(config.provider).pins()
        if config.stop:
            parts["stop"] = list(config.stop)
        # Only when set: a plain run's keys stay those of every existing cache file.
        identity = self._layer.settings.sample_identity
        if identity is not None:
            parts["sample_identity"] = identity
        return cache_key(parts)

    def _cached(
        self, key: str, schema: type[BaseModel] | None
    ) -> tuple[Completion, str | None] | None:
        """(completion, origin of the entry), or None on a miss."""
        try:
            entry = self._layer.cache.get(key)
        except LLMCacheError:
            self._layer.ledger.call_failed(self.name, "cache")
            raise
        if entry is None:
            return None
        parsed = None
        if schema is not None:
            try:
                parsed = parse_structured(schema, entry.text)
            except StructuredOutputError:
                return None  # stored before a validator tightened: ask again
        completion = Completion(
            role=self.name,
            text=entry.text,
            parsed=parsed,
            cached=True,
            input_tokens=entry.input_tokens,
            output_tokens=entry.output_tokens,
        )
        return completion, entry.origin

    def _provider(self, state: _LoopState) -> ChatProvider:
        provider = state.providers.get(self.name)
        if provider is None:
            provider = state.providers[self.name] = make_provider(self.config, self.__api_key)
        return provider

    def _limits(self, state: _LoopState) -> list[asyncio.Semaphore]:
        limits = []
        if self.name not in state.role_limits:
            state.role_limits[self.name] = asyncio.Semaphore(self.config.concurrency)
        limits.append(state.role_limits[self.name])
        shared = self._layer.settings.provider_concurrency.get(self.config.provider)
        if shared is None and self.config.provider == "local":
            shared = self.config.concurrency  # one server, shared by every local role
        if shared is not None:
            endpoint = (self.config.provider, self.config.endpoint)
            if endpoint not in state.provider_limits:
                state.provider_limits[endpoint] = asyncio.Semaphore(shared)
            limits.append(state.provider_limits[endpoint])
        return limits

    async def _request(
        self,
        messages: list[ChatMessage],
        schema: type[BaseModel] | None,
        *,
        mode: str | None = None,
    ) -> ProviderReply:
        """One request with retries; raises LLMCallFailed (counted) when it cannot succeed."""
        state = self._layer._loop_state()
        provider = self._provider(state)
        limits = self._limits(state)
        ledger, config = self._layer.ledger, self.config
        attempts = 0
        while True:
            attempts += 1
            try:
                # Semaphores are held for the attempt only, not during backoff sleeps.
                async with contextlib.AsyncExitStack() as held:
                    for limit in limits:
                        await held.enter_async_context(limit)
                    ledger.request_sent(self.name)
                    # The SDK timeout bounds each read; this one bounds the whole attempt.
                    async with asyncio.timeout(config.timeout_s):
                        reply = await provider.send(
                            messages, schema=schema, timeout_s=config.timeout_s, mode=mode
                        )
            except SchemaModeRefused:
                raise
            except Exception as exc:
                if not is_provider_error(exc):
                    raise
                failure = classify_failure(exc)
                if not failure.retryable or attempts > config.max_retries:
                    ledger.call_failed(self.name, failure.kind)
                    message = redact(
                        f"{self.name}: {config.spec}: {failure.summary} "
                        f"(after {attempts} attempt{'s' if attempts > 1 else ''})"
                    )
                    log.warning("%s", message)
                    raise LLMCallFailed(
                        message, role=self.name, kind=failure.kind, attempts=attempts
                    ) from None
                ledger.retry(self.name)
                delay = backoff_delay(
                    self._layer.settings.retry, attempts - 1, failure.retry_after_s
                )
                log.info(
                    "%s: %s; retry %d/%d in %.3fs",
                    self.name,
                    failure.kind,
                    attempts,
                    config.max_retries,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            ledger.usage(self.name, reply.input_tokens, reply.output_tokens)
            # A provider may echo the key back (whole, or without its prefix): nothing after
            # this point — validation, the cache, the caller, the graph, a bundle — sees it.
            return reply.model_copy(
                update={
                    "text": redact(reply.text),
                    "model": redact(reply.model) if reply.model else reply.model,
                }
            )


def _sum_or_none(values: Any) -> int | None:
    items = list(values)
    if any(v is None for v in items):
        return None
    return sum(items)


def layer_for(
    roles: Mapping[str, tuple[str, Mapping[str, Any]]], **settings: Any
) -> LLMLayer | None:
    """The one way a run builds its layer: each named role as (its PROVIDER:MODEL spec, its
    setting overrides such as timeout_s); None when every role named is offline."""
    online = {name: role for name, role in roles.items() if role[0].strip() != "offline"}
    if not online:
        return None
    return LLMLayer(
        LLMSettings.from_specs(
            {name: spec for name, (spec, _) in online.items()},
            role_overrides={name: dict(overrides) for name, (_, overrides) in online.items()},
            **settings,
        )
    )
