"""Check an errata file against an upstream file, in one streaming pass.

Raw records are read as they are (`json_stream`), not through the converter: the converter
refuses a haystack that lists a session twice, which is one of the things errata describe.
Every question an entry names must be in the file and each of its claims must hold; every
derivation is run over the whole file and compared with what its source reported (a count,
ids it names) and, for `duplicate_session_id`, with the entries that carry the claim. The
file's sha256 is computed in the same pass: a pass on another file checks the claims but
says nothing about the pinned one, and the report says which it was.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_pipeline.corpus.errata import (
    DERIVATIONS,
    DuplicateSessionId,
    Errata,
    duplicate_session_ids,
    evidence_roles,
)
from eval_pipeline.corpus.json_stream import iter_json_array


@dataclass
class VerifyReport:
    path: str
    sha256: str
    pinned_file: bool  # the file is the one the errata apply to (by sha256)
    records: int
    checked_claims: int
    failures: list[str] = field(default_factory=list)  # one line each, naming the question
    derived: dict[str, list[str]] = field(default_factory=dict)  # derivation -> ids found

    @property
    def ok(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        which = (
            "the pinned file"
            if self.pinned_file
            else "NOT the file these errata apply to (claims checked on it, not on the pinned one)"
        )
        out = [f"{self.path}: {self.records} records, sha256 {self.sha256}: {which}"]
        for name, ids in self.derived.items():
            out.append(f"derived {name}: {len(ids)} question(s)")
        out += [f"FAIL {line}" for line in self.failures]
        verdict = "ok" if self.ok else f"{len(self.failures)} failure(s)"
        out.append(f"{self.checked_claims} claim(s) checked: {verdict}")
        return out


def _raw_question_id(index: int, raw: Any) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("question_id"), str):
        return raw["question_id"]
    return f"#{index}"


def verify(errata: Errata, path: str | Path) -> VerifyReport:
    """Every listed id is in the file and every claim holds (`VerifyReport.failures` else)."""
    hasher = hashlib.sha256()
    failures: list[str] = []
    found: set[str] = set()
    derived: dict[str, list[str]] = {d.derivation: [] for d in errata.doc.derived}
    # The session each duplicate_session_id entry claims, to compare with what is derived.
    claimed_dups = {
        e.question_id: c.session_id
        for e in errata.doc.entries
        for c in e.claims
        if isinstance(c, DuplicateSessionId)
    }
    derived_dups: dict[str, list[str]] = {}
    records = checked = 0
    for index, raw in iter_json_array(path, on_bytes=hasher.update):
        records += 1
        qid = _raw_question_id(index, raw)
        if not isinstance(raw, dict):
            continue
        try:
            for name in derived:
                if DERIVATIONS[name]["from_raw"](raw):
                    derived[name].append(qid)
            if dups := duplicate_session_ids(raw):
                derived_dups[qid] = dups
        except (KeyError, TypeError, ValueError) as exc:
            failures.append(f"{qid}: record not in the upstream schema ({exc!r})")
            continue
        entry = errata.entries.get(qid)
        if entry is None:
            continue
        found.add(qid)
        for claim in entry.claims:
            checked += 1
            try:
                problem = claim.check(raw)
            except (KeyError, TypeError, ValueError) as exc:
                problem = f"cannot be checked on this record ({exc!r})"
            if problem:
                failures.append(f"{qid}: {claim.kind}: {problem}")
    for qid in sorted(set(errata.entries) - found):
        failures.append(f"{qid}: not in the file")
    failures += _derivation_failures(errata, derived)
    for qid in sorted(set(derived_dups) - set(claimed_dups)):
        if "duplicate_session_id" in derived:
            failures.append(
                f"{qid}: duplicate_session_id: the haystack repeats "
                f"{', '.join(derived_dups[qid])} but no entry says so"
            )
    digest = hasher.hexdigest()
    return VerifyReport(
        path=str(path),
        sha256=digest,
        pinned_file=errata.applies_to(digest),
        records=records,
        checked_claims=checked,
        failures=failures,
        derived=derived,
    )


def _derivation_failures(errata: Errata, derived: dict[str, list[str]]) -> list[str]:
    out = []
    for d in errata.doc.derived:
        ids = derived[d.derivation]
        if d.expect.count is not None and len(ids) != d.expect.count:
            out.append(
                f"derived {d.derivation}: found {len(ids)} question(s), its source reports "
                f"{d.expect.count}"
            )
        for qid in d.expect.includes:
            if qid not in ids:
                out.append(f"{qid}: derived {d.derivation}: named by its source, not found")
    return out


def derive(errata: Errata | None, path: str | Path) -> list[dict[str, Any]]:
    """The questions every derivation finds in a file, as errata entries would list them
    (status, source and sentence from `errata` when it has the derivation)."""
    known = {d.derivation: d for d in (errata.doc.derived if errata else [])}
    out: list[dict[str, Any]] = []
    for _, raw in iter_json_array(path):
        qid = raw["question_id"]
        for name, spec in DERIVATIONS.items():
            if not spec["from_raw"](raw):
                continue
            d = known.get(name)
            detail = (
                f"repeats {', '.join(duplicate_session_ids(raw))}"
                if name == "duplicate_session_id"
                else f"evidence roles {sorted(set(evidence_roles(raw))) or 'none'}"
            )
            out.append(
                {
                    "question_id": qid,
                    "derivation": name,
                    "detail": detail,
                    **({"status": d.status, "source": d.source} if d else {}),
                }
            )
    return out
