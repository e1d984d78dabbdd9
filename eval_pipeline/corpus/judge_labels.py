"""The judge's labelled set: its file format, loading and validation.

A label file is JSONL, one item per line (blank lines ignored). An item is a question, its
reference answer, a response to grade, and the verdict a judge that follows this project's
protocol (`eval_pipeline.score.judges`: TYPE_RULES, ABSTENTION_RULE) must give it:

    {"id": "t1-ssu-01", "tier": 1, "question_type": "single-session-user",
     "abstention": false, "question": "...", "reference": "...", "response": "...",
     "label": "yes", "why": "...", "hard_case": "baseline_correct"}

Only id, question, reference, response and label are required. tier, question_type,
abstention, why and hard_case may be left out (or null): a missing one is unknown, counted as
"unknown" in the composition and the agreement groups, and every rule that needs it is
skipped. A missing tier is inferred from a given question_type (any tier-1 or tier-2 type)
or, failing that, from a golden (tier 2). The judge is shown an unknown question type as
"unknown" (its default rule), an unknown abstention as false, an unknown tier as 1.

    optional, tier 2 only:
      "golden": "t2-<scenario>-q<n>[_abs]"  the tier-2 golden whose question and expected
                answer the item uses; the invariant judge (tier2/invariant_judge.py) is checked
                on these items, against that golden's signal events;
      "invariant_label": "yes" | "no", "invariant_why": "..."  the invariant judge's expected
                verdict where its protocol differs from the answer judge's (e.g. a correct
                answer among unsupported claims: a yes for "contains the answer", a no for
                "every claim is supported"); absent, `label` holds for both.

A bias-probe file (also JSONL) holds pairs: one question, two variants of one response that
differ only in the probed way, and the label both variants deserve:

    {"id": "probe-pad-01", "probe": "terse_vs_padded", "tier": 1,
     "question_type": "multi-session", "abstention": false, "question": "...",
     "reference": "...", "label": "yes", "why": "...",
     "a": {"response": "...", "order": "reference_first"},
     "b": {"response": "...", "order": "reference_first"}}

`a` is the baseline, `b` the treatment (see PROBES); a report gives yes-rate(b) - yes-rate(a).

Every problem in a file is reported at once, one line each, naming the file, line, item and
field:  `corpus/judge/labels.jsonl:12: item 't1-ku-03': field 'label': ...`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from eval_pipeline.corpus import strict_input
from eval_pipeline.settings import REPO_DIR

JUDGE_CORPUS_DIR = REPO_DIR / "corpus" / "judge"
DEFAULT_LABELS = JUDGE_CORPUS_DIR / "labels.jsonl"
DEFAULT_PROBES = JUDGE_CORPUS_DIR / "probes.jsonl"

LABELS_FORMAT_VERSION = 1

TIER1_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
# Tier-2 goldens carry `tier2-<use case>` (eval_pipeline.tier2.convert.question_type).
TIER2_TYPES = ("tier2-pref", "tier2-infra", "tier2-time", "tier2-bug", "tier2-combo")

# hard case -> (the label it forces, or None when the label depends on the item; meaning)
HARD_CASES: dict[str, tuple[str | None, str]] = {
    "baseline_correct": ("yes", "a plain correct answer"),
    "baseline_wrong": ("no", "a plain wrong answer (for tier 2 often the lure event's fact)"),
    "partial_answer": ("no", "gives only part of what the answer needs"),
    "outdated_value": ("no", "gives only the value that was true before an update"),
    "updated_and_outdated": ("yes", "gives the updated value and mentions the old one"),
    "temporal_off_by_one": (
        None,
        "off by one: a count of days, weeks or months under the temporal-reasoning rule is a "
        "yes; a date, a count of other things, or a tier-2 question (default rule) is a no",
    ),
    "temporal_off_by_more": ("no", "a count or duration off by more than one"),
    "buried_among_wrong_facts": (
        "yes",
        "the correct answer stated among wrong extra claims that do not contradict it",
    ),
    "answer_then_contradicted": (
        "no",
        "mentions the correct value only to set it aside for a wrong one",
    ),
    "verbose_no_answer": ("no", "long, on-topic padding that never gives the answer"),
    "hedged_correct": ("yes", "the correct answer given with hedging"),
    "format_variant": (
        None,
        "the answer in another number, date or unit format: same value is a yes, a format "
        "that changes the value is a no",
    ),
    "unwarranted_refusal": ("no", "says the information was never given when it was"),
    "abstention_refusal": ("yes", "an unanswerable question recognised as unanswerable"),
    "abstention_invented": ("no", "an unanswerable question answered with an invented fact"),
    "preference_met": ("yes", "recalls and uses the user's information as the rubric asks"),
    "preference_met_partially": (
        "yes",
        "uses the user's information but covers only some of the rubric's points",
    ),
    "preference_not_met": ("no", "generic advice, or advice that ignores or contradicts it"),
}

ABSTENTION_CASES = frozenset({"abstention_refusal", "abstention_invented"})
PREFERENCE_CASES = frozenset({"preference_met", "preference_met_partially", "preference_not_met"})

# probe kind -> (what variant a is, what variant b is)
PROBES: dict[str, tuple[str, str]] = {
    "terse_vs_padded": ("terse", "padded"),
    "response_order": ("reference_first", "response_first"),
    "hedged_vs_confident": ("confident", "hedged"),
}

UNKNOWN = "unknown"  # what a missing tier, question type, abstention or hard case counts as

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_GOLDEN = re.compile(r"^t2-[a-z0-9]+(-[a-z0-9]+)*-q[0-9]+(_abs)?$")

ProbeKind = Literal[tuple(PROBES)]  # type: ignore[valid-type]
Order = Literal["reference_first", "response_first"]


def _nonblank(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError("must not be empty")
    return value


def _tier_of(question_type: Any) -> int | None:
    if question_type in TIER1_TYPES:
        return 1
    if question_type in TIER2_TYPES:
        return 2
    return None


class LabelItem(BaseModel):
    """One labelled item. None in tier, question_type, abstention, why or hard_case means the
    file did not say (unknown); tier is inferred when the question type or a golden says it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    tier: Literal[1, 2] | None = None
    question_type: str | None = None
    abstention: bool | None = None
    question: str
    reference: str
    response: str
    label: Literal["yes", "no"]
    why: str | None = None
    # One of HARD_CASES, whose rules apply, or a tag of the file's own: kept and counted.
    hard_case: str | None = None
    golden: str | None = None
    invariant_label: Literal["yes", "no"] | None = None
    invariant_why: str | None = None

    # An empty response is an answer too (the judge says no to it), never a format error.
    _nonblank = field_validator("id", "question", "reference", "why")(_nonblank)

    @model_validator(mode="before")
    @classmethod
    def _infer_tier(cls, data: Any) -> Any:
        """No tier: the tier of a known question type, else 2 for an item naming a golden."""
        if not isinstance(data, Mapping) or data.get("tier") is not None:
            return data
        tier = _tier_of(data.get("question_type"))
        if tier is None and data.get("question_type") is None and data.get("golden") is not None:
            tier = 2
        return data if tier is None else {**data, "tier": tier}

    @property
    def expected_invariant(self) -> str:
        """The verdict the invariant judge should give (its own label, else `label`)."""
        return self.invariant_label or self.label

    # what the judge is shown for a field the file left out (see as_golden)
    @property
    def judged_question_type(self) -> str:
        return self.question_type if self.question_type is not None else UNKNOWN

    @property
    def judged_abstention(self) -> bool:
        return bool(self.abstention)

    @property
    def judged_tier(self) -> int:
        return self.tier if self.tier is not None else 1

    # the keys composition() and the agreement groups count an item under
    @property
    def tier_key(self) -> str:
        return str(self.tier) if self.tier is not None else UNKNOWN

    @property
    def question_type_key(self) -> str:
        return self.question_type if self.question_type is not None else UNKNOWN

    @property
    def abstention_key(self) -> str:
        if self.abstention is None:
            return UNKNOWN
        return "abstention" if self.abstention else "answerable"

    @property
    def hard_case_key(self) -> str:
        return self.hard_case if self.hard_case is not None else UNKNOWN

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError(f"must match {_ID.pattern}")
        return value


class ProbeVariant(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    response: str
    order: Order = "reference_first"

    _nonblank = field_validator("response")(_nonblank)


class ProbePair(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    probe: ProbeKind
    tier: Literal[1, 2]
    question_type: str
    abstention: bool
    question: str
    reference: str
    label: Literal["yes", "no"]
    why: str
    a: ProbeVariant
    b: ProbeVariant

    _nonblank = field_validator("id", "question", "reference", "why")(_nonblank)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError(f"must match {_ID.pattern}")
        return value

    def variant(self, side: Literal["a", "b"]) -> ProbeVariant:
        return self.a if side == "a" else self.b


@dataclass(frozen=True)
class LabelIssue:
    file: str
    line: int | None
    item: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = [f"{self.file}:{self.line}" if self.line is not None else self.file]
        if self.item is not None:
            where.append(f"item {self.item!r}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        return ": ".join([*where, self.message])


class JudgeLabelError(ValueError):
    """A label or probe file that breaks the format; one line per problem."""

    def __init__(self, issues: list[LabelIssue]) -> None:
        self.issues = list(issues)
        lines = "\n".join(f"  {i}" for i in self.issues)
        super().__init__(f"judge label file invalid ({len(self.issues)} issue(s)):\n{lines}")


@dataclass(frozen=True)
class LabelSet:
    path: str
    sha256: str
    items: list[LabelItem]

    def __len__(self) -> int:
        return len(self.items)

    def by_id(self) -> dict[str, LabelItem]:
        return {i.id: i for i in self.items}

    def composition(self) -> dict[str, Any]:
        return composition(self.items)


@dataclass(frozen=True)
class ProbeSet:
    path: str
    sha256: str
    pairs: list[ProbePair] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.pairs)


# --------------------------------------------------------------------------------------------
# rules beyond field types


def _common_issues(obj: LabelItem | ProbePair) -> list[tuple[str, str]]:
    """(field, message) problems shared by label items and probe pairs."""
    out: list[tuple[str, str]] = []
    if obj.question_type is None:
        return out
    if obj.tier is None:  # not inferred: the type is none of either tier's
        out.append(
            (
                "question_type",
                f"{obj.question_type!r} is not a known question type (tier 1: "
                f"{', '.join(TIER1_TYPES)}; tier 2: {', '.join(TIER2_TYPES)})",
            )
        )
        return out
    allowed = TIER1_TYPES if obj.tier == 1 else TIER2_TYPES
    if obj.question_type not in allowed:
        out.append(
            (
                "question_type",
                f"{obj.question_type!r} is not a tier-{obj.tier} type (one of "
                f"{', '.join(allowed)})",
            )
        )
    return out


def item_issues(item: LabelItem) -> list[tuple[str, str]]:
    """Rules beyond the field types; a rule that needs a field the item leaves out is
    skipped."""
    out = _common_issues(item)
    case, abstention, qtype = item.hard_case, item.abstention, item.question_type
    if case is not None and case not in HARD_CASES:
        case = None  # a tag of the file's own: counted (own_tags), no rule of ours applies
    if case is not None:
        forced, _ = HARD_CASES[case]
        if forced is not None and item.label != forced:
            out.append(("label", f"hard case {case!r} is always {forced!r}, got {item.label!r}"))
    if item.hard_case is not None and not item.hard_case.strip():
        out.append(("hard_case", "must not be empty"))
    if case is not None and abstention is not None:
        if case in ABSTENTION_CASES and not abstention:
            out.append(("abstention", f"hard case {case!r} needs abstention: true"))
        if abstention and case not in ABSTENTION_CASES:
            out.append(
                (
                    "hard_case",
                    "an abstention item is tagged abstention_refusal or abstention_invented, "
                    f"got {case!r}",
                )
            )
        if case == "unwarranted_refusal" and abstention:
            out.append(("abstention", "an unwarranted refusal is about an answerable question"))
    if case is not None and qtype is not None:
        is_pref = qtype == "single-session-preference"
        if case in PREFERENCE_CASES and not is_pref:
            out.append(("hard_case", f"{case!r} is for single-session-preference items"))
        if is_pref and case not in PREFERENCE_CASES:
            out.append(
                (
                    "hard_case",
                    "a single-session-preference item is tagged preference_met, "
                    f"preference_met_partially or preference_not_met, got {case!r}",
                )
            )
    if item.golden is not None:
        if item.tier is not None and item.tier != 2:
            out.append(("golden", "only tier-2 items name a tier-2 golden"))
        elif not _GOLDEN.match(item.golden):
            out.append(("golden", f"must match {_GOLDEN.pattern}"))
        elif abstention is not None and item.golden.endswith("_abs") != abstention:
            out.append(("golden", "the _abs suffix must agree with abstention"))
    if item.invariant_label is not None:
        if item.golden is None:
            out.append(("invariant_label", "only items that name a tier-2 golden have one"))
        if item.invariant_label == item.label:
            out.append(("invariant_label", "give it only where it differs from label"))
        if not (item.invariant_why or "").strip():
            out.append(("invariant_why", "missing: say why the invariant verdict differs"))
    elif item.invariant_why is not None:
        out.append(("invariant_why", "only with invariant_label"))
    return out


def pair_issues(pair: ProbePair) -> list[tuple[str, str]]:
    out = _common_issues(pair)
    if pair.probe == "response_order":
        if pair.a.response != pair.b.response:
            out.append(("b.response", "an order probe keeps the same response on both sides"))
        if (pair.a.order, pair.b.order) != ("reference_first", "response_first"):
            out.append(("b.order", "an order probe has a: reference_first, b: response_first"))
    else:
        if pair.a.response == pair.b.response:
            out.append(("b.response", f"a {pair.probe} probe needs two different responses"))
        if pair.a.order != "reference_first" or pair.b.order != "reference_first":
            out.append(("b.order", f"a {pair.probe} probe keeps the scoring order on both sides"))
    return out


# --------------------------------------------------------------------------------------------
# reading


def _loc(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "<item>"


def _unknown_field(model: type[BaseModel], loc: tuple) -> str:
    """'unknown field', naming the field names known where it is (and the likeliest one)."""
    for part in loc[:-1]:  # a nested object's own fields (a probe's `a` / `b`)
        sub = model.model_fields.get(str(part))
        if sub is None or not (
            isinstance(sub.annotation, type) and issubclass(sub.annotation, BaseModel)
        ):
            break
        model = sub.annotation
    known = list(model.model_fields)
    close = difflib.get_close_matches(str(loc[-1]) if loc else "", known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown field ({hint}known fields: {', '.join(known)})"


def _read(
    path: Path, model: type[BaseModel], rules
) -> tuple[list[Any], list[LabelIssue], str, str]:
    shown = str(path)
    try:
        shown = str(path.resolve().relative_to(REPO_DIR))
    except ValueError:
        pass
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise JudgeLabelError(
            [LabelIssue(shown, None, None, None, f"cannot read: {exc.strerror}")]
        ) from None
    issues: list[LabelIssue] = []
    out: list[Any] = []
    seen: dict[str, int] = {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JudgeLabelError(
            [LabelIssue(shown, None, None, None, f"not UTF-8 ({exc.reason})")]
        ) from None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = strict_input.loads(line)
        except json.JSONDecodeError as exc:
            issues.append(LabelIssue(shown, lineno, None, None, f"invalid JSON ({exc.msg})"))
            continue
        except strict_input.StrictInputError as exc:
            issues.append(LabelIssue(shown, lineno, None, None, str(exc)))
            continue
        if not isinstance(raw, Mapping):
            issues.append(LabelIssue(shown, lineno, None, None, "a line must be a JSON object"))
            continue
        ident = raw.get("id") if isinstance(raw.get("id"), str) else None
        try:
            obj = model.model_validate(raw)
        except ValidationError as exc:
            for err in exc.errors(include_url=False, include_input=False):
                msg = err["msg"]
                if err["type"] == "missing":
                    msg = "missing"
                elif err["type"] == "extra_forbidden":
                    msg = _unknown_field(model, tuple(err["loc"]))
                issues.append(LabelIssue(shown, lineno, ident, _loc(err["loc"]), msg))
            continue
        for fld, msg in rules(obj):
            issues.append(LabelIssue(shown, lineno, obj.id, fld, msg))
        if obj.id in seen:
            issues.append(
                LabelIssue(shown, lineno, obj.id, "id", f"duplicate: also on line {seen[obj.id]}")
            )
            continue
        seen[obj.id] = lineno
        out.append(obj)
    if not out and not issues:
        issues.append(LabelIssue(shown, None, None, None, "holds no item"))
    return out, issues, shown, hashlib.sha256(data).hexdigest()


def load_labels(path: str | Path | None = None) -> LabelSet:
    """Every item of a label file, or JudgeLabelError listing every problem."""
    items, issues, shown, digest = _read(
        Path(path) if path is not None else DEFAULT_LABELS, LabelItem, item_issues
    )
    if issues:
        raise JudgeLabelError(issues)
    return LabelSet(path=shown, sha256=digest, items=items)


def load_probes(path: str | Path | None = None) -> ProbeSet:
    """Every pair of a bias-probe file, or JudgeLabelError listing every problem."""
    pairs, issues, shown, digest = _read(
        Path(path) if path is not None else DEFAULT_PROBES, ProbePair, pair_issues
    )
    if issues:
        raise JudgeLabelError(issues)
    return ProbeSet(path=shown, sha256=digest, pairs=pairs)


# --------------------------------------------------------------------------------------------
# use


def own_tags(items: Iterable[LabelItem]) -> dict[str, int]:
    """The hard-case tags a file uses that this project does not define, with their counts."""
    return dict(
        sorted(
            Counter(
                i.hard_case for i in items if i.hard_case and i.hard_case not in HARD_CASES
            ).items()
        )  # fmt: skip
    )


def composition(items: Iterable[LabelItem]) -> dict[str, Any]:
    """Counts by tier, question type, abstention, hard case and label (sorted keys); a
    field an item leaves out counts as "unknown"; tags of the file's own are counted under
    their names and listed apart (`own_tags`)."""
    items = list(items)

    def count(key) -> dict[str, int]:
        return dict(sorted(Counter(key(i) for i in items).items()))

    return {
        "own_tags": own_tags(items),
        "items": len(items),
        "by_tier": count(lambda i: i.tier_key),
        "by_question_type": count(lambda i: i.question_type_key),
        "by_abstention": count(lambda i: i.abstention_key),
        "by_hard_case": count(lambda i: i.hard_case_key),
        "by_label": count(lambda i: i.label),
        "by_type_and_label": count(lambda i: f"{i.question_type_key}/{i.label}"),
    }


def invariant_items(labels: LabelSet) -> LabelSet:
    """The items the invariant judge is checked on (tier 2, naming a golden), each labelled
    with the invariant verdict: a LabelSet that `score.agreement.compute_agreement` reads."""
    items = [
        i.model_copy(update={"label": i.expected_invariant})
        for i in labels.items
        if i.tier == 2 and i.golden is not None
    ]
    return LabelSet(path=labels.path, sha256=labels.sha256, items=items)


def as_golden(item: LabelItem | ProbePair) -> dict[str, Any]:
    """The goldens-row shape `score.judges.longmemeval_judge` reads, so a check judges an
    item exactly as scoring judges a question (same instruction, same user message). A label
    item's unknown fields are shown as question type "unknown" (the judge's default rule),
    abstention false and tier 1."""
    if isinstance(item, LabelItem):
        name = item.golden or item.id
        tier, qtype, abstention = (
            item.judged_tier,
            item.judged_question_type,
            item.judged_abstention,
        )
    else:
        name, tier, qtype, abstention = item.id, item.tier, item.question_type, item.abstention
    return {
        "name": name,
        "input": item.question,
        "expected_output": item.reference,
        "additional_metadata": {
            "tier": tier,
            "question_type": qtype,
            "abstention": abstention,
        },
    }


# LongMemEval's question ids: 8 hex digits, some with a "gpt4_" prefix, "_abs" for abstention.
LONGMEMEVAL_ID = re.compile(r"^(?:gpt4_)?[0-9a-f]{8}(?:_abs)?$")
DEFAULT_RULE_COST = (
    "judged by the default rule: no off-by-one tolerance for temporal counts, no "
    "knowledge-update rule, a preference rubric read as an answer"
)


def fill_missing(
    labels: LabelSet, questions: Mapping[str, Any] | None
) -> tuple[LabelSet, list[str]]:
    """Items that leave out their question type or abstention flag, completed where the id is
    LongMemEval's: the type from `questions` (question id -> an object with `question_type`),
    the flag from the `_abs` suffix. Returns the set and one line per kind of change, and a
    warning for the items still without a type (they are judged by the default rule)."""
    out, typed, flagged, untyped = [], 0, 0, 0
    for item in labels.items:
        update: dict[str, Any] = {}
        known = questions is not None and item.id in questions
        if item.question_type is None and known:
            update["question_type"] = questions[item.id].question_type  # type: ignore[index]
            update["tier"] = 1
            typed += 1
        if item.abstention is None and (known or LONGMEMEVAL_ID.match(item.id)):
            update["abstention"] = item.id.endswith("_abs")
            flagged += 1
        new = item.model_copy(update=update) if update else item
        if new.question_type is None:
            untyped += 1
        out.append(new)
    notes = []
    if typed:
        notes.append(f"{typed} item(s) had no question_type: taken from the question set")
    if flagged:
        notes.append(f"{flagged} item(s) had no abstention flag: taken from the id's _abs suffix")
    if untyped:
        notes.append(
            f"warning: {untyped} of {len(out)} item(s) have no question_type and no LongMemEval "
            f"id in the question set: {DEFAULT_RULE_COST}"
        )
    return LabelSet(path=labels.path, sha256=labels.sha256, items=out), notes
