"""`eval-pipeline errata verify [FILE]` and `errata derive FILE`.

verify exits 0 when every claim holds, 1 when one does not (each printed as one `FAIL` line
naming the question); an unusable errata file or upstream file is exit 2, one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from eval_pipeline.corpus.errata import Errata, bundled_errata, load_errata
from eval_pipeline.corpus.errors import CorpusError

EXIT_FAILED = 1


def pinned_file_in_cache(errata: Errata, cache_dir: str | None = None) -> Path | None:
    """The file the errata apply to, if the Hugging Face cache holds it at its revision."""
    to = errata.doc.applies_to
    if not (to.repo_id and to.revision):
        return None
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(
        to.repo_id, to.file_name, cache_dir=cache_dir, revision=to.revision, repo_type="dataset"
    )
    return Path(found) if isinstance(found, str) else None


def _errata(args: argparse.Namespace) -> Errata:
    if args.errata:
        return load_errata(args.errata)
    shipped = bundled_errata()
    if len(shipped) != 1:
        raise CorpusError(f"{len(shipped)} bundled errata files: name one with --errata")
    return shipped[0]


def cmd_verify(args: argparse.Namespace) -> int:
    from eval_pipeline.corpus.errata_verify import verify

    errata = _errata(args)
    path = Path(args.file).expanduser() if args.file else pinned_file_in_cache(errata)
    if path is None:
        to = errata.doc.applies_to
        raise CorpusError(
            f"{to.file_name} at revision {to.revision} is not in the Hugging Face cache; pass "
            "the file's path"
        )
    if not path.is_file():
        raise CorpusError(f"upstream file not found: {path}")
    report = verify(errata, path)
    code = 0 if report.ok else EXIT_FAILED
    if args.json:  # one document: the errata checked, every failure and derivation
        doc = {
            "command": "errata verify",
            "output_version": 1,
            "outcome": "ok" if report.ok else "failed",
            "exit_code": code,
            "errata": {"label": errata.label(), "version": errata.version, "sha256": errata.digest},
            "report": dataclasses.asdict(report),
        }
        print(json.dumps(doc, ensure_ascii=False))
        return code
    print(f"errata {errata.label()} version {errata.version} (sha256 {errata.digest})")
    for line in report.lines():
        print(line)
    return 0 if report.ok else EXIT_FAILED


def cmd_derive(args: argparse.Namespace) -> int:
    from eval_pipeline.corpus.errata_verify import derive

    errata = load_errata(args.errata) if args.errata else None
    for item in derive(errata, Path(args.file).expanduser()):
        print(json.dumps(item, ensure_ascii=False))
    return 0


def register(sub) -> None:
    p = sub.add_parser("errata", help="dataset errata: verify them against a file, derive them")
    errata_sub = p.add_subparsers(dest="errata_command", required=True)
    v = errata_sub.add_parser(
        "verify",
        help="check every errata entry and claim against an upstream file (docs/errata.md)",
        description="Streams the file once: every question an entry names must be in it, "
        "every claim must hold, every derivation must find what its source reported. "
        "Exit 0: all hold; 1: a claim failed (one FAIL line each); 2: unusable input.",
    )
    v.add_argument(
        "file",
        nargs="?",
        metavar="FILE",
        help="the upstream JSON (default: the pinned file, from the Hugging Face cache)",
    )
    v.add_argument("--errata", metavar="FILE", help="an errata file (default: the bundled one)")
    v.add_argument("--json", action="store_true", help="one JSON document on stdout, nothing else")
    v.set_defaults(func=cmd_verify)
    d = errata_sub.add_parser(
        "derive",
        help="print the questions each derivation finds in a file, one JSON line each",
    )
    d.add_argument("file", metavar="FILE", help="an upstream JSON file")
    d.add_argument("--errata", metavar="FILE", help="take status and source from this file")
    d.set_defaults(func=cmd_derive)
