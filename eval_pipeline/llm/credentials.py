"""API keys: read only from the environment, and kept out of every text we produce.

`redact` blanks out (a) every value read through `read_api_key` and (b) the current value of
any environment variable whose name looks like a credential — in every form an echo may give
it: whole, cut into runs, reversed, base64, with invisible characters interleaved or written
as escapes (`secret_forms`) — and (c) key-shaped strings and auth headers, even when the value
is unknown. It is the one redaction of the project: log records, error messages, model replies
(before anything caches or reads them) and every file we publish (`eval_pipeline.atomic`, the
one writer of artifacts, bundles and reports) all go through it. Log records get it through
`install_log_redaction` (provider SDKs and HTTP clients log too, under many logger names).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval_pipeline.llm.errors import LLMConfigError
from eval_pipeline.llm.secret_forms import blank, merge, shape_spans, value_spans

REDACTED = "[REDACTED]"
_MIN_SECRET_LEN = 8  # shorter values would redact ordinary words
_SECRET_ENV_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")

_known_secrets: set[str] = set()
_known_lock = threading.Lock()


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


def redact_counted(text: object, *, shapes: bool = True) -> tuple[str, int]:
    """`redact`, and how many secrets (or parts of them) it blanked out. `shapes=False`
    blanks known values only (in every form, `secret_forms`), not key-shaped tokens: for data
    a user wrote (a conversation may say "sk-something-long"), where only a real secret must
    go."""
    text = str(text)
    # Every span found in the text as given, then blanked at once: blanking one secret first
    # could cut a key shape (or another secret) so that it no longer matches.
    spans = [span for secret in _secret_values() for span in value_spans(text, secret)]
    if shapes:
        spans += shape_spans(text)
    spans = merge(spans)
    return blank(text, spans, REDACTED), len(spans)


PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def _redact_json_value(value: Any) -> tuple[Any, int]:
    """Redact inside the strings of a JSON value (keys too); numbers and structure untouched,
    so the file stays valid JSON whatever a secret happens to look like."""
    if isinstance(value, str):
        return redact_counted(value, shapes=False)
    if isinstance(value, list):
        hits = 0
        out = []
        for item in value:
            clean, n = _redact_json_value(item)
            out.append(clean)
            hits += n
        return out, hits
    if isinstance(value, dict):
        hits = 0
        result = {}
        for key, item in value.items():
            clean_key, n = redact_counted(key, shapes=False)
            clean_item, m = _redact_json_value(item)
            result[clean_key] = clean_item
            hits += n + m
        return result, hits
    return value, 0


def _redact_line(line: str, *, jsonl: bool) -> tuple[str, int]:
    if jsonl and line.strip():
        try:
            value = json.loads(line)
        except ValueError:
            return redact_counted(line, shapes=False)
        clean, hits = _redact_json_value(value)
        if not hits:
            return line, 0
        ending = "\n" if line.endswith("\n") else ""
        return json.dumps(clean, ensure_ascii=False, separators=(", ", ": ")) + ending, hits
    return redact_counted(line, shapes=False)


def redact_file(path: Path) -> int:
    """Blank every known secret value (and its long runs) out of a text file the pipeline
    wrote and make it private. JSON and JSONL files are redacted inside their strings only, so
    they stay valid; other files line by line (a 200 MB fixtures file never sits in memory
    whole). The file is rewritten only when there is something to redact; returns the count."""
    path = Path(path)
    hits = 0
    if _secret_values():
        with path.open(encoding="utf-8", errors="surrogateescape") as fh:
            dirty = any(redact_counted(line, shapes=False)[1] for line in fh)
        if dirty and path.suffix == ".json":
            try:
                value = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                value = None
            if value is not None:
                clean, hits = _redact_json_value(value)
                path.write_text(json.dumps(clean, ensure_ascii=False, indent=2) + "\n", "utf-8")
                dirty = False
        if dirty:
            jsonl = path.suffix == ".jsonl"
            tmp = path.with_name(path.name + ".redacting")
            with (
                path.open(encoding="utf-8", errors="surrogateescape") as src,
                tmp.open("w", encoding="utf-8", errors="surrogateescape", newline="") as dst,
            ):
                for line in src:
                    clean, n = _redact_line(line, jsonl=jsonl)
                    hits += n
                    dst.write(clean)
            os.replace(tmp, path)
    os.chmod(path, PRIVATE_FILE)
    return hits


def redact_tree(root: Path) -> int:
    """`redact_file` on every file under `root` (directories made private too)."""
    root = Path(root)
    hits = 0
    for dirpath, _, files in os.walk(root):
        os.chmod(dirpath, PRIVATE_DIR)
        for name in files:
            hits += redact_file(Path(dirpath) / name)
    return hits


def redact(text: object) -> str:
    """`text` as a string with every known secret, in any of its forms, and every key-shaped
    token replaced."""
    return redact_counted(text)[0]


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
