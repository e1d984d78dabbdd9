"""`providers.http` and the `mem0-platform` adapter against a local stand-in of mem0's API.

`FakeMem0` is a small real HTTP server on loopback (http.server in a thread) implementing the
documented endpoints over an in-memory dict: add (`POST /v3/memories/add/`, queued: the
memories appear once `GET /v1/event/{id}/` reports SUCCEEDED; and the older
`POST /v1/memories/` with `async_mode: false`), search (`/v3/memories/search/`, which refuses a
top-level `user_id` as documented, and `/v2/memories/search/`), list (`/v3/memories/`
paginated by query parameters into an envelope, `/v2/memories/` by body into a bare array) and
delete (`DELETE /v1/memories/?user_id=`, applied one listing late, as a queued delete is).
Faults (a status, headers, a body, a stall) are scripted per path. The real service
(https://api.mem0.ai) is never reached by these tests, and was not reached when the adapter was
written either: what they prove is behaviour against the documented shapes.
"""

from __future__ import annotations

import email.utils
import json
import logging
import secrets
import socket
import threading
import time
import traceback
import urllib.parse
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.providers.base import (
    ProviderEnv,
    ProviderError,
    ProviderSession,
    ProviderTurn,
    ProviderUnavailable,
)
from eval_pipeline.providers.http import HttpStatusError, parse_retry_after
from eval_pipeline.providers.mem0_platform import Mem0PlatformProvider

KEY = "m0-" + secrets.token_hex(24)  # what the provider reads from MEM0_API_KEY


# ---------------------------------------------------------------------- the stand-in server


@dataclass
class Fault:
    path: str  # applies to requests whose path starts with this
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay_s: float = 0.0  # stall this long before answering (then answer normally if status 0)


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


class FakeMem0:
    def __init__(self, key: str = KEY) -> None:
        self.key = key
        self.lock = threading.Lock()
        self.memories: dict[str, dict[str, Any]] = {}
        self.events: dict[str, dict[str, Any]] = {}
        self.deleting: dict[str, int] = {}  # user_id → listings before the delete applies
        self.faults: deque[Fault] = deque()
        self.seen: list[Seen] = []
        self.polls_before_done = 1
        self.event_outcome = "SUCCEEDED"
        self.url = ""

    # -- helpers for tests
    def fault(self, *faults: Fault) -> None:
        self.faults.extend(faults)

    def requests(self, method: str, prefix: str) -> list[Seen]:
        return [s for s in self.seen if s.method == method and s.path.startswith(prefix)]

    # -- dispatch
    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: Any):
        split = urllib.parse.urlsplit(raw_path)
        path, query = split.path, dict(urllib.parse.parse_qsl(split.query))
        with self.lock:
            self.seen.append(Seen(method, path, query, headers, body))
            fault = next((f for f in self.faults if path.startswith(f.path)), None)
            if fault is not None:
                self.faults.remove(fault)
        if fault is not None:
            if fault.delay_s:
                time.sleep(fault.delay_s)
            if fault.status:
                return fault.status, fault.headers, fault.body
        if headers.get("authorization") != f"Token {self.key}":
            # As some services do: the refusal quotes what it was given.
            presented = headers.get("authorization", "")
            return 401, {}, {"detail": f"Invalid API key: {presented}"}
        with self.lock:
            return self.route(method, path, query, body)

    def route(self, method: str, path: str, query: dict[str, str], body: Any):
        if method == "POST" and path == "/v3/memories/add/":
            return self.add_v3(body)
        if method == "POST" and path == "/v1/memories/":
            return self.add_v1(body)
        if method == "GET" and path.startswith("/v1/event/"):
            return self.event(path.split("/")[3])
        if method == "POST" and path == "/v3/memories/search/":
            return self.search(body, envelope=True)
        if method == "POST" and path == "/v2/memories/search/":
            return self.search(body, envelope=False)
        if method == "POST" and path == "/v3/memories/":
            return self.list_v3(query, body)
        if method == "POST" and path == "/v2/memories/":
            return self.list_v2(body)
        if method == "DELETE" and path == "/v1/memories/":
            return self.delete(query)
        return 404, {}, {"detail": "Not found."}

    def _new_memories(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """One memory per user message (every message with infer false), as extraction
        would make, carrying the add's metadata."""
        created = []
        stamp = body.get("timestamp")
        for message in body["messages"]:
            if body.get("infer", True) and message["role"] != "user":
                continue
            record = {
                "id": str(uuid.uuid4()),
                "memory": message["content"],
                "user_id": body["user_id"],
                "metadata": body.get("metadata"),
                "created_at": stamp,
                "updated_at": stamp,
            }
            created.append(record)
        return created

    def add_v3(self, body: dict[str, Any]):
        if not body.get("messages") or not body.get("user_id"):
            return 400, {}, {"error": "400 Bad Request", "details": {"message": "invalid"}}
        event_id = str(uuid.uuid4())
        pending = self._new_memories(body)
        self.events[event_id] = {"polls": self.polls_before_done, "pending": pending}
        return 200, {}, {"event_id": event_id, "status": "PENDING"}

    def add_v1(self, body: dict[str, Any]):
        if body.get("async_mode", True):
            return 400, {}, {"error": "this stand-in only does async_mode false"}
        created = self._new_memories(body)
        for record in created:
            self.memories[record["id"]] = record
        results = [
            {"id": r["id"], "event": "ADD", "data": {"memory": r["memory"]}} for r in created
        ]
        if body.get("output_format") == "v1.1" and body.get("version") == "v2":
            return 200, {}, {"results": results, "relations": []}
        return 200, {}, results

    def event(self, event_id: str):
        event = self.events.get(event_id)
        if event is None:
            return 404, {}, {"error": "Event not found"}
        if event["polls"] > 0:
            event["polls"] -= 1
            return 200, {}, {"id": event_id, "event_type": "ADD", "status": "PENDING"}
        if self.event_outcome == "FAILED":
            return 200, {}, {"id": event_id, "status": "FAILED", "error": "extraction failed"}
        results = event.setdefault("results", [])
        for record in event.pop("pending", []):
            self.memories[record["id"]] = record
            results.append(
                {"id": record["id"], "event": "ADD", "data": {"memory": record["memory"]}}
            )
        return 200, {}, {"id": event_id, "status": "SUCCEEDED", "results": results}

    def _of(self, user_id: str) -> list[dict[str, Any]]:
        return [m for m in self.memories.values() if m["user_id"] == user_id]

    def search(self, body: dict[str, Any], *, envelope: bool):
        if "user_id" in body:
            return 400, {}, {"error": "Top-level entity parameters are not supported"}
        user_id = (body.get("filters") or {}).get("user_id")
        if not user_id or not body.get("query"):
            return 400, {}, {"error": "query and filters.user_id are required"}
        words = set(body["query"].lower().split())
        scored = []
        for m in self._of(user_id):
            overlap = len(words & set(m["memory"].lower().split()))
            if overlap:
                scored.append({**m, "score": overlap / max(1, len(words))})
        scored.sort(key=lambda m: -m["score"])
        hits = scored[: int(body.get("top_k", 10))]
        return 200, {}, ({"results": hits} if envelope else hits)

    def _listing(self, user_id: str | None) -> list[dict[str, Any]] | None:
        if not user_id:
            return None
        if user_id in self.deleting:
            if self.deleting[user_id] > 0:
                self.deleting[user_id] -= 1
            else:
                del self.deleting[user_id]
                for m in self._of(user_id):
                    del self.memories[m["id"]]
        return sorted(self._of(user_id), key=lambda m: m["id"])

    def list_v3(self, query: dict[str, str], body: dict[str, Any]):
        if "user_id" in body:
            return 400, {}, {"error": "Top-level entity parameters are not supported"}
        rows = self._listing((body.get("filters") or {}).get("user_id"))
        if rows is None:
            return 400, {}, {"error": "One of the filters is required"}
        page, size = int(query.get("page", 1)), int(query.get("page_size", 100))
        chunk = rows[(page - 1) * size : page * size]
        more = page * size < len(rows)
        nxt = f"{self.url}/v3/memories/?page={page + 1}&page_size={size}" if more else None
        return 200, {}, {"count": len(rows), "next": nxt, "previous": None, "results": chunk}

    def list_v2(self, body: dict[str, Any]):
        rows = self._listing((body.get("filters") or {}).get("user_id"))
        if rows is None:
            return 400, {}, {"message": "One of the filters is required!"}
        page, size = int(body.get("page", 1)), int(body.get("page_size", 100))
        return 200, {}, rows[(page - 1) * size : page * size]

    def delete(self, query: dict[str, str]):
        user_id = query.get("user_id")
        if not user_id or user_id == "*":
            return 400, {}, {"error": "refusing"}
        self.deleting[user_id] = 1
        return 200, {}, {"message": "Delete in progress.", "event_id": str(uuid.uuid4())}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, extra, answer = self.server.app.handle(self.command, self.path, headers, body)
        data = (
            b""
            if answer is None
            else (answer if isinstance(answer, bytes) else json.dumps(answer).encode())
        )
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (a stall test)
            pass

    do_GET = do_POST = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    app: FakeMem0


@pytest.fixture
def mem0_api() -> Iterator[FakeMem0]:
    app = FakeMem0()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.app = app
    app.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield app
    server.shutdown()
    server.server_close()


MakeProvider = Callable[..., Mem0PlatformProvider]


@pytest.fixture
def make(
    mem0_api: FakeMem0, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[MakeProvider]:
    monkeypatch.setenv("MEM0_API_KEY", KEY)
    built: list[Mem0PlatformProvider] = []

    def build(**options: Any) -> Mem0PlatformProvider:
        settings = {
            "base_url": mem0_api.url,
            "timeout_s": 5.0,
            "backoff_s": 0.01,
            "max_backoff_s": 0.05,
            "poll_interval_s": 0.01,
            "poll_timeout_s": 5.0,
            **options,
        }
        env = ProviderEnv(storage_dir=tmp_path / "store", log=logging.getLogger("test.mem0"))
        provider = Mem0PlatformProvider(env, **settings)
        built.append(provider)
        return provider

    yield build
    for provider in built:
        provider.close()


def session(sid: str, *texts: str, started_at: str | None = None) -> ProviderSession:
    roles = ("user", "assistant")
    return ProviderSession(
        session_id=sid,
        started_at=started_at,
        turns=tuple(
            ProviderTurn(turn_id=f"{sid}#{i}", role=roles[i % 2], content=text)
            for i, text in enumerate(texts)
        ),
    )


S1 = session(
    "s1",
    "I moved to Austin last month",
    "Nice, how is Austin?",
    "My dog Rex loves the Austin parks",
    started_at="2023-05-20T10:00:00",
)
S2 = session("s2", "I started learning the cello", "Great!", started_at="2023-05-25T08:30:00")
S3 = session("s3", "I work as a nurse in Boston")


# ---------------------------------------------------------------------- round trip


@pytest.mark.parametrize("api", ["v3", "v2"])
def test_round_trip_traces_sessions(api: str, make: MakeProvider, mem0_api: FakeMem0) -> None:
    provider = make(api=api, page_size=1)
    formed = provider.ingest("user:q1", S1)
    provider.ingest("user:q1", S2)
    provider.ingest("user:q2", S3)

    # What the add formed, once processed, is attributed to its session (not to one turn: the
    # memory came from the whole session).
    assert formed is not None and {m.text for m in formed} == {
        "I moved to Austin last month",
        "My dog Rex loves the Austin parks",
    }
    assert {(m.session_id, tuple(m.turn_ids)) for m in formed} == {("s1", ())}

    # Every add carried the session's ids and date, under the namespace's user id.
    adds = mem0_api.requests("POST", provider.paths["add"])
    assert len(adds) == 3
    first = adds[0].body
    assert first["user_id"] == provider.user_id("user:q1") != "user:q1"
    assert first["metadata"] == {
        "session_id": "s1",
        "turn_ids": ["s1#0", "s1#1", "s1#2"],
        "started_at": "2023-05-20T10:00:00",
    }
    assert first["timestamp"] == 1684576800  # 2023-05-20T10:00:00Z
    assert [m["role"] for m in first["messages"]] == ["user", "assistant", "user"]
    assert adds[0].headers["authorization"] == f"Token {KEY}"
    if api == "v3":
        assert len(mem0_api.requests("GET", "/v1/event/")) >= 3  # each queued add was awaited
    else:
        assert first["async_mode"] is False

    hits = provider.search(
        "user:q1", "where did I move Austin", top_k=5, question_date="2023/05/30 (Tue) 23:40"
    )
    assert hits and hits[0].session_ids == ["s1"] and hits[0].turn_ids == []
    assert all(h.session_ids in (["s1"], ["s2"]) for h in hits)
    assert hits[0].memory_id and hits[0].score is not None
    search_body = mem0_api.requests("POST", provider.paths["search"])[-1].body
    assert search_body["filters"] == {"user_id": provider.user_id("user:q1")}
    assert search_body["top_k"] == 5 and "user_id" not in search_body
    if api == "v3":
        assert search_body["reference_date"] == "2023-05-30T23:40:00+00:00"

    # The other namespace is apart.
    assert [h.session_ids for h in provider.search("user:q2", "nurse Boston", top_k=5)] == [["s3"]]
    assert provider.search("user:q2", "Austin", top_k=5) == []

    # memories() walks every page (page_size=1).
    held = provider.memories("user:q1")
    assert sorted((m.session_id, m.text) for m in held) == [
        ("s1", "I moved to Austin last month"),
        ("s1", "My dog Rex loves the Austin parks"),
        ("s2", "I started learning the cello"),
    ]
    assert len(mem0_api.requests("POST", provider.paths["list"])) >= 3
    before = provider.fingerprint("user:q1")
    assert before is not None and before["count"] == 3
    assert provider.fingerprint("user:q1") == before

    # reset() forgets one namespace, waiting out the queued delete.
    provider.reset("user:q1")
    assert provider.memories("user:q1") == []
    assert len(provider.memories("user:q2")) == 1
    (delete,) = mem0_api.requests("DELETE", "/v1/memories/")
    assert delete.query == {"user_id": provider.user_id("user:q1")}
    provider.reset("user:q1")  # nothing left: no second delete
    assert len(mem0_api.requests("DELETE", "/v1/memories/")) == 1


def test_turn_unit_names_the_turn(make: MakeProvider, mem0_api: FakeMem0) -> None:
    provider = make(add_unit="turn")
    formed = provider.ingest("user:q1", S1)
    assert formed is not None
    assert {(m.text, tuple(m.turn_ids)) for m in formed} == {
        ("I moved to Austin last month", ("s1#0",)),
        ("My dog Rex loves the Austin parks", ("s1#2",)),
    }
    assert len(mem0_api.requests("POST", "/v3/memories/add/")) == 3
    (hit,) = provider.search("user:q1", "dog Rex", top_k=1)
    assert hit.session_ids == ["s1"] and hit.turn_ids == ["s1#2"]


def test_failed_event_is_a_provider_error(make: MakeProvider, mem0_api: FakeMem0) -> None:
    mem0_api.event_outcome = "FAILED"
    with pytest.raises(ProviderError) as info:
        make().ingest("user:q1", S1)
    assert not isinstance(info.value, ProviderUnavailable)
    assert "FAILED" in str(info.value) and "extraction failed" in str(info.value)


def test_event_that_never_settles_is_unavailable(make: MakeProvider, mem0_api: FakeMem0) -> None:
    mem0_api.polls_before_done = 10_000
    with pytest.raises(ProviderUnavailable, match="still PENDING"):
        make(poll_timeout_s=0.1).ingest("user:q1", S1)


# ---------------------------------------------------------------------- retries and failures


def test_429_retry_after_is_honoured(
    make: MakeProvider, mem0_api: FakeMem0, caplog: pytest.LogCaptureFixture
) -> None:
    provider = make()
    provider.ingest("user:q1", S1)
    caplog.set_level(logging.WARNING)
    mem0_api.fault(Fault("/v3/memories/search/", 429, {"Retry-After": "1"}, {"detail": "slow"}))
    start = time.monotonic()
    hits = provider.search("user:q1", "Austin", top_k=3)
    assert time.monotonic() - start >= 1.0  # the backoff alone is 0.01 s
    assert hits and len(mem0_api.requests("POST", "/v3/memories/search/")) == 2
    assert any("HTTP 429" in r.getMessage() for r in caplog.records)


def test_retry_after_beyond_the_bound_gives_up(make: MakeProvider, mem0_api: FakeMem0) -> None:
    mem0_api.fault(Fault("/v3/memories/search/", 429, {"Retry-After": "3600"}))
    start = time.monotonic()
    with pytest.raises(ProviderUnavailable, match="asks to wait 3600 s"):
        make(max_retry_after_s=5).search("user:q1", "Austin", top_k=3)
    assert time.monotonic() - start < 1.0


def test_5xx_until_attempts_are_spent(make: MakeProvider, mem0_api: FakeMem0) -> None:
    mem0_api.fault(*[Fault("/v3/memories/search/", 500, body={"detail": "boom"})] * 5)
    with pytest.raises(ProviderUnavailable) as info:
        make(max_attempts=3).search("user:q1", "Austin", top_k=3)
    message = str(info.value)
    assert "HTTP 500" in message and "3 attempt(s)" in message and "search" in message
    assert len(mem0_api.requests("POST", "/v3/memories/search/")) == 3


def test_a_write_is_retried_on_5xx(make: MakeProvider, mem0_api: FakeMem0) -> None:
    mem0_api.fault(Fault("/v3/memories/add/", 503))
    formed = make().ingest("user:q1", S2)
    assert formed is not None and [m.text for m in formed] == ["I started learning the cello"]
    assert len(mem0_api.requests("POST", "/v3/memories/add/")) == 2


def test_connection_refused_is_unavailable(make: MakeProvider) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ProviderUnavailable, match="connection failed.*2 attempt"):
        make(base_url=f"http://127.0.0.1:{port}", max_attempts=2).memories("user:q1")


def test_401_is_one_line_provider_error(make: MakeProvider, mem0_api: FakeMem0) -> None:
    mem0_api.key = "another-key-entirely-0000"
    with pytest.raises(ProviderError) as info:
        make().search("user:q1", "Austin", top_k=3)
    error = info.value
    assert isinstance(error, HttpStatusError) and not isinstance(error, ProviderUnavailable)
    message = str(error)
    assert "\n" not in message and len(message) < 400
    assert message.startswith("mem0-platform search (POST /v3/memories/search/): HTTP 401")
    assert "Invalid API key" in message and KEY not in message  # the echo is redacted
    assert len(mem0_api.requests("POST", "/v3/memories/search/")) == 1  # not retried


def test_error_body_is_bounded(make: MakeProvider, mem0_api: FakeMem0) -> None:
    mem0_api.fault(Fault("/v3/memories/search/", 400, body={"detail": "x\n" * 5000}))
    with pytest.raises(HttpStatusError) as info:
        make().search("user:q1", "Austin", top_k=3)
    assert info.value.status == 400 and "\n" not in str(info.value)
    assert len(str(info.value)) < 400


def test_redirects_are_not_followed(make: MakeProvider, mem0_api: FakeMem0) -> None:
    mem0_api.fault(Fault("/v3/memories/search/", 302, {"Location": f"{mem0_api.url}/elsewhere"}))
    with pytest.raises(HttpStatusError, match="HTTP 302") as info:
        make().search("user:q1", "Austin", top_k=3)
    assert info.value.status == 302
    assert not mem0_api.requests("GET", "/elsewhere")
    assert not mem0_api.requests("POST", "/elsewhere")


def test_a_stalled_server_times_out(make: MakeProvider, mem0_api: FakeMem0) -> None:
    mem0_api.fault(*[Fault("/v3/memories/search/", 0, delay_s=1.5)] * 2)
    provider = make(timeout_s=0.2, max_attempts=2)
    start = time.monotonic()
    with pytest.raises(ProviderUnavailable, match=r"no answer within 0\.2 s.*2 attempt"):
        provider.search("user:q1", "Austin", top_k=3)
    assert time.monotonic() - start < 1.2
    assert len(mem0_api.requests("POST", "/v3/memories/search/")) == 2


def test_a_stalled_write_is_not_sent_twice(make: MakeProvider, mem0_api: FakeMem0) -> None:
    mem0_api.fault(Fault("/v3/memories/add/", 0, delay_s=1.5))
    with pytest.raises(ProviderUnavailable, match="not sent again"):
        make(timeout_s=0.2, max_attempts=3).ingest("user:q1", S1)
    assert len(mem0_api.requests("POST", "/v3/memories/add/")) == 1


# ---------------------------------------------------------------------- the key stays secret


def test_the_key_never_leaks(
    make: MakeProvider, mem0_api: FakeMem0, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = make(max_attempts=2)
    failures: list[BaseException] = []
    # Errors that quote the key: a 5xx retried to exhaustion, a 400, a 401.
    mem0_api.fault(*[Fault("/v3/memories/search/", 502, body=f"bad gateway for {KEY}")] * 2)
    mem0_api.fault(Fault("/v3/memories/add/", 400, body={"detail": f"key {KEY} over quota"}))
    for call in (
        lambda: provider.search("user:q1", "Austin", top_k=3),
        lambda: provider.ingest("user:q1", S1),
    ):
        with pytest.raises(ProviderError) as info:
            call()
        failures.append(info.value)
    mem0_api.key = "not-the-key-at-all-0000"
    with pytest.raises(ProviderError) as info:
        provider.memories("user:q1")
    failures.append(info.value)

    texts = [str(e) for e in failures]
    texts += ["".join(traceback.format_exception(e)) for e in failures]
    texts += [r.getMessage() for r in caplog.records] + [caplog.text]
    texts += [json.dumps(provider.pins()), repr(provider.options), repr(vars(provider.env))]
    texts += [p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()]
    assert caplog.records  # the retries were logged
    assert all(KEY not in text and KEY[3:] not in text for text in texts)


def test_the_key_comes_only_from_the_environment(
    make: MakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="read only from the environment variable MEM0_API_KEY"):
        make(api_key=KEY)
    monkeypatch.delenv("MEM0_API_KEY")
    provider = make()  # building needs no key (pins can be computed without one)
    assert provider.pins()["name"] == "mem0-platform"
    with pytest.raises(ProviderUnavailable, match="MEM0_API_KEY is not set"):
        provider.search("user:q1", "Austin", top_k=3)


# ---------------------------------------------------------------------- configuration


def test_pins_and_user_ids(make: MakeProvider) -> None:
    a, b, c = make(), make(timeout_s=9, max_attempts=2, poll_interval_s=3), make(infer=False)
    assert a.pins() == b.pins()  # transport options are not the memory
    assert a.user_id("user:q1") == b.user_id("user:q1")
    assert a.pins() != c.pins() and a.user_id("user:q1") != c.user_id("user:q1")
    pinned = a.pins()
    assert pinned["base_url"] == a.base_url
    assert not set(pinned["options"]) & {"timeout_s", "max_attempts", "poll_interval_s"}
    assert make(user_id_prefix="run7/").user_id("user:q1") == "run7/user:q1"
    with pytest.raises(ProviderError):
        a.user_id("*")
    with pytest.raises(ValueError, match="unknown option"):
        make(colour="blue")
    with pytest.raises(ValueError, match="no credentials"):
        make(base_url="https://someone:secret@api.example.com")


def test_parse_retry_after() -> None:
    now = time.time()
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    date = email.utils.formatdate(now + 5, usegmt=True)
    assert 3.5 <= (parse_retry_after(date, now=now) or 0) <= 5.0
    assert parse_retry_after(email.utils.formatdate(now - 60, usegmt=True), now=now) == 0.0
