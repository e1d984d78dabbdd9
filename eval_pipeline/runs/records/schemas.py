"""The records' JSON Schemas, one file per record under docs/schemas/.

    python -m eval_pipeline.runs.records            # (re)write docs/schemas/*.schema.json
    python -m eval_pipeline.runs.records --check    # exit 1 if a committed file differs

Generated from the models, never edited by hand; a test keeps the committed files equal to
what the models generate. A schema describes what the writer writes (no additional
properties); a reader accepts unknown fields, and a record without `schema_version` as 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval_pipeline.failure_records import FailureRecord
from eval_pipeline.runs.records.base import Record
from eval_pipeline.runs.records.canaries import CanaryRow
from eval_pipeline.runs.records.manifest import Manifest
from eval_pipeline.runs.records.results import Hypothesis, ResultRow
from eval_pipeline.runs.records.summary import Summary
from eval_pipeline.settings import REPO_DIR

SCHEMA_DIR = REPO_DIR / "docs" / "schemas"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

# File name -> record model.
SCHEMAS: dict[str, type[Record]] = {
    "manifest.schema.json": Manifest,
    "summary.schema.json": Summary,
    "result-row.schema.json": ResultRow,
    "hypothesis.schema.json": Hypothesis,
    "canary-row.schema.json": CanaryRow,
    "failure-record.schema.json": FailureRecord,
}


def json_schema(model: type[Record]) -> dict[str, Any]:
    schema = model.model_json_schema()
    # The versions this code reads; the model's own check says the same in words.
    schema["properties"]["schema_version"].update(minimum=1, maximum=model.VERSION)
    head = {
        "$schema": DIALECT,
        "title": f"{model.FILE} ({'one line' if model.FILE.endswith('.jsonl') else 'the file'}"
        f"), schema version {model.VERSION}",
        "description": " ".join((model.__doc__ or "").split())
        + " Written with no field beyond these; readers keep unknown fields and read a "
        "record without schema_version as version 1.",
    }
    return {**head, **{k: v for k, v in schema.items() if k not in ("title", "description")}}


def schema_text(model: type[Record]) -> str:
    return json.dumps(json_schema(model), indent=2, ensure_ascii=False) + "\n"


def write_schemas(out_dir: Path = SCHEMA_DIR) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, model in SCHEMAS.items():
        path = out_dir / name
        path.write_text(schema_text(model), encoding="utf-8")
        paths.append(path)
    return paths


def stale_schemas(out_dir: Path = SCHEMA_DIR) -> list[str]:
    """Files under `out_dir` that are missing or differ from what the models generate."""
    stale = []
    for name, model in SCHEMAS.items():
        path = out_dir / name
        if not path.is_file() or path.read_text(encoding="utf-8") != schema_text(model):
            stale.append(name)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval_pipeline.runs.records", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=SCHEMA_DIR, help="default: docs/schemas")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a file is stale"
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_schemas(args.out)
        if stale:
            print(
                f"stale JSON Schemas in {args.out}: {', '.join(stale)} "
                "(regenerate: python -m eval_pipeline.runs.records)",
                file=sys.stderr,
            )
            return 1
        print(f"{len(SCHEMAS)} JSON Schemas in {args.out} match the models")
        return 0
    for path in write_schemas(args.out):
        print(path)
    return 0
