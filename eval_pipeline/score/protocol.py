"""Protocol checks: the harness bugs that look like system weakness, decided per run.

Each check is a plain function over what its stage computed; the Dagster layer only reports
it (an asset check on the asset that computed it) and carries its status to the manifest's
`protocol` map: `{name: {"status", "detail", "effect"}}`. `effect` is what a *failed* status
does, fixed per check:

- `fails_run`: the check is blocking, the chain stops at its stage, and a bundle that exists
  (scoring's checks) is refused by every comparison;
- `not_comparable`: the run goes on and its bundle is written, but `compare` refuses it;
- `warns`: said on the run (manifest, report, CLI), never a refusal.

A `warning` status never refuses anything (it says what could not be verified, or what holds
for only some questions); `not_applicable` means there was nothing to check.

The checks (names as in the manifest):

1. `protocol_reader_date` (not_comparable): every prompt a reader sent holds the question
   date (memorybench#46). A reader with no prompt (the extractive one) is not applicable.
2. `protocol_abstention_rubric` (fails_run): every judged `_abs` question was judged under the
   abstention rubric and no other question was (memorybench#82).
3. `protocol_top_k_below_haystack` (warns): top_k is below the number of sessions retrieval
   can return from (MemPalace#29); where it is not, session-level recall is trivially
   attainable. Warns only: comparable runs share k, scope and question set, so they share
   the affected questions too.
4. `protocol_within_top_k` (fails_run): no question got more items than k (memorybench#64);
   across runs, `runs.protocol` refuses a comparison of different k or token budgets.
5. `protocol_writer_sees_no_marker` (fails_run): no session handed to the memory writer
   carries an evidence marker, and the memory formed holds none.
6. `protocol_repeated_sessions` (fails_run): a session id repeated within one haystack is
   found and handled in conversion (the first kept), counted in the corpus manifest.
7. `protocol_system_within_ceiling` (warns): with the ceiling arm (`--arms`), the system's
   coverage is not above the ceiling's — the same reader given the evidence sessions —
   overall or for any question type (answerable questions; abstention apart, where the
   ceiling puts the near-miss in front of the reader by design). A system above its ceiling
   scores answers the reader could not give from the evidence itself: a reader that pastes
   more context, a judge that rewards length, or a ceiling context that misses what
   retrieval found. Not applicable without the ceiling arm.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Status = Literal["passed", "failed", "warning", "not_applicable"]
Effect = Literal["fails_run", "not_comparable", "warns"]

READER_DATE = "protocol_reader_date"
ABSTENTION_RUBRIC = "protocol_abstention_rubric"
TOP_K_BELOW_HAYSTACK = "protocol_top_k_below_haystack"
WITHIN_TOP_K = "protocol_within_top_k"
WRITER_NO_MARKER = "protocol_writer_sees_no_marker"
REPEATED_SESSIONS = "protocol_repeated_sessions"
WITHIN_CEILING = "protocol_system_within_ceiling"

# The rubric a judge applied to one answer (`MetricResult.rubric` of its answer_judge).
ABSTENTION = "abstention"
ANSWER = "answer"
MIXED = "mixed"  # two sources of one verdict applied different rubrics

_EXAMPLES = 5


@dataclass(frozen=True)
class ProtocolCheck:
    name: str
    effect: Effect
    description: str


CHECKS: dict[str, ProtocolCheck] = {
    c.name: c
    for c in (
        ProtocolCheck(
            READER_DATE,
            "not_comparable",
            "Every prompt the reader sent holds the question date (a reader with no prompt: "
            "not applicable).",
        ),
        ProtocolCheck(
            ABSTENTION_RUBRIC,
            "fails_run",
            "Every judged abstention question was judged under the abstention rubric, and no "
            "other question was.",
        ),
        ProtocolCheck(
            TOP_K_BELOW_HAYSTACK,
            "warns",
            "top_k is below the number of sessions retrieval can return from; where not, "
            "session-level recall is trivially attainable (warns).",
        ),
        ProtocolCheck(
            WITHIN_TOP_K,
            "fails_run",
            "No question got more retrieved items (or reader context strings) than top_k.",
        ),
        ProtocolCheck(
            WRITER_NO_MARKER,
            "fails_run",
            "No session handed to the memory writer carries an evidence marker, and the "
            "memory formed holds none.",
        ),
        ProtocolCheck(
            WITHIN_CEILING,
            "warns",
            "With the ceiling arm, the system's coverage is not above the ceiling's (the same "
            "reader given the evidence sessions), overall or for any question type (warns; "
            "not applicable without --arms ceiling).",
        ),
        ProtocolCheck(
            REPEATED_SESSIONS,
            "fails_run",
            "A session id repeated within one haystack was found and handled in conversion "
            "(first occurrence kept, the repeat dropped and counted).",
        ),
    )
}
# Worst first: what a merge of several batches' statuses keeps.
_SEVERITY: dict[str, int] = {"failed": 3, "warning": 2, "passed": 1, "not_applicable": 0}


class CheckStatus(BaseModel):
    """One check's outcome, as the manifest's `protocol` map records it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Status
    detail: str
    effect: Effect

    @property
    def refuses(self) -> bool:
        """Does this outcome make every comparison of the run refused?"""
        return self.status == "failed" and self.effect in ("fails_run", "not_comparable")

    @property
    def ok(self) -> bool:
        return self.status in ("passed", "not_applicable")


def outcome(name: str, status: Status, detail: str) -> CheckStatus:
    return CheckStatus(status=status, detail=detail, effect=CHECKS[name].effect)


def _ids(ids: Sequence[str]) -> str:
    more = f", … {len(ids) - _EXAMPLES} more" if len(ids) > _EXAMPLES else ""
    return ", ".join(ids[:_EXAMPLES]) + more


# --- 1. the question date reaches the reader ---------------------------------------------


def reader_date_check(
    saw_date: Mapping[str, bool | None], reader: str, *, sends_prompt: bool
) -> CheckStatus:
    """`saw_date`: per question, whether the prompt the reader sent held the question date
    (None: the reader reported no prompt for it)."""
    if not sends_prompt:
        return outcome(READER_DATE, "not_applicable", f"reader {reader} sends no prompt")
    missed = [q for q, saw in saw_date.items() if saw is False]
    unknown = [q for q, saw in saw_date.items() if saw is None]
    seen = len(saw_date) - len(missed) - len(unknown)
    if missed:
        return outcome(
            READER_DATE,
            "failed",
            f"{len(missed)} of {len(saw_date)} reader prompt(s) lack the question date "
            f"({_ids(missed)})",
        )
    if not seen:
        return outcome(
            READER_DATE,
            "warning" if unknown else "not_applicable",
            f"reader {reader} reported no prompt: the date cannot be verified"
            if unknown
            else "no question was read",
        )
    tail = f"; {len(unknown)} without a prompt (no answer)" if unknown else ""
    return outcome(
        READER_DATE, "passed", f"the question date is in all {seen} reader prompt(s){tail}"
    )


def prompt_holds_date(prompt: str | None, question_date: str) -> bool | None:
    return None if prompt is None else question_date in prompt


# --- 2. abstention questions get the abstention rubric ------------------------------------


def expected_rubric(abstention: bool) -> str:
    return ABSTENTION if abstention else ANSWER


def abstention_rubric_check(rows: Iterable[Mapping[str, Any]], judge: str) -> CheckStatus:
    """Over scored rows: a row is judged when its answer_judge has a score; that metric's
    `rubric` is what the judge applied (None: the judge did not say)."""
    judged = wrong_abs = wrong_other = 0
    wrong: list[str] = []
    unknown: list[str] = []
    abstaining = 0
    for row in rows:
        metric = (row.get("metrics") or {}).get("answer_judge") or {}
        if metric.get("score") is None:
            continue
        judged += 1
        abstaining += bool(row["abstention"])
        rubric = metric.get("rubric")
        if rubric is None:
            unknown.append(row["question_id"])
        elif rubric != expected_rubric(bool(row["abstention"])):
            wrong.append(row["question_id"])
            if row["abstention"]:
                wrong_abs += 1
            else:
                wrong_other += 1
    if not judged:
        return outcome(ABSTENTION_RUBRIC, "not_applicable", "no answer was judged")
    if wrong:
        return outcome(
            ABSTENTION_RUBRIC,
            "failed",
            f"{len(wrong)} of {judged} judged row(s) under the wrong rubric: {wrong_abs} "
            f"abstention question(s) not under the abstention rubric, {wrong_other} other "
            f"question(s) under it ({_ids(wrong)})",
        )
    if unknown:
        return outcome(
            ABSTENTION_RUBRIC,
            "warning",
            f"judge {judge} reported no rubric for {len(unknown)} of {judged} judged row(s): "
            "unverifiable",
        )
    return outcome(
        ABSTENTION_RUBRIC,
        "passed",
        f"{judged} judged row(s): {abstaining} under the abstention rubric, "
        f"{judged - abstaining} under the answer rubric",
    )


# --- 3. top-k below the haystack ---------------------------------------------------------


def top_k_check(
    candidates: Mapping[str, int], top_k: int, *, scope: str, abstention: Iterable[str] = ()
) -> CheckStatus:
    """`candidates`: per question, the number of sessions retrieval can return from (its
    haystack at scope `question`, the batch's sessions at scope `batch`)."""
    if not candidates:
        return outcome(TOP_K_BELOW_HAYSTACK, "not_applicable", "no question was retrieved")
    skip = set(abstention)
    affected = sorted(q for q, n in candidates.items() if top_k >= n and q not in skip)
    answerable = sum(1 for q in candidates if q not in skip)
    where = "haystack" if scope == "question" else "batch's sessions"
    if not affected:
        smallest = min(candidates.values())
        return outcome(
            TOP_K_BELOW_HAYSTACK,
            "passed",
            f"top_k {top_k} < every {where} (smallest {smallest} sessions)",
        )
    return outcome(
        TOP_K_BELOW_HAYSTACK,
        "warning",
        f"{len(affected)} of {answerable} answerable question(s) have a {where} of at most "
        f"top_k={top_k} sessions: retrieval can return all of it, so session-level recall "
        f"is trivially attainable there ({_ids(affected)})",
    )


# --- 4. items within k -------------------------------------------------------------------


def within_top_k_check(returned: Mapping[str, int], top_k: int, retriever: str) -> CheckStatus:
    """`returned`: per question, how many items (or reader context strings, whichever is
    more) retrieval handed on."""
    if not returned:
        return outcome(WITHIN_TOP_K, "not_applicable", "no question was retrieved")
    over = sorted(q for q, n in returned.items() if n > top_k)
    most = max(returned.values())
    if over:
        return outcome(
            WITHIN_TOP_K,
            "failed",
            f"retriever {retriever} returned more than top_k={top_k} items for {len(over)} "
            f"question(s), up to {most} ({_ids(over)})",
        )
    return outcome(WITHIN_TOP_K, "passed", f"at most {most} item(s) per question, top_k={top_k}")


# --- 5. no evidence marker reaches the memory writer --------------------------------------


def writer_marker_check(
    sessions_seen: int, session_markers: Sequence[str], memory_markers: Sequence[str]
) -> CheckStatus:
    """`session_markers`: evidence-marker fields found on the sessions handed over
    ("<session>: <path>"); `memory_markers`: markers in the memory formed."""
    if session_markers or memory_markers:
        parts = []
        if session_markers:
            parts.append(
                f"{len(session_markers)} marker field(s) on sessions handed to the memory "
                f"writer ({_ids(list(session_markers))})"
            )
        if memory_markers:
            parts.append(f"the memory formed holds {_ids(list(memory_markers))}")
        return outcome(WRITER_NO_MARKER, "failed", "; ".join(parts))
    if not sessions_seen:
        return outcome(
            WRITER_NO_MARKER,
            "passed",
            "no session was handed over in this run (memory already formed); the memory "
            "holds no marker",
        )
    return outcome(
        WRITER_NO_MARKER,
        "passed",
        f"{sessions_seen} session(s) handed over without a marker; the memory holds none",
    )


# --- 6. repeated session ids within a haystack -------------------------------------------


def repeated_sessions_check(report: Mapping[str, Any] | None) -> CheckStatus:
    """`report`: the corpus manifest's `repeated_sessions` (`corpus.convert`)."""
    if report is None:
        return outcome(REPEATED_SESSIONS, "not_applicable", "no tier-1 corpus was converted")
    repeats, haystacks = int(report.get("repeats", 0)), int(report.get("haystacks", 0))
    if not repeats:
        return outcome(REPEATED_SESSIONS, "passed", "no session id repeats within a haystack")
    return outcome(
        REPEATED_SESSIONS,
        "passed",
        f"handled: {repeats} repeat(s) in {haystacks} haystack(s) of the selected questions "
        f"(first occurrence kept, repeat dropped; {_ids(sorted(report.get('questions') or {}))})",
    )


# --- 7. the system within its ceiling ------------------------------------------------------


def _rate(est: Mapping[str, Any] | None) -> float | None:
    return None if not est else est.get("rate")


def _pct(rate: float) -> str:
    return f"{100 * rate:.1f}%"


def within_ceiling_check(tiers: Mapping[str, Mapping[str, Any]]) -> CheckStatus:
    """`tiers`: a summary's tiers (`score.summary`), each with the system's coverage and, when
    the arms ran, `arms` (`score.arms.tier_summary`). Compared where both rates were scored."""
    above: list[str] = []
    compared = 0
    for tier, s in tiers.items():
        ceiling = ((s.get("arms") or {}).get("arms") or {}).get("ceiling")
        if ceiling is None:
            continue
        lines = [("answerable", _rate(s.get("coverage")), _rate(ceiling.get("coverage")))]
        lines += [
            (qtype, _rate(est), _rate((ceiling.get("coverage_by_type") or {}).get(qtype)))
            for qtype, est in (s.get("coverage_by_type") or {}).items()
        ]
        for name, system, ceil in lines:
            if system is None or ceil is None:
                continue
            compared += 1
            if system > ceil:
                above.append(f"tier {tier} {name}: system {_pct(system)} > ceiling {_pct(ceil)}")
    if not compared:
        return outcome(
            WITHIN_CEILING,
            "not_applicable",
            "no ceiling arm was scored (run with --arms ceiling)",
        )
    if above:
        return outcome(
            WITHIN_CEILING,
            "warning",
            f"the system scores above its ceiling (the reader given the evidence) in "
            f"{len(above)} of {compared} line(s): {'; '.join(above)}",
        )
    return outcome(
        WITHIN_CEILING,
        "passed",
        f"the system is at or below its ceiling in all {compared} line(s) (overall and per "
        "question type)",
    )


# --- merging and reading ----------------------------------------------------------------


def merge(statuses: Sequence[tuple[str, CheckStatus]]) -> CheckStatus:
    """One status for several batches' (label, status): the worst, its detail labelled;
    one batch's as it is."""
    if len(statuses) == 1:
        return statuses[0][1]
    worst = max(statuses, key=lambda s: _SEVERITY[s[1].status])[1]
    detail = "; ".join(f"{label}: {s.detail}" for label, s in statuses)
    return CheckStatus(status=worst.status, detail=detail, effect=worst.effect)


def as_map(statuses: Mapping[str, CheckStatus]) -> dict[str, dict[str, str]]:
    return {name: s.model_dump() for name, s in statuses.items()}


def read_map(raw: Mapping[str, Any] | None) -> dict[str, CheckStatus]:
    """A manifest's `protocol` map, typed (absent in bundles from before the checks)."""
    return {name: CheckStatus.model_validate(v) for name, v in (raw or {}).items()}


def refusals(raw: Mapping[str, Any] | None) -> list[tuple[str, CheckStatus]]:
    """The failed checks that refuse every comparison of the run, in map order."""
    return [(name, s) for name, s in read_map(raw).items() if s.refuses]


def summary_line(raw: Mapping[str, Any] | None) -> str | None:
    """One line for the CLI and the report: counts by status, and each failed or warning
    check by name."""
    statuses = read_map(raw)
    if not statuses:
        return None
    counts: dict[str, int] = {}
    for s in statuses.values():
        counts[s.status] = counts.get(s.status, 0) + 1
    head = ", ".join(f"{counts[k]} {k.replace('_', ' ')}" for k in _SEVERITY if counts.get(k))
    flagged = [
        f"{name.removeprefix('protocol_')} {s.status}" + (" (not comparable)" if s.refuses else "")
        for name, s in statuses.items()
        if not s.ok
    ]
    return f"protocol checks: {head}" + (f"; {', '.join(flagged)}" if flagged else "")
