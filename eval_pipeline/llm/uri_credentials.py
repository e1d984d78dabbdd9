"""Credentials where options are: in a URI, a model name, a label.

Options are recorded (Dagster's run storage keeps a run's whole configuration, bundles pin
model names and base URLs), so a secret in one is refused before anything launches; it is
never redacted afterwards. What counts as a secret is decided by value (any form of a known
key, `secret_forms`) and by shape (a key shape, or a long random run of letters and digits),
so a token nobody put in the environment is refused too. Refusals name the part of the URI,
never its value: `mask_uri` is what an error message may show.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlsplit

from eval_pipeline.llm.credentials import redact_counted
from eval_pipeline.llm.secret_forms import looks_random

# Query parameters and the like that name a credential ("?password=", "&api_key=", "?sig=").
_CREDENTIAL_NAME = re.compile(
    r"(?i)^(?:pass|passwd|password|pwd|secret|token|auth|authorization|credentials?|sig|"
    r"signature|key|apikey|.*(?:[_-]key|[_-]token|[_-]secret|[_-]password))$"
)
# No separator in 32 characters: not a name. Lower-case hex is left out: that is an id or a
# digest (a gateway's account id in its URL path, a pinned revision), rarely a key.
_LONG_RUN = re.compile(r"[A-Za-z0-9]{32,}")
_HEX = re.compile(r"[0-9a-f]+")


def looks_secret_value(text: str) -> bool:
    """`text` holds a known secret (in any form) or a key shape."""
    return redact_counted(text)[1] > 0


def looks_secret(text: str) -> bool:
    """`looks_secret_value`, or a long random run of letters and digits: what no part of a
    URI or a model name is (a run-anywhere option, a pinned revision, may be one)."""
    return looks_secret_value(text) or any(
        looks_random(run) and not _HEX.fullmatch(run) for run in _LONG_RUN.findall(text)
    )


def uri_credential(uri: str) -> str | None:
    """The part of `uri` that carries a credential ("user:password@", "its query", "its
    path", ...), or None."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname or ""
    except ValueError:
        return "the address (it cannot be parsed)" if looks_secret(uri) else None
    if parts.username is not None or parts.password is not None:
        return "user:password@"
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if looks_secret(name):
            return "its query"
        if _CREDENTIAL_NAME.match(name) or looks_secret(value):
            return f"its query (parameter {name!r})"
    if parts.fragment and looks_secret(unquote(parts.fragment)):
        return "its fragment"
    if any(looks_secret(unquote(seg)) for seg in parts.path.split("/") if seg):
        return "its path"
    if looks_secret_value(host):  # a long random host name is a cloud instance's, not a key
        return "its host name"
    return None


def mask_uri(uri: str) -> str:
    """`uri` as an error may show it: scheme, host and port only, the rest elided."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname or "?"
        port = parts.port
    except ValueError:
        return "<an unreadable address>"
    if looks_secret_value(host):
        host = "***"
    shown = f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
    rest = (parts.path not in ("", "/")) or parts.query or parts.fragment or parts.username
    return shown + ("/…" if rest else "")
