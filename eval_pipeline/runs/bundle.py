"""Write a run bundle: manifest.json, results.jsonl, summary.json, hypotheses.jsonl, and
canaries.jsonl when canaries were planted.

The bundle is assembled in a staging directory beside the runs directory and renamed into
place in one step, so a reader never sees half a run and an existing run is never touched.
Before the bundle is published, every file's text is checked for secret values from the
environment (whole, or any long run of one); a hit is redacted and reported rather than saved,
and the files are private (0600).

Every record is validated through its model (`eval_pipeline.runs.records`) before anything
is written: a mismatch raises `RecordError` naming the file, the record and the field, and
no directory is created. Records may be given as the models or as the dicts a writer built;
what is written is the fields given plus `schema_version`.
"""

from __future__ import annotations

import re
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval_pipeline.atomic import publish_dir
from eval_pipeline.corpus.jsonl import write_json, write_jsonl
from eval_pipeline.llm.credentials import redact
from eval_pipeline.runs.records import (
    CanaryRow,
    Hypothesis,
    Manifest,
    RecordError,
    ResultRow,
    Summary,
    for_writing,
)

BUNDLE_FILES = ("manifest.json", "results.jsonl", "summary.json", "hypotheses.jsonl")
CANARIES_FILE = "canaries.jsonl"  # beside them when canaries were planted (never required)
_SECRET_NAME = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")


class BundleExists(FileExistsError):
    pass


def run_dir_name(label: str | None, started: datetime) -> str:
    stamp = started.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    # A path is never redacted afterwards: a secret in the label is blanked before it names one.
    clean = _LABEL.sub("-", redact(label)).strip("-") if label else ""
    suffix = secrets.token_hex(3)
    return "-".join(p for p in (stamp, clean, suffix) if p)


def hypotheses(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The upstream LongMemEval scorer's input (tier 1 only: it knows no other questions);
    a question with no answer gets an empty hypothesis."""
    return [
        for_writing(
            Hypothesis,
            {"question_id": r["question_id"], "hypothesis": r["answer"] or ""},
            Hypothesis.FILE,
        )
        for r in rows
        if r.get("tier", 1) == 1
    ]


def bundle_records(
    manifest: Manifest | Mapping[str, Any],
    rows: Iterable[ResultRow | Mapping[str, Any]],
    summary: Summary | Mapping[str, Any],
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """(manifest, rows, summary, hypotheses) as the bundle's files hold them, each checked
    through its model; RecordError names the first record that does not match."""
    checked_manifest = for_writing(Manifest, manifest, Manifest.FILE)
    checked_rows = []
    seen: set[str] = set()
    for n, row in enumerate(rows, 1):
        qid = (
            row.get("question_id")
            if isinstance(row, Mapping)
            else getattr(row, "question_id", None)
        )
        where = f"{ResultRow.FILE} line {n}" + (f" (question {qid})" if qid else "")
        checked = for_writing(ResultRow, row, where)
        if checked["question_id"] in seen:
            # load_run refuses such a bundle: never write one.
            raise RecordError(f"{where}: question_id {qid!r} appears twice")
        seen.add(checked["question_id"])
        checked_rows.append(checked)
    checked_summary = for_writing(Summary, summary, Summary.FILE)
    return checked_manifest, checked_rows, checked_summary, hypotheses(checked_rows)


def write_bundle(
    runs_dir: Path,
    *,
    manifest: Manifest | Mapping[str, Any],
    rows: Iterable[ResultRow | Mapping[str, Any]],
    summary: Summary | Mapping[str, Any],
    label: str | None = None,
    started: datetime | None = None,
    canaries: Iterable[CanaryRow | Mapping[str, Any]] | None = None,
) -> Path:
    """Check every record, then publish the bundle in one rename; its directory path.
    `canaries`: the planted canaries' rows, written to canaries.jsonl (None: none planted)."""
    try:
        manifest, rows, summary, hyps = bundle_records(manifest, rows, summary)
        canary_rows = (
            None
            if canaries is None
            else [
                for_writing(CanaryRow, row, f"{CANARIES_FILE} line {n}")
                for n, row in enumerate(canaries, 1)
            ]
        )
    except RecordError as exc:
        raise RecordError(f"run bundle not written: {exc}") from None
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    started = started or datetime.now(UTC)
    target = runs_dir / run_dir_name(label, started)
    if target.exists():
        raise BundleExists(f"run directory already exists, refusing to overwrite: {target}")
    stage = Path(tempfile.mkdtemp(prefix=".staging-", dir=runs_dir))
    try:
        write_json(stage / "manifest.json", manifest)
        write_jsonl(stage / "results.jsonl", rows)
        write_json(stage / "summary.json", summary)
        write_jsonl(stage / "hypotheses.jsonl", hyps)
        if canary_rows is not None:
            write_jsonl(stage / CANARIES_FILE, canary_rows)
        # Redacted (and a REDACTED file saying how much, when anything was), private, then
        # renamed in one step, which fails rather than replace a non-empty directory.
        publish_dir(stage, target, marker="REDACTED")
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return target
