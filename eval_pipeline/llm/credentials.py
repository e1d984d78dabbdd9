"""API keys: read only from the environment, and kept out of every text we produce.

`redact` blanks out (a) every value read through `read_api_key`, (b) the current value of any
environment variable whose name looks like a credential, and (c) key-shaped strings and auth
headers. It is applied to our exception messages and, through `install_log_redaction`, to every
log record of the process (provider SDKs and HTTP clients log too, under many logger names).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable
from typing import Any

from eval_pipeline.llm.errors import LLMConfigError

REDACTED = "[REDACTED]"
_MIN_SECRET_LEN = 8  # shorter values would redact ordinary words
_SECRET_ENV_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")

_known_secrets: set[str] = set()
_known_lock = threading.Lock()

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # OpenAI (sk-..., sk-proj-...) and Anthropic (sk-ant-...) key shapes.
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"), REDACTED),
    (re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=\-]{8,}"), r"\1" + REDACTED),
    (
        re.compile(
            r"(?i)((?:x-api-key|api[_-]?key|authorization)[\"']?\s*[:=]\s*[\"']?)"
            r"(?!\[REDACTED\])[^\"'\s,;}]{8,}"
        ),
        r"\1" + REDACTED,
    ),
)


def register_secret(value: str | None) -> None:
    """Remember a value that must never be shown (called for every key we read)."""
    if value and len(value) >= _MIN_SECRET_LEN:
        with _known_lock:
            _known_secrets.add(value)


def _secret_values() -> list[str]:
    values = set(_known_secrets)
    for name, value in os.environ.items():
        if name.upper().endswith(_SECRET_ENV_SUFFIXES) and len(value) >= _MIN_SECRET_LEN:
            values.add(value)
    # Longest first, so a key that contains another is blanked whole.
    return sorted(values, key=len, reverse=True)


def redact(text: object) -> str:
    """`text` as a string with every known secret and key-shaped token replaced."""
    result = str(text)
    for secret in _secret_values():
        if secret in result:
            result = result.replace(secret, REDACTED)
    for pattern, replacement in _PATTERNS:
        result = pattern.sub(replacement, result)
    return result


def read_api_key(env_name: str, *, required: bool = True) -> str | None:
    """The key in `env_name`, registered for redaction; a clear error (no value) if missing."""
    value = os.environ.get(env_name, "").strip()
    if not value:
        if required:
            raise LLMConfigError(
                f"environment variable {env_name} is not set; API keys are read only from the "
                "environment"
            )
        return None
    register_secret(value)
    return value


_factory_lock = threading.Lock()
_installed = False


def _redact_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed record is logging's problem, not ours
        return
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and not record.exc_text:
        # Formatters reuse exc_text when set, so the traceback is redacted once, here.
        record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


def install_log_redaction() -> None:
    """Redact secrets from every log record created in this process (idempotent).

    A record factory rather than a logger filter: filters do not reach child loggers, and the
    SDKs log under many module names (openai._base_client, httpx2, ...).
    """
    global _installed
    with _factory_lock:
        if _installed:
            return
        previous: Callable[..., logging.LogRecord] = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _redact_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True
