"""Protocol refusals of a comparison: what `compare` refuses beyond the comparability pins.

1. A run whose manifest records a failed protocol check that fails the run or makes it not
   comparable (`score.protocol`) is compared with nothing: the refusal names the check and
   says why, in one line.
2. Two runs that retrieved under different budgets (memorybench#64): evidence recall@k and
   the reader's answers depend on how much was handed on, so a comparison of another k, or
   of another reader output budget or context cap (when both retrievers have one), is
   refused. top_k stays a configuration
   pin as well (what calibration repeats share, and the noise floor's key); the gate's k is
   the comparability pin `gate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eval_pipeline.runs.load import RunBundle
from eval_pipeline.runs.pins import PinDifference
from eval_pipeline.score.protocol import refusals


@dataclass(frozen=True)
class ProtocolRefusal(PinDifference):
    """A run that failed a protocol check: one line saying which, and why."""

    reason: str = ""

    def describe(self, left_label: str = "base", right_label: str = "candidate") -> str:
        return self.reason


def protocol_refusals(base: RunBundle, candidate: RunBundle) -> list[PinDifference]:
    out: list[PinDifference] = []
    for label, run in (("base", base), ("candidate", candidate)):
        for name, status in refusals(run.manifest.get("protocol")):
            effect = status.effect.replace("_", " ")
            out.append(
                ProtocolRefusal(
                    f"protocol.{name}",
                    status.status if run is base else None,
                    status.status if run is candidate else None,
                    reason=f"protocol.{name}: the {label} {run.name} failed it ({effect}): "
                    f"{status.detail}",
                )
            )
    return out


def budget_of(run: RunBundle) -> dict[str, Any]:
    """What a run's retrieval handed on at most: k items, the reader's output budget (None
    for a reader without a model), and the retriever's context cap (None: none)."""
    pins = run.pins if isinstance(run.pins, dict) else {}
    reader = (pins.get("llm_roles") or {}).get("reader") or {}
    retriever = pins.get("retriever") or {}
    return {
        "budget.top_k": pins.get("top_k"),
        "budget.reader_max_tokens": reader.get("max_tokens") if reader else None,
        "budget.context_cap_tokens": retriever.get("payload_cap_tokens"),
    }


# A context cap is compared only when both retrievers have one: a retriever without a cap
# (fulltext) against one with a cap (graph_agent) is a change of retriever, and both hand
# on at most k items.
_BOTH_OR_NONE = ("budget.context_cap_tokens",)


def budget_differences(base: RunBundle, candidate: RunBundle) -> list[PinDifference]:
    left, right = budget_of(base), budget_of(candidate)
    return [
        PinDifference(k, left[k], right[k])
        for k in left
        if left[k] != right[k]
        and not (k in _BOTH_OR_NONE and (left[k] is None or right[k] is None))
    ]
