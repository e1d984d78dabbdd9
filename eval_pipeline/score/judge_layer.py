"""The judge role as scoring builds it: its LLM settings, its layer and its pins.

One builder for every caller that judges as scoring judges: the scoring stage, and
`judge-check` (which must share its cached verdicts, so the same settings, cache and sample
identity). `llm_roles` is the per-role JSON the chain's resources carry (`--judge-timeout`
etc., `llm.config.parse_role_settings`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval_pipeline.llm import LLMLayer, LLMSettings
from eval_pipeline.llm.config import parse_role_settings

OFFLINE = "offline"


def judge_settings(
    judge: str,
    llm_roles: str = "{}",
    *,
    cache_path: str | Path | None = None,
    sample_identity: str | None = None,
) -> LLMSettings | None:
    """The settings of a layer whose `judge` role is `judge`; None when it is offline."""
    if judge == OFFLINE:
        return None
    extra: dict[str, Any] = {}
    if cache_path:
        extra["cache_path"] = Path(cache_path)
    if sample_identity:
        extra["sample_identity"] = sample_identity
    overrides = parse_role_settings(llm_roles)
    return LLMSettings.from_specs({"judge": judge}, role_overrides=overrides, **extra)


def judge_layer(
    judge: str,
    llm_roles: str = "{}",
    *,
    cache_path: str | Path | None = None,
    sample_identity: str | None = None,
) -> LLMLayer | None:
    """The layer scoring judges with; None when the judge is offline. The caller closes it."""
    settings = judge_settings(
        judge, llm_roles, cache_path=cache_path, sample_identity=sample_identity
    )
    return None if settings is None else LLMLayer(settings)


def judge_role_pins(judge: str, llm_roles: str = "{}") -> dict[str, Any] | None:
    """The judge role's pins for a run manifest (`RoleConfig.pins`); None when offline."""
    settings = judge_settings(judge, llm_roles)
    return None if settings is None else settings.role("judge").pins()
