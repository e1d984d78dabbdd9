"""Applying errata in the goldens stage, and carrying their flags onto result rows.

The goldens stage hands an `ErrataApplier` to `plan_corpus`, which calls it once per record
of the file (before the sample is drawn). It collects each question's flag and, in
`exclude` mode, answers True for a `suspect` question so it leaves the population the sample
is drawn from: the question set then differs, and the manifest lists what was excluded.
In `flag` mode nothing measured changes: the flags travel beside the goldens (`errata.json`
in the stage's artifact, never inside goldens.jsonl) and scoring copies them onto the rows.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from eval_pipeline.corpus.errata import Errata, Flag, Mode, errata_for

ERRATA_FILE = "errata.json"


class ErrataApplier:
    def __init__(self, errata: Errata | None, mode: Mode, reason: str = "") -> None:
        self.errata = errata if mode != "off" else None
        self.mode = mode
        self.reason = "--errata off" if mode == "off" else reason
        self.flags: dict[str, Flag] = {}
        self.excluded: list[str] = []
        self.seen: set[str] = set()

    def __call__(self, golden: dict) -> bool:
        """Record one tier-1 golden row of the file; True: leave it out of the sample."""
        qid = golden["name"]
        self.seen.add(qid)
        flag = self.errata.flag_for(golden) if self.errata else None
        if flag is None:
            return False
        self.flags[qid] = flag
        if self.mode == "exclude" and flag.status == "suspect":
            self.excluded.append(qid)
            return True
        return False

    def record(self, goldens: list[dict]) -> dict[str, Any]:
        """`{"pin": <the manifest's errata pin>, "flags": {question_id: flag}}` for the
        selected tier-1 goldens."""
        selected = {
            g["name"]: self.flags[g["name"]]
            for g in goldens
            if g["additional_metadata"].get("tier", 1) == 1 and g["name"] in self.flags
        }
        return {
            "pin": self.pin(selected),
            "flags": {k: v.model_dump() for k, v in selected.items()},
        }

    def pin(self, selected: dict[str, Flag]) -> dict[str, Any]:
        e = self.errata
        if e is None:
            return {"mode": self.mode, "applied": False, "reason": self.reason}
        # Every question the errata name must be in the file they claim to apply to.
        not_in_file = sorted(set(e.entries) - self.seen) if self.seen else []
        return {
            "mode": self.mode,
            "applied": True,
            "file": e.label(),
            "version": e.version,
            "sha256": e.digest,
            "applies_to": e.doc.applies_to.model_dump(),
            "verified": e.doc.verified,
            "flagged": len(selected),
            "by_status": dict(sorted(Counter(f.status for f in selected.values()).items())),
            "excluded": sorted(self.excluded),
            "not_in_file": not_in_file,
        }


def errata_applier(
    sha256: str | None, *, mode: Mode, errata_file: str | None, tier1: bool = True
) -> ErrataApplier:
    """The applier for the file with this sha256 (a no-op when no errata apply)."""
    if mode == "off":
        return ErrataApplier(None, mode)
    if not tier1:
        return ErrataApplier(None, mode, "no tier-1 questions in this run")
    errata, reason = errata_for(sha256, errata_file)
    return ErrataApplier(errata, mode, reason)


def read_flags(path: Path) -> dict[str, dict[str, Any]]:
    """The flags a goldens artifact carries; none for one made before errata existed."""
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8")).get("flags") or {}


def with_errata(rows: list[dict], flags: dict[str, dict[str, Any]]) -> list[dict]:
    """Every tier-1 row with `errata`: its flag `{status, source, what}`, or None."""
    return [{**r, "errata": flags.get(r["question_id"])} if r["tier"] == 1 else r for r in rows]
