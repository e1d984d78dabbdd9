"""The one error of the plug-in registry, and its one message shape.

    <kind> <spec>: <what failed>; <what to do>

e.g. `reconciler 'magic': unknown name; use a built-in (none, extractive, ...)`. The message is
one line (exception texts quoted in it are folded onto it) and redacted: a plug-in's error may
quote its configuration, and no key may reach a log or a terminal through it.
"""

from __future__ import annotations

from typing import Any

DETAIL_MAX_CHARS = 300  # a quoted exception text beyond this is cut: the line stays readable


def one_line(text: object, limit: int | None = None) -> str:
    folded = " ".join(str(text).split())
    if limit is not None and len(folded) > limit:
        folded = folded[: limit - 1] + "…"
    return folded


def exception_text(exc: BaseException) -> str:
    """`Type: message`, on one line and cut to DETAIL_MAX_CHARS."""
    message = one_line(exc, DETAIL_MAX_CHARS)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class PluginLoadError(ValueError):
    """A plug-in spec that cannot be turned into a working plug-in of its kind.

    Each kind's consumers raise a subclass (`ReconcilerLoadError`, `RetrieverLoadError`,
    `JudgeLoadError`, `ProviderLoadError`), so `except` clauses written for one kind still work.
    """

    def __init__(self, kind: str, spec: str, problem: str, remedy: str) -> None:
        self.kind = kind
        self.spec = spec
        self.problem = problem
        self.remedy = remedy
        super().__init__(format_message(kind, spec, problem, remedy))

    def __reduce__(self) -> tuple[Any, ...]:  # the four parts, so it pickles across processes
        return (type(self), (self.kind, self.spec, self.problem, self.remedy))


def format_message(kind: str, spec: str, problem: str, remedy: str) -> str:
    from eval_pipeline.llm.credentials import redact  # lazy: the LLM package imports this one

    return redact(one_line(f"{kind} {spec!r}: {problem}; {remedy}"))
