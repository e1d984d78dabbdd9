"""Write a run bundle: manifest.json, results.jsonl, summary.json, hypotheses.jsonl.

The bundle is assembled in a staging directory beside the runs directory and renamed into
place in one step, so a reader never sees half a run and an existing run is never touched.
Before the bundle is published, every file's text is checked for secret values from the
environment (whole, or any long run of one); a hit is redacted and reported rather than saved,
and the files are private (0600).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval_pipeline.corpus.jsonl import dumps_line, write_json, write_jsonl
from eval_pipeline.llm.credentials import PRIVATE_FILE, redact_tree

BUNDLE_FILES = ("manifest.json", "results.jsonl", "summary.json", "hypotheses.jsonl")
_SECRET_NAME = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")


class BundleExists(FileExistsError):
    pass


def run_dir_name(label: str | None, started: datetime) -> str:
    stamp = started.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    clean = _LABEL.sub("-", label).strip("-") if label else ""
    suffix = secrets.token_hex(3)
    return "-".join(p for p in (stamp, clean, suffix) if p)


def hypotheses(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The upstream LongMemEval scorer's input (tier 1 only: it knows no other questions);
    a question with no answer gets an empty hypothesis."""
    return [
        {"question_id": r["question_id"], "hypothesis": r["answer"] or ""}
        for r in rows
        if r.get("tier", 1) == 1
    ]


def write_bundle(
    runs_dir: Path,
    *,
    manifest: dict[str, Any],
    rows: list[dict[str, Any]],
    summary: dict[str, Any],
    label: str | None = None,
    started: datetime | None = None,
) -> Path:
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
        write_jsonl(stage / "hypotheses.jsonl", hypotheses(rows))
        # The project's one redaction: every secret value, whole or any long run of it (an
        # echo that dropped the `sk-` prefix), and private permissions.
        redactions = redact_tree(stage)
        if redactions:
            # Say so in the bundle itself: a reader must know something was removed.
            marker = stage / "REDACTED"
            marker.write_text(dumps_line({"redactions": redactions}) + "\n", encoding="utf-8")
            os.chmod(marker, PRIVATE_FILE)
        os.rename(stage, target)  # one step; fails rather than replace a non-empty dir
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return target
