"""Exceptions of the LLM layer: one base class callers can catch, a few they may tell apart.

Every message is built from redacted text and raised without chaining the provider SDK's
exception (`from None`), because SDK errors can echo request headers, and with them a key.
"""

from __future__ import annotations


class LLMError(Exception):
    """Base of everything the LLM layer raises on purpose."""


class LLMConfigError(LLMError, ValueError):
    """A role or provider spec is wrong, or the key it names is missing from the environment."""


class OfflineRoleError(LLMError):
    """A call was made on a role configured `offline`.

    Offline means "no model": the caller must use its offline implementation or report the
    item as unscored. The layer never makes up an answer.
    """


class ConfidentUploadRefused(LLMError, RuntimeError):
    """A Confident AI key is configured, so deepeval would upload results; we refuse to start."""


class LLMCallFailed(LLMError):
    """A call ended without a usable answer; the failure is already counted for its role.

    `kind` is one of: rate_limited, server_error, timeout, connection, client_error,
    invalid_output.
    """

    def __init__(self, message: str, *, role: str, kind: str, attempts: int) -> None:
        super().__init__(message)
        self.role = role
        self.kind = kind
        self.attempts = attempts


class StructuredOutputInvalid(LLMCallFailed):
    """The reply did not validate against the requested schema, even after one repair."""


class LLMCacheError(LLMError):
    """The response cache file cannot be read or written (corrupt, not SQLite, locked, unwritable).

    An infrastructure failure, never the system under test's: the question it stops is
    unscored, not a miss. `path` is the cache file; the message says what to do with it.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path
