"""Which manifest pins make two runs comparable, and how to name every one that differs.

Comparability pins fix *what was measured and how it was scored*: the corpus file and sample,
the question set, the retrieval scope, the reader, the judge and its prompt, the tokenizer
and the coverage gate. Two runs that differ in any of them measure different things, so a
comparison is refused, not warned about.

Dataset errata are one only in exclude mode (the questions they left out); flags change
nothing measured, so the errata version is shown as a change.

Deliberately NOT comparability pins: the reconciler, the retriever (and its top_k), the graph
backend and the code version. Those are what a team changes between runs; a comparison
exists to judge exactly such a change. Calibration repeats one configuration, so it also
requires the configuration pins to be equal.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipeline.corpus.batches import partitioning_pin
from eval_pipeline.runs.load import RunBundle


def _at(*keys: str) -> Callable[[RunBundle], Any]:
    def get(run: RunBundle) -> Any:
        value: Any = run.pins
        for key in keys:
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value

    return get


def partitioning(run: RunBundle) -> Any:
    """How the questions were split across graph instances; a bundle from before batches
    existed ran them all on one instance, as a run of one batch does."""
    value = run.pins.get("partitioning") if isinstance(run.pins, dict) else None
    return value if value is not None else partitioning_pin(1)


def question_set(run: RunBundle) -> list[str]:
    return sorted(r.question_id for r in run.rows)


def errata_excluded(run: RunBundle) -> list[str] | None:
    """The questions `--errata exclude` left out of the sample; None when none were (flag
    mode, or nothing applied): flags change nothing measured, exclusion changes the set."""
    errata = _at("errata")(run)
    excluded = errata.get("excluded") if isinstance(errata, dict) else None
    return sorted(excluded) if excluded else None


def errata_version(run: RunBundle) -> list[str] | None:
    """Which errata a run applied (version and the digest of the file), for "what changed"."""
    errata = _at("errata")(run)
    if not isinstance(errata, dict) or not errata.get("applied"):
        return None
    return [str(errata.get("version")), str(errata.get("sha256"))]


@dataclass(frozen=True)
class Pin:
    name: str
    get: Callable[[RunBundle], Any]


COMPARABILITY_PINS: tuple[Pin, ...] = (
    Pin("corpus.revision", _at("corpus", "upstream", "revision")),
    Pin("corpus.sha256", _at("corpus", "upstream", "sha256")),
    Pin("corpus.variant", _at("corpus", "upstream", "variant")),
    Pin("corpus.sample_spec", _at("corpus", "sample_spec")),
    Pin("corpus.subsampled", _at("corpus", "subsampled")),
    Pin("corpus.tiers", _at("corpus", "tiers")),
    Pin("corpus.tier2_digest", _at("corpus", "tier2_digest")),
    # Canaries are scored apart, but their sessions share the graph: a retriever ranking by
    # corpus-wide statistics (BM25) ranks a haystack among 16 more turns (None: none planted).
    Pin("corpus.canaries", _at("corpus", "canaries", "sha256")),
    Pin("question_set", question_set),
    Pin("scope", _at("scope")),
    Pin("judge.model", _at("judge", "model")),
    Pin("judge.prompt_hash", _at("judge", "prompt_hash")),
    Pin("judge.criteria_prompt_hash", _at("judge", "criteria_prompt_hash")),
    # Tier 2's invariant judge (its score is in every tier-2 row). Its agreement check
    # (`judge.agreement`) is deliberately not a pin: a check made between runs changes nothing
    # that was measured; compare shows it and warns instead.
    Pin("judge.invariant_prompt_hash", _at("judge", "invariant_prompt_hash")),
    # A local judge's identity is its weights, not the spec `local` (None for other judges).
    Pin("judge.weights_sha256", _at("judge", "role", "weights", "sha256")),
    # The embedding model of a dense or hybrid retriever, by its weights' sha256 (None for a
    # retriever without one). Compared only when both runs embed (`ONLY_WHEN_BOTH`): fulltext
    # against dense is the retriever change a comparison exists to judge.
    Pin("retriever.embedder.sha256", _at("retriever", "embedder", "sha256")),
    Pin("tokenizer", _at("tokenizer")),
    Pin("reader", _at("reader")),
    # What the reader answers from a context: its rules' version and its prompt (a run from
    # before this pin reads None, and its reader was another one).
    Pin("reader.prompt", _at("reader_prompt")),
    # How sessions became graph data (the injection schema every memory system builds on):
    # another one is another haystack. The memory system's own schema is a change, below.
    Pin("graph.schema_version", _at("graph", "schema_version")),
    # The gate defines "covered": coverage under recall_all@5 is not coverage under @10.
    Pin("gate", _at("gate")),
    # K batches on K instances: a batch-scoped retrieval (or a memory system that consolidates
    # across namespaces) sees only its batch's sessions, so another K is another haystack.
    Pin("partitioning", partitioning),
    # Dataset errata in exclude mode leave questions out: another exclusion, another set.
    # In flag mode they only mark rows, so another errata version is a change, not a refusal.
    Pin("errata.excluded", errata_excluded),
)


# Repeats that reconcile afresh (`--repeat-reconcile`) differ in these by design: the repeat's
# sample identity (pinned under `repeat`) and the digest of the pins that include it.
_PER_REPEAT = ("sample_identity", "pins_key")


def reconciler(run: RunBundle) -> Any:
    """The reconciler's pins as configuration: without what differs per repeat."""
    value = _at("reconciler")(run)
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in _PER_REPEAT}
    return value


# Repeats for calibration must be one configuration, not just comparable runs.
CONFIGURATION_PINS: tuple[Pin, ...] = (
    Pin("reconciler", reconciler),
    Pin("retriever", _at("retriever")),
    Pin("top_k", _at("top_k")),
    Pin("graph.backend", _at("graph", "backend")),
)

# Shown in a comparison as "what changed"; never a reason to refuse.
CHANGE_PINS: tuple[Pin, ...] = (
    *CONFIGURATION_PINS,
    # The memory system's ingest schema (name, version, digest), part of the reconciler pins.
    Pin("memory.schema", _at("reconciler", "schema")),
    Pin("graph.server_version", _at("graph", "server_version")),
    Pin("code_version", _at("code_version")),
    Pin("errata.version", errata_version),
)


# Pins that differ only when both runs have a value: a retriever with no embedder is not
# another embedder.
ONLY_WHEN_BOTH: frozenset[str] = frozenset({"retriever.embedder.sha256"})


def _differs(name: str, left: Any, right: Any) -> bool:
    if name in ONLY_WHEN_BOTH and (left is None or right is None):
        return False
    return left != right


@dataclass(frozen=True)
class PinDifference:
    name: str
    left: Any
    right: Any

    def describe(self, left_label: str = "base", right_label: str = "candidate") -> str:
        if self.name == "question_set":
            only_left = sorted(set(self.left or []) - set(self.right or []))
            only_right = sorted(set(self.right or []) - set(self.left or []))
            return (
                f"question_set: {len(only_left)} question(s) only in {left_label}"
                f"{_examples(only_left)}, {len(only_right)} only in {right_label}"
                f"{_examples(only_right)}"
            )
        return f"{self.name}: {left_label} {_short(self.left)} ≠ {right_label} {_short(self.right)}"


def _examples(ids: list[str], limit: int = 5) -> str:
    if not ids:
        return ""
    more = f", … {len(ids) - limit} more" if len(ids) > limit else ""
    return " (" + ", ".join(ids[:limit]) + more + ")"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value) if not isinstance(value, dict | list) else _compact(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def pin_values(run: RunBundle, pins: Sequence[Pin] = COMPARABILITY_PINS) -> dict[str, Any]:
    return {pin.name: pin.get(run) for pin in pins}


def differing_values(
    left: dict[str, Any], right: dict[str, Any], names: Sequence[str] | None = None
) -> list[PinDifference]:
    """Every pin whose value differs, in pin order (a pin missing on one side differs too)."""
    names = list(names) if names is not None else list(dict.fromkeys([*left, *right]))
    return [
        PinDifference(name, left.get(name), right.get(name))
        for name in names
        if _differs(name, left.get(name), right.get(name))
    ]


def differing_pins(
    left: RunBundle, right: RunBundle, pins: Sequence[Pin] = COMPARABILITY_PINS
) -> list[PinDifference]:
    return differing_values(
        pin_values(left, pins), pin_values(right, pins), [pin.name for pin in pins]
    )
