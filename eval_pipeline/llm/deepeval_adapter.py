"""deepeval's model interface on top of our LLM layer, so metric calls are cached and counted.

    from eval_pipeline.llm.deepeval_adapter import LayerDeepEvalModel
    judge = layer.role("judge")
    if judge.is_offline: ...                      # report "unscored: no judge"
    metric = ContextualRecallMetric(model=LayerDeepEvalModel(judge), async_mode=True)

Importing this module hardens deepeval's environment first (its settings are read at import)
and refuses to continue when a Confident AI key is configured.
"""

from __future__ import annotations

from eval_pipeline.llm.deepeval_env import ensure_no_confident_upload, import_deepeval

ensure_no_confident_upload()
import_deepeval()  # hardened first, and without deepeval's notice on stdout

from typing import Any  # noqa: E402

from deepeval.models import DeepEvalBaseLLM  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from eval_pipeline.llm.errors import OfflineRoleError  # noqa: E402
from eval_pipeline.llm.layer import RoleClient  # noqa: E402


class LayerDeepEvalModel(DeepEvalBaseLLM):
    """A DeepEvalBaseLLM whose generate/a_generate go through one role of the layer.

    With a `schema` (deepeval passes its pydantic verdict/reason models), the answer is the
    validated instance, so deepeval skips its own lenient JSON parsing; without one, the text.
    Failures surface as LLMCallFailed, which deepeval records as the metric's error (score
    None) rather than a made-up score.
    """

    def __init__(self, client: RoleClient) -> None:
        if client.is_offline:
            raise OfflineRoleError(
                f"role {client.name!r} is offline: there is no judge model; report the "
                "judged metrics as unscored"
            )
        ensure_no_confident_upload()  # the environment may have changed since import
        self._client = client
        super().__init__(model=client.config.model)

    def __repr__(self) -> str:
        return f"LayerDeepEvalModel(role={self._client.name!r}, spec={self._client.config.spec!r})"

    def load_model(self, *args: Any, **kwargs: Any) -> RoleClient:
        return self._client

    def generate(
        self, prompt: str, schema: type[BaseModel] | None = None, **kwargs: Any
    ) -> str | BaseModel:
        completion = self._client.complete_sync(_text_prompt(prompt), schema=schema)
        return completion.parsed if schema is not None else completion.text

    async def a_generate(
        self, prompt: str, schema: type[BaseModel] | None = None, **kwargs: Any
    ) -> str | BaseModel:
        completion = await self._client.complete(_text_prompt(prompt), schema=schema)
        return completion.parsed if schema is not None else completion.text

    def get_model_name(self, *args: Any, **kwargs: Any) -> str:
        return self._client.config.spec

    # Capabilities deepeval asks about before choosing a code path.
    def supports_structured_outputs(self) -> bool:
        return True

    def supports_json_mode(self) -> bool:
        return True

    def supports_log_probs(self) -> bool:
        return False

    def supports_multimodal(self) -> bool:
        return False

    def supports_audio(self) -> bool:
        return False

    def supports_temperature(self) -> bool:
        return self._client.config.temperature is not None


def _text_prompt(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    raise TypeError(
        f"LayerDeepEvalModel handles text prompts only, got {type(prompt).__name__}; "
        "multimodal metrics are not supported by the LLM layer"
    )
