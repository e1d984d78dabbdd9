"""Dataset errata: known problems of individual questions of one exact upstream file.

An errata file (`corpus/errata/*.json`, or a user's own) names the file it applies to by its
sha256, and lists per question a `status`, the upstream issue(s) it comes from, what is wrong
(one sentence) and machine-checkable `claims` that `errata_verify.verify` tests against the
file. Some problems can only be read off the file itself; those are `derived` (a named
derivation and what it is expected to find), never typed in as ids nobody could see.

Statuses:
- `suspect`: the question's gold (answer or evidence labels) is reported wrong and not
  settled: a miss on it may not be the system's. `--errata exclude` leaves these out;
- `corrected`: a reported problem that was fixed (upstream or by the pipeline): shown, never
  excluded;
- `note`: the gold is not in doubt, but the question carries a known artifact worth seeing
  beside its score (a repeated filler session, evidence only on assistant turns).

The errata that apply to a run are exactly those whose `applies_to.sha256` is the file's:
none for the bundled sample or a generated file, unless the user passes an errata file of
their own for it.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from eval_pipeline.corpus import strict_input
from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.longmemeval import ABSTENTION_SUFFIX, parse_upstream_date
from eval_pipeline.settings import BUNDLED_CORPUS_DIR

ERRATA_DIR = BUNDLED_CORPUS_DIR / "errata"
Status = Literal["suspect", "corrected", "note"]
Mode = Literal["flag", "exclude", "off"]
# Which status wins when a question is named twice (an entry and a derivation).
SEVERITY: dict[str, int] = {"suspect": 2, "corrected": 1, "note": 0}
DATE_PREFIX = r"^\d{4}/\d{2}/\d{2}"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _sessions(raw: dict) -> list[tuple[str, str, list]]:
    return list(
        zip(
            raw["haystack_session_ids"],
            raw["haystack_dates"],
            raw["haystack_sessions"],
            strict=False,
        )
    )


def _is_evidence(raw: dict, session_id: str, turns: list) -> bool:
    return session_id in raw["answer_session_ids"] or any(
        isinstance(t, dict) and t.get("has_answer") is True for t in turns
    )


def _day(value: str) -> date:
    return parse_upstream_date(value).date()


# Each claim tests one raw upstream record and returns None when it holds, else what was
# found instead (the verifier prefixes the question id and the claim's kind).
class QuestionDate(_Strict):
    kind: Literal["question_date"]
    date: str = Field(pattern=DATE_PREFIX)

    def check(self, raw: dict) -> str | None:
        found = str(raw.get("question_date"))
        return None if found.startswith(self.date) else f"expected {self.date}, found {found!r}"


class QuestionContains(_Strict):
    kind: Literal["question_contains"]
    text: str = Field(min_length=1)

    def check(self, raw: dict) -> str | None:
        found = str(raw.get("question"))
        return None if self.text in found else f"{self.text!r} not in {found[:80]!r}"


class GoldAnswerContains(_Strict):
    kind: Literal["gold_answer_contains"]
    text: str = Field(min_length=1)

    def check(self, raw: dict) -> str | None:
        found = str(raw.get("answer"))
        ok = self.text.lower() in found.lower()
        return None if ok else f"{self.text!r} not in the gold answer {found[:80]!r}"


class EvidenceSessionDated(_Strict):
    """An evidence session (in answer_session_ids, or holding a has_answer turn) of this
    date; of this id too when `session_id` is given."""

    kind: Literal["evidence_session_dated"]
    date: str = Field(pattern=DATE_PREFIX)
    session_id: str | None = None

    def check(self, raw: dict) -> str | None:
        found = []
        for sid, when, turns in _sessions(raw):
            if self.session_id not in (None, sid) or not _is_evidence(raw, sid, turns):
                continue
            if str(when).startswith(self.date):
                return None
            found.append(f"{sid} {when}")
        which = f"session {self.session_id}" if self.session_id else "no evidence session"
        if self.session_id and not found:
            return f"{which} is not an evidence session of the haystack"
        return f"{which} dated {self.date}; evidence sessions: {', '.join(found) or 'none'}"


class SessionDateGapDays(_Strict):
    """Two haystack sessions dated exactly `days` calendar days apart (second minus first)."""

    kind: Literal["session_date_gap_days"]
    sessions: tuple[str, str]
    days: int

    def check(self, raw: dict) -> str | None:
        dates = {sid: when for sid, when, _ in _sessions(raw)}
        missing = [s for s in self.sessions if s not in dates]
        if missing:
            return f"session(s) {', '.join(missing)} not in the haystack"
        first, second = (_day(dates[s]) for s in self.sessions)
        gap = (second - first).days
        return None if gap == self.days else f"expected {self.days} days, found {gap}"


class DuplicateSessionId(_Strict):
    """The haystack lists `session_id` more than once, always with the same turns, under
    more than one date, and it is no evidence session (filler)."""

    kind: Literal["duplicate_session_id"]
    session_id: str

    def check(self, raw: dict) -> str | None:
        copies = [(w, t) for sid, w, t in _sessions(raw) if sid == self.session_id]
        if len(copies) < 2:
            return f"session {self.session_id} listed {len(copies)} time(s), expected 2 or more"
        if any(t != copies[0][1] for _, t in copies[1:]):
            return f"the copies of session {self.session_id} differ in content"
        if len({w for w, _ in copies}) < 2:
            return f"the copies of session {self.session_id} share one date"
        if any(_is_evidence(raw, self.session_id, t) for _, t in copies):
            return f"session {self.session_id} is an evidence session, not filler"
        return None


class NoUserEvidence(_Strict):
    """An answerable question none of whose has_answer turns is a user turn."""

    kind: Literal["no_user_evidence"]

    def check(self, raw: dict) -> str | None:
        if str(raw.get("question_id", "")).endswith(ABSTENTION_SUFFIX):
            return "an abstention question"
        roles = evidence_roles(raw)
        return None if "user" not in roles else f"evidence roles {sorted(set(roles))}"


Claim = Annotated[
    QuestionDate
    | QuestionContains
    | GoldAnswerContains
    | EvidenceSessionDated
    | SessionDateGapDays
    | DuplicateSessionId
    | NoUserEvidence,
    Field(discriminator="kind"),
]


def evidence_roles(raw: dict) -> list[str]:
    """The role of every has_answer turn of a raw record, in haystack order."""
    return [
        str(t.get("role"))
        for _, _, turns in _sessions(raw)
        for t in turns
        if isinstance(t, dict) and t.get("has_answer") is True
    ]


def duplicate_session_ids(raw: dict) -> list[str]:
    """Session ids a raw record's haystack lists more than once, in first-seen order."""
    seen: dict[str, int] = {}
    for sid in raw["haystack_session_ids"]:
        seen[sid] = seen.get(sid, 0) + 1
    return [sid for sid, n in seen.items() if n > 1]


def no_user_evidence(raw: dict) -> bool:
    """Upstream's rule for leaving a question out of user-turn retrieval: answerable, and no
    has_answer turn is a user turn (an answerable question with none at all included)."""
    qid = str(raw["question_id"])
    return not qid.endswith(ABSTENTION_SUFFIX) and "user" not in evidence_roles(raw)


# A derivation finds questions from the file itself. `from_goldens`: it can also be read off
# a golden row at run time (so a run flags what it finds); else it only cross-checks entries.
DERIVATIONS: dict[str, dict[str, Any]] = {
    "no_user_evidence": {"from_raw": no_user_evidence, "from_goldens": True},
    "duplicate_session_id": {"from_raw": lambda raw: bool(duplicate_session_ids(raw))},
}


class Entry(_Strict):
    question_id: str = Field(min_length=1)
    status: Status
    source: list[str] = Field(min_length=1)
    what: str = Field(min_length=1)
    claims: list[Claim] = Field(default_factory=list)
    # True only in an errata version whose claims `errata verify` passed on the pinned file.
    verified: bool = False


class Expectation(_Strict):
    count: int | None = Field(default=None, ge=0)  # how many questions the source reports
    includes: list[str] = Field(default_factory=list)  # ids the source names, to cross-check


class Derived(_Strict):
    derivation: Literal["no_user_evidence", "duplicate_session_id"]
    status: Status
    source: list[str] = Field(min_length=1)
    what: str = Field(min_length=1)
    expect: Expectation = Field(default_factory=Expectation)
    verified: bool = False


class AppliesTo(_Strict):
    repo_id: str | None = None
    revision: str | None = None
    file_name: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int | None = None


class ErrataFile(_Strict):
    errata_version: str = Field(min_length=1)
    applies_to: AppliesTo
    verified: bool = False
    note: str = ""
    entries: list[Entry] = Field(default_factory=list)
    derived: list[Derived] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_entry_per_question(self) -> ErrataFile:
        seen: set[str] = set()
        for e in self.entries:
            if e.question_id in seen:
                raise ValueError(f"question {e.question_id!r} has two entries; merge them")
            seen.add(e.question_id)
        names = [d.derivation for d in self.derived]
        if len(names) != len(set(names)):
            raise ValueError("a derivation is listed twice")
        return self


class Flag(_Strict):
    """What a result row carries (`errata`): the exact shape readers rely on."""

    status: Status
    source: list[str]
    what: str

    def merged(self, other: Flag) -> Flag:
        """Both problems: the more severe status, every source, both sentences."""
        status = max(self.status, other.status, key=SEVERITY.__getitem__)
        return Flag(
            status=status,
            source=list(dict.fromkeys([*self.source, *other.source])),
            what=f"{self.what} Also: {other.what}",
        )


class Errata:
    """A validated errata file with its identity (version, digest of its bytes, path)."""

    def __init__(self, doc: ErrataFile, path: Path, digest: str) -> None:
        self.doc = doc
        self.path = path
        self.digest = digest
        self.entries = {e.question_id: e for e in doc.entries}

    @property
    def version(self) -> str:
        return self.doc.errata_version

    def applies_to(self, sha256: str | None) -> bool:
        return bool(sha256) and sha256 == self.doc.applies_to.sha256

    def label(self) -> str:
        return str(_display_path(self.path))

    def flag_for(self, golden: dict) -> Flag | None:
        """The errata of one tier-1 golden row: its entry, merged with every run-time
        derivation that finds it."""
        entry = self.entries.get(golden["name"])
        flag = Flag(status=entry.status, source=entry.source, what=entry.what) if entry else None
        for d in self.doc.derived:
            if DERIVATIONS[d.derivation].get("from_goldens") and _golden_matches(d, golden):
                found = Flag(status=d.status, source=d.source, what=d.what)
                flag = found if flag is None else flag.merged(found)
        return flag


def _golden_matches(d: Derived, golden: dict) -> bool:
    meta = golden.get("additional_metadata") or {}
    if d.derivation == "no_user_evidence":
        return not meta.get("abstention") and "user" not in (meta.get("evidence_turn_roles") or [])
    return False


def _display_path(path: Path) -> Path:
    from eval_pipeline.settings import REPO_DIR

    resolved = path.resolve()
    return resolved.relative_to(REPO_DIR) if resolved.is_relative_to(REPO_DIR) else resolved


def _first_error(exc: ValidationError, doc: Any) -> str:
    """One line naming the entry (by question id, or the derivation) and the field of the
    first error."""
    err = exc.errors()[0]
    loc = list(err["loc"])
    where = ".".join(str(p) for p in loc)
    kinds = {"entries": ("entry", "question_id"), "derived": ("derivation", "derivation")}
    if len(loc) >= 2 and loc[0] in kinds and isinstance(loc[1], int):
        noun, key = kinds[str(loc[0])]
        item = doc[loc[0]][loc[1]] if isinstance(doc, dict) else None
        name = item.get(key) if isinstance(item, dict) else None
        rest = ".".join(str(p) for p in loc[2:]) or noun
        where = f"{noun} {name!r}: {rest}" if name else f"{loc[0]}[{loc[1]}]: {rest}"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "literal_error":
        msg = f"{err.get('input')!r} is not one of {err['ctx']['expected']}"
    return f"{where}: {msg}" if where else msg


def load_errata(path: str | Path) -> Errata:
    """Read and validate an errata file; CorpusError (one line naming the file, the entry and
    the field) when it cannot be used."""
    path = Path(path).expanduser()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"errata file {path}: cannot read it ({exc.strerror})") from None
    try:
        raw = strict_input.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorpusError(f"errata file {path}: not JSON ({exc})") from None
    except strict_input.StrictInputError as exc:
        raise CorpusError(f"errata file {path}: {exc}") from None
    try:
        doc = ErrataFile.model_validate(raw)
    except ValidationError as exc:
        raise CorpusError(f"errata file {path}: {_first_error(exc, raw)}") from None
    return Errata(doc, path, hashlib.sha256(data).hexdigest())


def bundled_errata() -> list[Errata]:
    """Every errata file shipped with the project, in name order."""
    return [load_errata(p) for p in sorted(ERRATA_DIR.glob("*.json"))]


def errata_for(sha256: str | None, errata_file: str | None = None) -> tuple[Errata | None, str]:
    """The errata that apply to exactly the file with this sha256, and why none do.

    `errata_file` (the user's own) replaces the bundled ones: it applies only when it names
    this file's sha256 too.
    """
    candidates = [load_errata(errata_file)] if errata_file else bundled_errata()
    for errata in candidates:
        if errata.applies_to(sha256):
            return errata, ""
    named = "; ".join(
        f"{e.label()} applies to {e.doc.applies_to.file_name} sha256 "
        f"{e.doc.applies_to.sha256[:12]}…"
        for e in candidates
    )
    return None, f"no errata for this file (sha256 {str(sha256)[:12]}…): {named or 'none known'}"


def check_errata_option(errata_file: str | None) -> None:
    """Preflight: the bundled errata and a user's errata file are valid (CorpusError)."""
    bundled_errata()
    if errata_file:
        load_errata(errata_file)
