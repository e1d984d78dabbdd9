"""Whether each model role a run names can work, checked before anything runs.

Each role on its own, so the refusal names the option it came from: its spec parses, its
model name is not a key, its provider's key is in the environment, and a `local` role's
server and weights are there. No model is called. `preflight` and `judge-check` both use it.
"""

from __future__ import annotations

from collections.abc import Mapping

from eval_pipeline.llm.config import LLMSettings, safe_spec
from eval_pipeline.llm.errors import LLMError
from eval_pipeline.llm.layer import LLMLayer
from eval_pipeline.llm.local_models import resolve
from eval_pipeline.llm.local_server import check_installed

# The option that names each role, as a run's command line spells it.
ROLE_OPTIONS: dict[str, str] = {
    "--reader": "reader",
    "--retrieval-agent": "retrieval_agent",
    "--judge": "judge",
    "--reconciler-model": "reconciler",
}


class ModelRoleError(ValueError):
    """A model role that cannot work; one line, naming the option and the (redacted) spec."""


def check_model_roles(specs: Mapping[str, str]) -> None:
    """`specs` by option (`ROLE_OPTIONS`); `offline` (or nothing) is always fine."""
    for option, spec in specs.items():
        if (spec or "offline").strip() == "offline":
            continue
        role = ROLE_OPTIONS[option]
        try:
            settings = LLMSettings.from_specs({role: spec})
            LLMLayer(settings).close()
            config = settings.role(role)
            if config.provider == "local":
                check_local_role(config.model)
        except (LLMError, ValueError) as exc:
            raise ModelRoleError(f"{option} {safe_spec(spec)}: {_one_line(exc)}") from None


def check_local_role(model: str | None) -> None:
    """A `local` role can start: llama-cpp-python is installed and the weights are there
    (hashed, so a corrupt catalogue file is refused now, not after the graph was built)."""
    check_installed()
    resolve(model)


def _one_line(exc: BaseException) -> str:
    return " ".join((str(exc) or type(exc).__name__).split())
