"""`eval-pipeline`: the headless interface.

Every failure the user can fix ends as one line on stderr and a non-zero exit; tracebacks
are for bugs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.corpus.upstream import HF_REVISION, UpstreamSpec


class UsageError(Exception):
    """A bad option or input the user can fix: printed as one line."""


def upstream_spec_from_args(args: argparse.Namespace) -> UpstreamSpec:
    value = args.upstream
    common = {"variant": args.variant, "sha256": args.sha256}
    if value in (None, "sample"):
        return UpstreamSpec(source="sample", sha256=args.sha256)
    if value in ("hf", "huggingface"):
        return UpstreamSpec(source="huggingface", revision=args.revision, **common)
    return UpstreamSpec(source="path", path=value, **common)


def sample_spec_from_args(args: argparse.Namespace) -> SampleSpec:
    return SampleSpec(
        sample=args.sample,
        seed=args.seed,
        floor=args.floor,
        max_sessions_per_question=args.max_sessions_per_question,
    )


def _add_corpus_options(p: argparse.ArgumentParser, *, upstream_required: bool) -> None:
    p.add_argument(
        "--upstream",
        required=upstream_required,
        metavar="PATH",
        help="a LongMemEval JSON file; 'sample' for the bundled sample, 'hf' for Hugging Face "
        "at --revision",
    )
    p.add_argument("--variant", default="s", help="upstream variant: s or m (oracle is refused)")
    p.add_argument("--revision", default=HF_REVISION, help="Hugging Face commit (40 hex)")
    p.add_argument("--sha256", help="expected sha256 of the upstream file (overrides the pin)")
    p.add_argument("--sample", type=int, metavar="N", help="questions to draw (default: all)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="sampling seed")
    p.add_argument("--floor", type=int, default=1, help="minimum questions per stratum")
    p.add_argument(
        "--max-sessions-per-question",
        type=int,
        metavar="K",
        help="keep evidence sessions and at most K sessions per haystack (non-comparable)",
    )


def cmd_corpus(args: argparse.Namespace) -> int:
    from eval_pipeline.corpus.convert import build_corpus
    from eval_pipeline.corpus.upstream import resolve_upstream

    # sha256 is checked in the same streaming pass that converts the file.
    upstream = resolve_upstream(upstream_spec_from_args(args), verify=False)
    manifest = build_corpus(upstream, Path(args.out), sample_spec_from_args(args))
    counts = manifest["counts"]
    print(
        f"{counts['questions_selected']} goldens, {counts['sessions']} sessions, "
        f"{counts['turns']} turns → {args.out}"
    )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from eval_pipeline.run_chain import run_chain

    return run_chain(
        upstream=upstream_spec_from_args(args),
        sample=sample_spec_from_args(args),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eval-pipeline", description="Evaluate agent-memory context graphs on LongMemEval."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("corpus", help="build goldens.jsonl, fixtures.jsonl, manifest.json")
    _add_corpus_options(p, upstream_required=True)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.set_defaults(func=cmd_corpus)

    p = sub.add_parser("run", help="materialize the whole chain through Dagster")
    _add_corpus_options(p, upstream_required=False)
    p.set_defaults(func=cmd_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (CorpusError, UsageError) as exc:
        print(f"eval-pipeline: error: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        print(f"eval-pipeline: error: option {where}: {first['msg']}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"eval-pipeline: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
