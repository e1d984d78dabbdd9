"""A local stand-in for the providers' HTTP APIs, for tests and benchmarks (loopback only).

It speaks the two wire formats the layer uses: OpenAI `POST /v1/chat/completions` and
Anthropic `POST /v1/messages`, including `usage` and each provider's error body, so the real
SDK code paths run end to end. Replies are scripted: a queue of `ScriptedReply` consumed in
order, then an optional responder function, then a plain success. It records every request,
the number of requests and the largest number in flight at once.

In-process (`WireServer`) suits tests, which inspect requests directly. For benchmarks,
`WireServerProcess` runs it in a child process (`python -m eval_pipeline_tests.wire_server`), so
the server's threads do not compete with the client for the GIL; counts come from
`GET /_stats` there.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
STATS_PATH = "/_stats"
RESET_PATH = "/_reset"


@dataclass(frozen=True)
class ScriptedReply:
    """One reply. With `body` None, a success (or error, for status >= 400) in the wire format
    of the requested path is built from `text` and the token counts. `raw` sends bytes as is."""

    status: int = 200
    text: str = "ok"
    delay_s: float = 0.0
    input_tokens: int | None = 11
    output_tokens: int | None = 7
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    raw: bytes | None = None


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages", []))

    @property
    def last_user_text(self) -> str:
        users = [m for m in self.messages if m.get("role") == "user"]
        content = users[-1].get("content", "") if users else ""
        return content if isinstance(content, str) else json.dumps(content)


Responder = Callable[[RecordedRequest], ScriptedReply]


def openai_chat_body(
    text: str, *, model: str, input_tokens: int | None, output_tokens: int | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }
    if input_tokens is not None and output_tokens is not None:
        body["usage"] = {
            "prompt_tokens": input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        }
    return body


def anthropic_message_body(
    text: str, *, model: str, input_tokens: int | None, output_tokens: int | None
) -> dict[str, Any]:
    return {
        "id": "msg_local",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens or 0, "output_tokens": output_tokens or 0},
    }


def error_body(path: str, status: int, message: str) -> dict[str, Any]:
    if path.endswith(ANTHROPIC_PATH):
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": "server_error", "code": str(status)}}


class WireServer:
    """Start with `with WireServer() as server:`; point SDKs at `openai_base_url` /
    `anthropic_base_url`."""

    def __init__(self, responder: Responder | None = None, *, port: int = 0) -> None:
        self.responder = responder
        self._requested_port = port
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0
        self._script: deque[ScriptedReply] = deque()
        self._in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting and observation -------------------------------------------------------
    def enqueue(self, *replies: ScriptedReply) -> None:
        with self._lock:
            self._script.extend(replies)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> WireServer:
        handler = _make_handler(self)
        server = ThreadingHTTPServer(("127.0.0.1", self._requested_port), handler)
        server.daemon_threads = True  # a handler sleeping past a client timeout must not block
        self._server = server
        # A short poll interval so stop() returns promptly (tests start one server each).
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> WireServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling ----------------------------------------------------------------
    def _begin(self, request: RecordedRequest) -> ScriptedReply:
        with self._lock:
            self.requests.append(request)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            scripted = self._script.popleft() if self._script else None
        if scripted is not None:
            return scripted
        if self.responder is not None:
            return self.responder(request)
        return ScriptedReply()

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1


def _make_handler(owner: WireServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real APIs do
        # Headers and body go out in two writes; with Nagle on, the second waits for the
        # client's delayed ACK (~40 ms on Linux) and every reply looks slow.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # quiet: tests capture logs and look for secrets in them

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path != STATS_PATH:
                self._send_json(404, {"error": "not found"})
                return
            with owner._lock:
                stats = {"requests": len(owner.requests), "max_in_flight": owner.max_in_flight}
            self._send_json(200, stats)

        def _send_json(self, status: int, data: dict[str, Any]) -> None:
            payload = json.dumps(data).encode("utf-8")
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.path == RESET_PATH:
                owner.reset_counts()
                self._send_json(200, {"reset": True})
                return
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = RecordedRequest(
                path=self.path, headers={k.lower(): v for k, v in self.headers.items()}, body=body
            )
            reply = owner._begin(request)
            try:
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                self._send(request, reply)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test): nothing to answer
            finally:
                owner._end()

        def _send(self, request: RecordedRequest, reply: ScriptedReply) -> None:
            if reply.raw is not None:
                payload = reply.raw
            else:
                model = str((request.body or {}).get("model", "local-model"))
                if reply.body is not None:
                    data = reply.body
                elif reply.status >= 400:
                    data = error_body(request.path, reply.status, reply.text)
                elif request.path.endswith(ANTHROPIC_PATH):
                    data = anthropic_message_body(
                        reply.text,
                        model=model,
                        input_tokens=reply.input_tokens,
                        output_tokens=reply.output_tokens,
                    )
                else:
                    data = openai_chat_body(
                        reply.text,
                        model=model,
                        input_tokens=reply.input_tokens,
                        output_tokens=reply.output_tokens,
                    )
                payload = json.dumps(data).encode("utf-8")
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

    return Handler


class WireServerProcess:
    """The server in a child process (loopback, ephemeral port), for benchmarks.

    Every request gets `ScriptedReply(text=text, delay_s=delay_s)`, or the reply of a responder
    given by import path (`package.module:function`, taking a RecordedRequest).
    """

    def __init__(
        self, *, text: str = "ok", delay_s: float = 0.0, responder: str | None = None
    ) -> None:
        self._args = ["--text", text, "--delay-ms", str(delay_s * 1000)]
        if responder:
            self._args += ["--responder", responder]
        self._proc: subprocess.Popen[str] | None = None
        self.port = 0

    def __enter__(self) -> WireServerProcess:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "eval_pipeline_tests.wire_server", *self._args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()  # "PORT <n>" once listening
        if not line.startswith("PORT "):
            self._proc.kill()
            raise RuntimeError(f"wire server did not start: {line!r}")
        self.port = int(line.split()[1])
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()  # the child stops when its stdin closes
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stats(self) -> dict[str, int]:
        url = f"http://127.0.0.1:{self.port}{STATS_PATH}"
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (loopback)
            return dict(json.loads(response.read()))

    def reset_counts(self) -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{RESET_PATH}", data=b"", method="POST"
        )
        with urllib.request.urlopen(request, timeout=10):  # noqa: S310 (loopback)
            pass


def _load_responder(path: str) -> Responder:
    module_name, _, attr = path.partition(":")
    if not attr:
        raise SystemExit(f"--responder must be package.module:function, got {path!r}")
    return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Local OpenAI/Anthropic wire-format server.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--text", default="ok")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--responder", help="package.module:function returning a ScriptedReply")
    args = parser.parse_args(argv)
    fixed = ScriptedReply(text=args.text, delay_s=args.delay_ms / 1000)
    responder = _load_responder(args.responder) if args.responder else (lambda _: fixed)
    with WireServer(responder, port=args.port) as server:
        print(f"PORT {server.port}", flush=True)
        sys.stdin.read()  # serve until the parent closes our stdin (or exits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
