"""mem0's hosted Platform API (`https://api.mem0.ai`) as a provider: `mem0-platform`.

NOT CHECKED AGAINST THE REAL SERVICE. This adapter was written from mem0's published API
reference (docs/openapi.json and docs/api-reference/ of github.com/mem0ai/mem0) and from the
official Python client (mem0ai 2.2.1, `mem0/client/main.py`), and tested only against a local
stand-in of the documented endpoints (eval_pipeline_tests/providers/test_http_provider.py).
https://api.mem0.ai was never reached from where it was written (no network): request and
answer shapes the documentation leaves open (what a finished add event's `results` hold, for
one) are read leniently, and a first run against the real service should be watched.

Endpoints, with `Authorization: Token <MEM0_API_KEY>` (the key only from the environment; see
`providers.http`). Option `api` picks the set:

- `api="v3"` (default): what the official client uses today, the others being marked
  deprecated in mem0's OpenAPI document. Add `POST /v3/memories/add/` (`messages`, `user_id`,
  `metadata`, `timestamp`); search `POST /v3/memories/search/` (`query`,
  `filters: {user_id}`, `top_k`, `reference_date`); list `POST /v3/memories/?page=&page_size=`
  (`filters: {user_id}`; a `{count, next, previous, results}` envelope).
- `api="v2"`: the older, deprecated set. Add `POST /v1/memories/` (`messages`, `user_id`,
  `metadata`, `timestamp`, `version: "v2"`, `output_format: "v1.1"`, `async_mode: false`);
  search `POST /v2/memories/search/`; list `POST /v2/memories/` (`page`, `page_size` in the
  body; a bare array).
- Both: forget `DELETE /v1/memories/?user_id=`; event status `GET /v1/event/{event_id}/`.

Asynchronous processing. A v3 add is queued (documented: the answer is
`{"event_id", "status": "PENDING"}`, and `GET /v1/event/{event_id}/` reaches `SUCCEEDED` or
`FAILED`), so `ingest` polls the event every `poll_interval_s` until it settles, for at most
`poll_timeout_s` (then `ProviderUnavailable`; `FAILED` is a `ProviderError`): the session is
searchable when `ingest` returns. With `api="v2"` the add asks for `async_mode: false`; an
answer that is queued all the same is polled the same way. A delete is queued too (its answer
says "Delete in progress"): `reset` lists the user's memories until none is left, within
`poll_timeout_s`.

Mapping. Namespace → `user_id` `<user_id_prefix><namespace>`; the default prefix is
`ep-<digest>:`, the digest of the pins, so two configurations never share a hosted user and a
re-run of the same one finds its memories again (the API key's project is not pinned: no
secret is). Unit of an add: `add_unit="session"` (default: one add per session, so mem0
extracts from the whole conversation) or `"turn"` (one add per turn). Every add carries
`metadata: {session_id, turn_ids, started_at}` (mem0's metadata is per add call, copied to each
memory it extracts); a hit or memory names its session from that metadata, and its turn only
when the add held a single turn (a memory extracted from a whole session cannot say which turn
it came from, and claiming them all would inflate turn-level recall). `started_at` is also sent
as `timestamp` (Unix seconds; mem0 backdates the memories to it) and the question date as the
v3 search's `reference_date`, when `send_dates` (naive corpus dates are taken as UTC).
"""

from __future__ import annotations

import json
import time
import urllib.parse
from datetime import UTC, datetime
from typing import Any, ClassVar

from eval_pipeline.corpus.longmemeval import parse_upstream_date
from eval_pipeline.providers.base import (
    ProviderEnv,
    ProviderError,
    ProviderHit,
    ProviderSession,
    ProviderTurn,
    ProviderUnavailable,
    StoredMemory,
    pins_digest,
)
from eval_pipeline.providers.http import HttpMemoryProvider, HttpStatusError, one_line

PATHS: dict[str, dict[str, str]] = {
    "v3": {"add": "/v3/memories/add/", "search": "/v3/memories/search/", "list": "/v3/memories/"},
    "v2": {"add": "/v1/memories/", "search": "/v2/memories/search/", "list": "/v2/memories/"},
}
DELETE_PATH = "/v1/memories/"
EVENT_PATH = "/v1/event/{event_id}/"
_ROLES = frozenset({"user", "assistant", "system"})
_PENDING = frozenset({"PENDING", "RUNNING", "QUEUED", "IN_PROGRESS"})
_FORMED_EVENTS = frozenset({"ADD", "UPDATE"})


class Mem0PlatformProvider(HttpMemoryProvider):
    name = "mem0-platform"
    version = "1"
    concurrency = 4  # a remote service: the namespaces wait on the network, not the CPU
    api_key_env = "MEM0_API_KEY"
    auth_scheme = "Token"
    default_base_url = "https://api.mem0.ai"
    adapter_options: ClassVar[dict[str, Any]] = {
        "api": "v3",  # "v3" | "v2" (the module docstring)
        "infer": True,  # False: mem0 stores each message as it is, without extraction
        "add_unit": "session",  # "session" | "turn"
        "send_dates": True,  # started_at → timestamp, question date → reference_date
        "user_id_prefix": None,  # None: "ep-<digest of the pins>:"
        "threshold": None,  # search threshold; None: the service's default
        "rerank": None,  # search rerank; None: the service's default
        "poll_interval_s": 1.0,
        "poll_timeout_s": 300.0,
        "page_size": 100,
    }
    adapter_transport_options: ClassVar[frozenset[str]] = frozenset(
        {"poll_interval_s", "poll_timeout_s", "page_size"}
    )

    def __init__(self, env: ProviderEnv, **options: Any) -> None:
        super().__init__(env, **options)
        if self.option("api") not in PATHS:
            raise ValueError(f"{self.name}: api must be one of {sorted(PATHS)}")
        if self.option("add_unit") not in ("session", "turn"):
            raise ValueError(f"{self.name}: add_unit must be 'session' or 'turn'")
        if not 1 <= int(self.option("page_size")) <= 200:
            raise ValueError(f"{self.name}: page_size must be between 1 and 200")
        self.paths = PATHS[self.option("api")]
        prefix = self.option("user_id_prefix")
        if prefix is None:
            pins = self.pins()
            pins["options"] = {k: v for k, v in pins["options"].items() if k != "user_id_prefix"}
            prefix = f"ep-{pins_digest(pins)[:12]}:"
        self.user_id_prefix = str(prefix)

    # ------------------------------------------------------------------ the operations

    def user_id(self, namespace: str) -> str:
        if not namespace or "*" in namespace:
            # "*" is the API's wildcard: a delete with it would forget every user.
            raise ProviderError(f"{self.name}: namespace {namespace!r} cannot be a user id")
        return self.user_id_prefix + namespace

    def ingest(self, namespace: str, session: ProviderSession) -> list[StoredMemory] | None:
        user_id = self.user_id(namespace)
        formed: list[StoredMemory] | None = []
        for unit in self._units(session):
            memories = self._add(user_id, session, unit)
            if memories is None:
                formed = None
            elif formed is not None:
                formed.extend(memories)
        return formed

    def search(
        self, namespace: str, query: str, *, top_k: int, question_date: str | None = None
    ) -> list[ProviderHit]:
        user_id = self.user_id(namespace)
        if not query.strip():
            raise ProviderError(f"{self.name} search: the query is blank")
        body: dict[str, Any] = {
            "query": query,
            "filters": {"user_id": user_id},
            "top_k": int(top_k),
        }
        for key in ("threshold", "rerank"):
            if self.option(key) is not None:
                body[key] = self.option(key)
        if self.option("api") == "v2":
            body["version"] = "v2"
        elif self.option("send_dates") and question_date:
            when = _when(question_date)
            if when is not None:
                body["reference_date"] = when.isoformat()
        answer = self.request("search", "POST", self.paths["search"], body=body)
        hits = []
        for item in _items(answer):
            memory = self._memory(item, user_id)
            if memory is None:
                continue
            hits.append(
                ProviderHit(
                    text=memory.text,
                    memory_id=memory.memory_id,
                    score=_score(item.get("score")),
                    session_ids=[memory.session_id] if memory.session_id else [],
                    turn_ids=list(memory.turn_ids),
                )
            )
        return hits[: int(top_k)]

    def memories(self, namespace: str) -> list[StoredMemory]:
        user_id = self.user_id(namespace)
        page_size = int(self.option("page_size"))
        found: dict[str, StoredMemory] = {}
        page = 1
        while True:
            if self.option("api") == "v3":
                answer = self.request(
                    "memories",
                    "POST",
                    self.paths["list"],
                    params={"page": page, "page_size": page_size},
                    body={"filters": {"user_id": user_id}},
                )
                more = isinstance(answer, dict) and bool(answer.get("next"))
            else:
                answer = self.request(
                    "memories",
                    "POST",
                    self.paths["list"],
                    body={"filters": {"user_id": user_id}, "page": page, "page_size": page_size},
                )
                more = len(_items(answer)) >= page_size
            before = len(found)
            for item in _items(answer):
                memory = self._memory(item, user_id)
                if memory is not None:
                    found.setdefault(memory.memory_id, memory)
            if not more or len(found) == before:  # the last page, or one that adds nothing
                return list(found.values())
            page += 1

    def reset(self, namespace: str) -> None:
        user_id = self.user_id(namespace)
        if not self.memories(namespace):
            return
        try:
            self.request(
                "reset", "DELETE", DELETE_PATH, params={"user_id": user_id}, idempotent=True
            )
        except HttpStatusError as exc:
            if exc.status != 404:  # 404: nothing (left) to delete
                raise
        deadline = time.monotonic() + float(self.option("poll_timeout_s"))
        while (left := len(self.memories(namespace))) > 0:
            if time.monotonic() >= deadline:
                raise ProviderUnavailable(
                    f"{self.name} reset: {left} memories of {namespace} still listed "
                    f"{self.option('poll_timeout_s'):g} s after the delete"
                )
            time.sleep(float(self.option("poll_interval_s")))

    # ------------------------------------------------------------------ adding

    def _units(self, session: ProviderSession) -> list[tuple[ProviderTurn, ...]]:
        turns = tuple(t for t in session.turns if t.content.strip())
        if not turns:
            return []
        if self.option("add_unit") == "turn":
            return [(t,) for t in turns]
        return [turns]

    def _add(
        self, user_id: str, session: ProviderSession, unit: tuple[ProviderTurn, ...]
    ) -> list[StoredMemory] | None:
        turn_ids = [t.turn_id for t in unit]
        metadata: dict[str, Any] = {"session_id": session.session_id, "turn_ids": turn_ids}
        if session.started_at:
            metadata["started_at"] = session.started_at
        body: dict[str, Any] = {
            "messages": [
                {"role": t.role if t.role in _ROLES else "user", "content": t.content} for t in unit
            ],
            "user_id": user_id,
            "metadata": metadata,
        }
        if not self.option("infer"):
            body["infer"] = False
        if self.option("send_dates") and session.started_at:
            when = _when(session.started_at)
            if when is not None:
                body["timestamp"] = int(when.timestamp())
        if self.option("api") == "v2":
            body.update({"version": "v2", "output_format": "v1.1", "async_mode": False})
        answer = self.request("ingest", "POST", self.paths["add"], body=body, idempotent=False)
        return self._settle(answer, session.session_id, turn_ids)

    def _settle(
        self, answer: Any, session_id: str, turn_ids: list[str]
    ) -> list[StoredMemory] | None:
        """The memories an add formed, once its queued events have finished (None: the answer
        does not say)."""
        if isinstance(answer, dict) and "event_id" in answer:
            entries = [answer]
        elif _is_listing(answer):
            entries = _items(answer)
        else:
            return None  # an answer of no documented shape: it cannot say
        results: list[Any] | None = []
        for entry in entries:
            status = str(entry.get("status") or "").upper()
            if "event_id" in entry and "id" not in entry:
                if status == "FAILED":
                    raise ProviderError(
                        f"{self.name} ingest: event {entry['event_id']} FAILED: "
                        f"{one_line(str(entry.get('error') or entry.get('message') or ''))}"
                    )
                if status in _PENDING or not isinstance(entry.get("results"), list):
                    polled = self._poll(str(entry["event_id"]))
                else:
                    polled = entry["results"]
                if polled is None:
                    results = None
                elif results is not None:
                    results.extend(polled)
            elif results is not None:
                results.append(entry)
        if results is None:
            return None
        claimed = turn_ids if len(turn_ids) == 1 else []
        formed = []
        for item in results:
            if not isinstance(item, dict) or not item.get("id"):
                continue
            if str(item.get("event") or "ADD").upper() not in _FORMED_EVENTS:
                continue
            text = _text(item)
            if text is not None:
                formed.append(
                    StoredMemory(
                        memory_id=str(item["id"]),
                        text=text,
                        session_id=session_id,
                        turn_ids=list(claimed),
                    )
                )
        return formed

    def _poll(self, event_id: str) -> list[Any] | None:
        """Wait for a queued event; its `results` when it succeeded (None: not a list)."""
        path = EVENT_PATH.format(event_id=urllib.parse.quote(event_id, safe=""))
        deadline = time.monotonic() + float(self.option("poll_timeout_s"))
        status = "PENDING"
        while True:
            try:
                event = self.request("ingest (event status)", "GET", path)
            except HttpStatusError as exc:
                if exc.status != 404:  # 404: not visible yet, right after the add
                    raise
                event = {"status": "PENDING"}
            event = event if isinstance(event, dict) else {}
            status = str(event.get("status") or "").upper()
            if status == "SUCCEEDED":
                results = event.get("results")
                return results if isinstance(results, list) else None
            if status == "FAILED":
                raise ProviderError(
                    f"{self.name} ingest: event {event_id} FAILED: "
                    f"{one_line(str(event.get('error') or ''))}"
                )
            if time.monotonic() >= deadline:
                raise ProviderUnavailable(
                    f"{self.name} ingest: event {event_id} still {status or 'unknown'} after "
                    f"{self.option('poll_timeout_s'):g} s"
                )
            time.sleep(float(self.option("poll_interval_s")))

    # ------------------------------------------------------------------ reading answers

    def _memory(self, item: Any, user_id: str) -> StoredMemory | None:
        if not isinstance(item, dict) or not item.get("id"):
            return None
        owner = item.get("user_id")
        if owner is not None and owner != user_id:
            self.env.log.warning(
                "%s: skipped memory %s of another user", self.name, one_line(str(item["id"]), 60)
            )
            return None
        text = _text(item)
        if text is None:
            return None
        metadata = item.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        session_id = metadata.get("session_id")
        turn_ids = _string_list(metadata.get("turn_ids"))
        return StoredMemory(
            memory_id=str(item["id"]),
            text=text,
            session_id=session_id if isinstance(session_id, str) and session_id else None,
            turn_ids=turn_ids if len(turn_ids) == 1 else [],
        )


def _is_listing(answer: Any) -> bool:
    return isinstance(answer, list) or (
        isinstance(answer, dict)
        and any(isinstance(answer.get(key), list) for key in ("results", "memories"))
    )


def _items(answer: Any) -> list[dict[str, Any]]:
    """The list of objects in an answer: a bare array, or one under `results` / `memories`."""
    if isinstance(answer, dict):
        for key in ("results", "memories"):
            if isinstance(answer.get(key), list):
                answer = answer[key]
                break
    if not isinstance(answer, list):
        return []
    return [item for item in answer if isinstance(item, dict)]


def _text(item: dict[str, Any]) -> str | None:
    data = item.get("data")
    for value in (item.get("memory"), data.get("memory") if isinstance(data, dict) else None):
        if isinstance(value, str):
            return value
    return None


def _string_list(value: Any) -> list[str]:
    if isinstance(value, str):  # a store that kept the list as JSON text
        try:
            value = json.loads(value)
        except ValueError:
            return [value] if value else []
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, str) and v]


def _score(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _when(value: str) -> datetime | None:
    """An ISO timestamp or an upstream LongMemEval date ("2023/05/30 (Tue) 23:40"), naive
    taken as UTC; None when it is neither."""
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        try:
            when = parse_upstream_date(value.strip())
        except ValueError:
            return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
