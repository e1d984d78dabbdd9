"""Which verdict method decides a run's answer verdicts: the one asked for, else the default
for the judge given.

A judge model decides when one is given: a run with `--judge MODEL` and no `--judge-verdict`
follows LongMemEval's reference prompt (`reference`), so a user who pays for a model gets the
model's verdicts and a number that stands beside published ones. With no model the rules
(`match`) decide, since they are the one method that runs anywhere. A method asked for is
always the one used (an impossible one is refused where it is checked, as before).

`choose_verdict` is the one place this is decided: the build of the answer judge, preflight,
a judge panel's bare-MODEL member, `run --resume`'s option check and the manifest all ask it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from eval_pipeline.score.verdicts import DEFAULT_METHOD, REFERENCE_METHOD, method

MODEL_DEFAULT = REFERENCE_METHOD  # with a judge model: LongMemEval's prompt
OFFLINE_DEFAULT = DEFAULT_METHOD  # with none: the rules

# How each method is named in a line a user reads.
_NAMED = {
    "reference": "LongMemEval's prompt",
    "reasoned": "the model, reasoning first",
    "match": "the rules, no model",
    "hybrid": "the rules, the model for the rest",
    "cascade": "the rules, the model inside a band",
}


@dataclass(frozen=True)
class VerdictChoice:
    method: str
    chosen: Literal["asked", "default"]  # given as --judge-verdict, or the judge's default
    with_model: bool  # the default it is (or would be): with a judge model or without

    def describe(self) -> str:
        """`reference (LongMemEval's prompt; the default with a judge model)`."""
        why = (
            "asked for"
            if self.chosen == "asked"
            else f"the default {'with a judge model' if self.with_model else 'with no judge model'}"
        )
        named = _NAMED.get(self.method)
        return f"{self.method} ({named}; {why})" if named else f"{self.method} ({why})"

    def record(self) -> dict[str, Any]:
        """What the manifest and summary say of it (`runs.records`' `VerdictChoicePin`)."""
        return {"method": self.method, "chosen": self.chosen, "text": self.describe()}


def choose_verdict(asked: str | None, *, with_model: bool) -> VerdictChoice:
    """The method that decides: `asked` (the option; None: not given) when given, else
    `reference` with a judge model and `match` without. An unknown name raises MethodError."""
    if asked is not None:
        return VerdictChoice(method(asked).name, "asked", with_model)
    return VerdictChoice(MODEL_DEFAULT if with_model else OFFLINE_DEFAULT, "default", with_model)
