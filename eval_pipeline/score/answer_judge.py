"""The answer-judge plug-in interface: golden + retrieval context + answer → judged metrics.

An answer judge is a class built as `cls(**options)` (kind `judge` of `eval_pipeline.plugins`):

    class MyJudge:
        name = "my-judge"
        async def judge_question(self, role: RoleClient, golden, retrieval_context, answer)
            -> dict[str, MetricResult]     # only called when the judge role has a model
        def unscored(self, abstention: bool, reason: str) -> dict[str, MetricResult]
            # the same metric names, unscored (no judge, nothing to judge): never 0
        def prompt_hash(self) -> str       # sha256 over its prompts: a comparability pin
        def pins(self) -> dict[str, Any]   # what decides its verdicts, for the manifest

`role` is the LLM layer's `judge` role: every call through it is cached, counted and redacted
like the built-in's. The metrics join the question's scored row; the `gating` ones decide
coverage (`score.gate`). A failed call must become an unscored metric carrying its error,
never a score. The built-in is `longmemeval` (`score.judges.LongMemEvalJudge`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from eval_pipeline import plugins
from eval_pipeline.plugins.errors import PluginLoadError

if TYPE_CHECKING:
    from eval_pipeline.llm import RoleClient
    from eval_pipeline.score.gate import MetricResult

KIND = "judge"
DEFAULT_JUDGE = "longmemeval"


class JudgeLoadError(PluginLoadError):
    """An answer-judge spec that cannot be turned into a judge (the registry's error)."""


@runtime_checkable
class AnswerJudge(Protocol):
    name: str

    async def judge_question(
        self,
        role: RoleClient,
        golden: Mapping[str, Any],
        retrieval_context: list[str],
        answer: str | None,
    ) -> dict[str, MetricResult]: ...

    def unscored(self, abstention: bool, reason: str) -> dict[str, MetricResult]: ...

    def prompt_hash(self) -> str: ...

    def pins(self) -> dict[str, Any]: ...


def load_judge(spec: str = DEFAULT_JUDGE, options: Mapping[str, Any] | None = None) -> AnswerJudge:
    """The answer judge `spec` names (built-in, registered name or import path), constructed
    with `options` as keyword arguments."""
    return plugins.load(KIND, spec, options=options)
