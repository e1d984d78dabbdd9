"""The JSON Schemas of the `--json` documents the CLI prints, under docs/schemas/cli/.

    python -m eval_pipeline.runs.output_schemas            # (re)write them
    python -m eval_pipeline.runs.output_schemas --check    # exit 1 if a committed one differs

Generated from the pydantic models, never edited by hand (a test keeps them current). Each
document carries `output_version`, bumped only when a reader of the previous one would break
(a field removed, renamed or changing type); a field added is not a bump.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from eval_pipeline.runs.listing import RunsListing
from eval_pipeline.runs.outcome import (
    CalibrateOutput,
    CompareOutput,
    ErrorOutput,
    ReportOutput,
    RunOutput,
)
from eval_pipeline.score.judge_check_output import JudgeCheckOutput
from eval_pipeline.settings import REPO_DIR

SCHEMA_DIR = REPO_DIR / "docs" / "schemas" / "cli"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

SCHEMAS: dict[str, tuple[str, type[BaseModel]]] = {
    "run.schema.json": ("eval-pipeline run --json", RunOutput),
    "compare.schema.json": ("eval-pipeline compare --json", CompareOutput),
    "calibrate.schema.json": ("eval-pipeline calibrate --json", CalibrateOutput),
    "report.schema.json": ("eval-pipeline report --json", ReportOutput),
    "runs.schema.json": ("eval-pipeline runs --json", RunsListing),
    "judge-check.schema.json": ("eval-pipeline judge-check --json", JudgeCheckOutput),
    "error.schema.json": ("any command's --json on exit 2", ErrorOutput),
}


def schema_text(title: str, model: type[BaseModel]) -> str:
    schema = model.model_json_schema()
    head = {
        "$schema": DIALECT,
        "title": title,
        "description": " ".join((model.__doc__ or "").split()),
    }
    body = {k: v for k, v in schema.items() if k not in ("title", "description")}
    return json.dumps({**head, **body}, indent=2, ensure_ascii=False) + "\n"


def stale(out_dir: Path = SCHEMA_DIR) -> list[str]:
    return [
        name
        for name, (title, model) in SCHEMAS.items()
        if not (out_dir / name).is_file()
        or (out_dir / name).read_text(encoding="utf-8") != schema_text(title, model)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval_pipeline.runs.output_schemas")
    parser.add_argument("--check", action="store_true", help="exit 1 if a schema is stale")
    parser.add_argument("--out", type=Path, default=SCHEMA_DIR)
    args = parser.parse_args(argv)
    if args.check:
        names = stale(args.out)
        for name in names:
            print(f"stale: {args.out / name}", file=sys.stderr)
        return 1 if names else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (title, model) in SCHEMAS.items():
        (args.out / name).write_text(schema_text(title, model), encoding="utf-8")
        print(args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
