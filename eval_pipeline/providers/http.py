"""The base of providers that are hosted memory services reached over HTTP.

`HttpMemoryProvider` holds what every such adapter needs and none should write twice: the base
URL (option `base_url`, the adapter's `default_base_url` otherwise), the API key, and one
`request()` that sends JSON, retries what is worth retrying and turns every failure into the
provider errors of `providers.base`:

- API key: read from the environment variable the adapter names (`api_key_env`), never from an
  option (an `api_key` option is refused), and registered with the project's redaction
  (`llm.credentials`), so it appears in no error, log record, pin or file. It is read on first
  use, so building a provider (to compute its pins, say) needs no key.
- Transport: the standard library (`urllib.request`), as `graph.arcadedb_http` does: httpx is
  not a declared dependency of the project (it is installed only through huggingface-hub).
  One opener per provider; redirects are never followed (a redirect would carry the
  `Authorization` header to wherever it points: it fails as a 3xx instead); environment proxies
  are used except for loopback base URLs.
- Timeouts: `timeout_s` (option; else `ProviderEnv.timeout_s`; else 30 s) bounds connecting and
  every wait for bytes (urllib's socket timeout), not the whole exchange.
- Retries: at most `max_attempts` attempts (default 5) with exponential backoff (`backoff_s`
  doubled per attempt, at most `max_backoff_s`, plus up to 10 % jitter) on 429, on 5xx and on
  connection failures. A 429's `Retry-After` (seconds or an HTTP date) is honoured: the wait is
  the longer of it and the backoff; when the service asks for more than `max_retry_after_s` the
  call gives up at once. A request that is not idempotent (`idempotent=False`: a write) is not
  sent again when the failure came after it was sent (a timeout waiting for the answer, a reset
  connection): the service may have applied it, and a second write would duplicate it.
- Failures: once the attempts are spent, or for a failure not retried, a connection failure, a
  timeout, a 429 or a 5xx raise `ProviderUnavailable` (infrastructure: unscored); any other
  status (4xx, or a 3xx) raises `HttpStatusError` (a `ProviderError` with `.status`), whose
  message is one line naming the provider, the operation, the request and the status, with a
  redacted snippet of the body of at most `SNIPPET_CHARS` characters.

The transport options (`TRANSPORT_OPTIONS`) are left out of `pins()`: a re-run with another
timeout is the same memory. The base URL is pinned (another service is another memory).
"""

from __future__ import annotations

import email.utils
import http.client
import ipaddress
import json
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from typing import Any, ClassVar

from eval_pipeline.llm.credentials import install_log_redaction, read_api_key, redact
from eval_pipeline.llm.errors import LLMConfigError
from eval_pipeline.providers.base import (
    MemoryProvider,
    ProviderEnv,
    ProviderError,
    ProviderUnavailable,
)

SNIPPET_CHARS = 200
DEFAULT_TIMEOUT_S = 30.0
USER_AGENT = "eval-pipeline-provider/1"

# Options of every HTTP provider that tune the transport only (not pinned).
TRANSPORT_OPTIONS: frozenset[str] = frozenset(
    {"timeout_s", "max_attempts", "backoff_s", "max_backoff_s", "max_retry_after_s"}
)
_REFUSED_OPTIONS = frozenset({"api_key", "key", "token", "api_token", "authorization"})


class HttpStatusError(ProviderError):
    """A refused request (4xx other than 429, or a 3xx): `status` says which."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: it would resend the credentials to another URL."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class _Retryable(Exception):
    """One failed attempt worth another (internal)."""

    def __init__(self, what: str, *, retry_after: float | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.retry_after = retry_after


def one_line(text: str, limit: int = SNIPPET_CHARS) -> str:
    """`text` redacted, on one line, at most `limit` characters."""
    flat = " ".join(redact(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header (delay-seconds or an HTTP date); None when
    absent or unreadable."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = datetime.now(UTC).timestamp() if now is None else now
    return max(0.0, when.timestamp() - current)


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HttpMemoryProvider(MemoryProvider):
    """A provider backed by a hosted HTTP API (see the module docstring).

    Subclasses set `name`, `version`, `api_key_env`, `default_base_url` and, when the service
    does not take `Authorization: Bearer <key>`, `auth_scheme` (`Token` for mem0); they list
    their own options in `adapter_options` ({name: default}) and the transport-only ones among
    them in `adapter_transport_options`.
    """

    api_key_env: ClassVar[str] = ""
    auth_header: ClassVar[str] = "Authorization"
    auth_scheme: ClassVar[str] = "Bearer"  # the header is "<scheme> <key>"; "" for the bare key
    default_base_url: ClassVar[str] = ""
    adapter_options: ClassVar[dict[str, Any]] = {}
    adapter_transport_options: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, env: ProviderEnv, **options: Any) -> None:
        refused = sorted(set(options) & _REFUSED_OPTIONS)
        if refused:
            raise ValueError(
                f"{self.name}: option {refused[0]!r} is refused: the API key is read only from "
                f"the environment variable {self.api_key_env}"
            )
        known = {"base_url", *TRANSPORT_OPTIONS, *self.adapter_options}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(
                f"{self.name}: unknown option(s) {', '.join(unknown)}; known: "
                f"{', '.join(sorted(known))}"
            )
        super().__init__(env, **options)
        install_log_redaction()
        self.base_url = self._check_base_url(options.get("base_url") or self.default_base_url)
        timeout = options.get("timeout_s") or env.timeout_s or DEFAULT_TIMEOUT_S
        self.timeout_s = float(timeout)
        self.max_attempts = int(options.get("max_attempts", 5))
        self.backoff_s = float(options.get("backoff_s", 0.5))
        self.max_backoff_s = float(options.get("max_backoff_s", 30.0))
        self.max_retry_after_s = float(options.get("max_retry_after_s", 120.0))
        if self.timeout_s <= 0 or self.max_attempts < 1 or self.backoff_s < 0:
            raise ValueError(
                f"{self.name}: timeout_s must be > 0, max_attempts >= 1 and backoff_s >= 0"
            )
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        if _is_loopback(urllib.parse.urlsplit(self.base_url).hostname):
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)
        self._key: str | None = None
        self._key_lock = threading.Lock()
        self._random = random.Random()

    # ------------------------------------------------------------------ configuration

    def _check_base_url(self, url: str) -> str:
        parts = urllib.parse.urlsplit(str(url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{self.name}: base_url must be an http(s) URL, got {url!r}")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError(
                f"{self.name}: base_url takes no credentials, query or fragment (the API key "
                f"comes from {self.api_key_env})"
            )
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")).rstrip("/")

    def option(self, name: str) -> Any:
        """An adapter option's value (its default when not given)."""
        return self.options.get(name, self.adapter_options[name])

    def memory_options(self) -> dict[str, Any]:
        """The adapter options that shape the memory, with defaults filled in (pinned)."""
        skip = TRANSPORT_OPTIONS | self.adapter_transport_options
        return {k: self.option(k) for k in sorted(self.adapter_options) if k not in skip}

    def pins(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "base_url": self.base_url,
            "options": self.memory_options(),
        }

    def _api_key(self) -> str:
        with self._key_lock:
            if self._key is None:
                try:
                    self._key = read_api_key(self.api_key_env)
                except LLMConfigError:
                    raise ProviderUnavailable(
                        f"{self.name}: environment variable {self.api_key_env} is not set; "
                        "API keys are read only from the environment"
                    ) from None
            return self._key or ""

    def _headers(self, has_body: bool) -> dict[str, str]:
        key = self._api_key()
        headers = {
            self.auth_header: f"{self.auth_scheme} {key}" if self.auth_scheme else key,
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        }
        if has_body:
            headers["Content-Type"] = "application/json"
        return headers

    # ------------------------------------------------------------------ requests

    def url(self, path: str, params: dict[str, Any] | None = None) -> str:
        query = urllib.parse.urlencode({k: v for k, v in (params or {}).items() if v is not None})
        return self.base_url + path + (f"?{query}" if query else "")

    def request(
        self,
        operation: str,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        idempotent: bool = True,
    ) -> Any:
        """Send one request (retried as the module docstring says); the decoded JSON answer,
        None for an empty body. `operation` names the provider operation in errors."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        url = self.url(path, params)
        where = f"{self.name} {operation} ({method} {path})"
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._attempt(where, method, url, data, idempotent)
            except _Retryable as failure:
                if attempt >= self.max_attempts:
                    raise ProviderUnavailable(
                        f"{where}: {failure.what}; gave up after {attempt} attempt(s)"
                    ) from None
                delay = self._backoff(attempt)
                if failure.retry_after is not None:
                    if failure.retry_after > self.max_retry_after_s:
                        raise ProviderUnavailable(
                            f"{where}: {failure.what}; the service asks to wait "
                            f"{failure.retry_after:.0f} s, more than max_retry_after_s="
                            f"{self.max_retry_after_s:g}"
                        ) from None
                    delay = max(delay, failure.retry_after)
                self.env.log.warning(
                    "%s: %s; attempt %d of %d, retrying in %.2f s",
                    where,
                    failure.what,
                    attempt,
                    self.max_attempts,
                    delay,
                )
                time.sleep(delay)

    def _backoff(self, attempt: int) -> float:
        base = min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))
        return base * (1.0 + 0.1 * self._random.random())

    def _attempt(
        self, where: str, method: str, url: str, data: bytes | None, idempotent: bool
    ) -> Any:
        req = urllib.request.Request(
            url, data=data, headers=self._headers(data is not None), method=method
        )
        try:
            with self._opener.open(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
                status = resp.status
        except urllib.error.HTTPError as exc:
            self._fail_status(where, exc)
        except urllib.error.URLError as exc:
            # Raised while connecting or sending: the service has not got the request.
            raise _Retryable(f"connection failed ({one_line(str(exc.reason))})") from None
        except (OSError, http.client.HTTPException) as exc:
            # After the request was sent: a timeout waiting for the answer, a reset connection.
            what = (
                f"no answer within {self.timeout_s:g} s"
                if isinstance(exc, TimeoutError)
                else f"connection lost ({one_line(type(exc).__name__ + ': ' + str(exc))})"
            )
            if idempotent:
                raise _Retryable(what) from None
            raise ProviderUnavailable(
                f"{where}: {what}; not sent again (it may have been applied)"
            ) from None
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise ProviderUnavailable(
                f"{where}: HTTP {status} with a body that is not JSON: "
                f"{one_line(raw.decode('utf-8', 'replace'))}"
            ) from None

    def _fail_status(self, where: str, exc: urllib.error.HTTPError) -> None:
        status = exc.code
        try:
            body = exc.read(64 * 1024).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException):
            body = ""
        finally:
            exc.close()
        reason = one_line(str(exc.reason or http.client.responses.get(status, "")), 60)
        what = f"HTTP {status} {reason}".rstrip()
        if status == 429 or status >= 500:
            retry_after = parse_retry_after(exc.headers.get("Retry-After")) if exc.headers else None
            detail = f": {one_line(body)}" if body.strip() else ""
            raise _Retryable(what + detail, retry_after=retry_after) from None
        snippet = one_line(body) if body.strip() else "(empty body)"
        raise HttpStatusError(f"{where}: {what}: {snippet}", status) from None
