"""Plug-ins of each kind the registry tests load by entry point, by EVAL_PIPELINE_PLUGINS and by
import path, as a user's own would be: a provider answering from a table, one that needs a key,
one that fails on purpose, a judge that asks only the LongMemEval yes/no question, and classes
of the wrong kind or with a bad declaration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from eval_pipeline.llm import RoleClient, RoleConfig
from eval_pipeline.llm.messages import ChatMessage, ProviderReply
from eval_pipeline.llm.provider_plugins import ProviderCallError
from eval_pipeline.score.gate import MetricResult
from eval_pipeline.score.judges import longmemeval_judge

# model name → (substring of the last user message → reply); the first match wins.
TABLES: dict[str, dict[str, str]] = {
    "colours": {
        "response: It was blue": '{"verdict": "yes", "reason": "the same colour"}',
        "response: ": '{"verdict": "no", "reason": "another colour"}',
        "sky": "The sky is blue.",
    },
}


class TableProvider:
    """Answers from TABLES[model]: no network, no key."""

    plugin_kind = "provider"
    version = "1"
    sent: list[list[ChatMessage]] = []  # every request, for the tests to look at

    def __init__(self, config: RoleConfig, api_key: str | None) -> None:
        self.config = config
        self.api_key = api_key
        self.table = TABLES.get(config.model or "", {})

    async def send(
        self,
        messages: list[ChatMessage],
        *,
        schema: type[BaseModel] | None,
        timeout_s: float,
        mode: str | None = None,
    ) -> ProviderReply:
        type(self).sent.append(list(messages))
        last = next(m.content for m in reversed(messages) if m.role == "user")
        text = next((reply for key, reply in self.table.items() if key in last), "no idea")
        return ProviderReply(
            text=text, input_tokens=len(last.split()), output_tokens=len(text.split()), model="t"
        )

    async def aclose(self) -> None:
        return None


class KeyedTableProvider(TableProvider):
    """Needs a key from TABLE_TEST_KEY, and (badly) echoes it back, in replies and errors."""

    key_env = "TABLE_TEST_KEY"
    structured_output = "json_object"

    async def send(self, messages: list[ChatMessage], **kwargs: Any) -> ProviderReply:
        last = messages[-1].content
        if "fail" in last:
            raise ProviderCallError(f"denied for key {self.api_key}", kind="client_error")
        return ProviderReply(text=f"my key is {self.api_key}")


class FlakyProvider(TableProvider):
    """Rate-limited on the first request of every prompt, then answers from the table."""

    seen: set[str] = set()

    async def send(self, messages: list[ChatMessage], **kwargs: Any) -> ProviderReply:
        last = messages[-1].content
        if last not in type(self).seen:
            type(self).seen.add(last)
            raise ProviderCallError("slow down", kind="rate_limited", retry_after_s=0.0)
        return await super().send(messages, **kwargs)


class VerdictOnlyJudge:
    """An answer judge that takes only LongMemEval's yes/no verdict (no deepeval metrics)."""

    plugin_kind = "judge"
    name = "verdict-only"

    def __init__(self, gating: bool = True) -> None:
        self.gating = gating

    async def judge_question(
        self,
        role: RoleClient,
        golden: Mapping[str, Any],
        retrieval_context: list[str],
        answer: str | None,
    ) -> dict[str, MetricResult]:
        result = await longmemeval_judge(role, golden, answer)
        return {"answer_judge": result.model_copy(update={"gating": self.gating})}

    def unscored(self, abstention: bool, reason: str = "unscored: no judge") -> dict:
        return {"answer_judge": MetricResult.unscored(reason)}

    def prompt_hash(self) -> str:
        return "verdict-only-1"

    def pins(self) -> dict[str, Any]:
        return {"name": self.name, "gating": self.gating}


class DeclaredRetriever:
    """Says it is a retriever: refused where a reconciler is expected, however it looks."""

    plugin_kind = "retriever"
    name = "declared"
    version = "1"

    def reconcile(self, session: Any) -> Any:  # pragma: no cover - never loaded as one
        raise NotImplementedError


class KeyInDeclaration(TableProvider):
    key_env = "sk-proj-DECLAREDKEY1234567890"  # a key where a variable's name belongs


class NotAMemorySystem:
    """Namespaced, but without extract/consolidate."""

    name = "half"
    version = "1"
    namespaced = True

    def reconcile(self, session: Any) -> Any:  # pragma: no cover - never loaded
        raise NotImplementedError
