"""`eval-pipeline`: the headless interface.

Every failure the user can fix ends as one line on stderr and a non-zero exit; tracebacks
are for bugs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.dagster_home import StorageError
from eval_pipeline.llm.errors import LLMError
from eval_pipeline.preflight import PreflightError
from eval_pipeline.run_cli import (
    UsageError,
    add_run_options,
    cmd_run,
    option_error,
    run_config_from_args,
)

# The corpus options `eval-pipeline corpus` takes (RunConfig's, as `run` takes them).
CORPUS_FLAGS = (
    "--upstream",
    "--variant",
    "--revision",
    "--sha256",
    "--sample",
    "--seed",
    "--floor",
    "--max-sessions-per-question",
)


def cmd_corpus(args: argparse.Namespace) -> int:
    from eval_pipeline.corpus.convert import build_corpus, check_out_dir
    from eval_pipeline.corpus.upstream import resolve_upstream

    corpus = run_config_from_args(args)[0].corpus
    check_out_dir(Path(args.out), force=args.force)  # before reading a byte of the upstream
    # sha256 is checked in the same streaming pass that converts the file.
    upstream = resolve_upstream(corpus.upstream_spec(), verify=False)
    manifest = build_corpus(upstream, Path(args.out), corpus.sample_spec())
    if args.json:  # the counts and the note, as one document
        doc = {
            "command": "corpus",
            "output_version": 1,
            "outcome": "written",
            "exit_code": 0,
            "out": str(Path(args.out).resolve()),
            "counts": manifest["counts"],
            "sample_note": manifest.get("sample_note"),
        }
        print(json.dumps(doc, ensure_ascii=False))
        return 0
    if manifest.get("sample_note"):
        print(f"note: {manifest['sample_note']}")
    counts = manifest["counts"]
    print(
        f"{counts['questions_selected']} goldens, {counts['sessions']} sessions, "
        f"{counts['turns']} turns → {args.out}"
    )
    return 0


def cmd_judge_check(args: argparse.Namespace) -> int:
    """Thin: the check itself is `score.judge_check`; a bad input is one line, exit 2."""
    from eval_pipeline import servers
    from eval_pipeline.score.judge_check import JudgeCheckError, run_judge_check, summary_lines

    # With --json nothing but the document reaches stdout, whatever the check prints.
    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    # A local model server it starts is stopped at its end, and said so.
    with servers.announced("eval-pipeline judge-check") as scope:
        try:
            with quiet:
                outcome = run_judge_check(
                    args.judge,
                    labels=args.labels,
                    verdicts=args.verdicts,
                    references=args.references,
                    answer_field=args.answer_field,
                    probes=args.probes,
                    with_probes=not args.no_probes,
                    with_invariant=not args.no_invariant,
                    methods=args.methods.split(",") if args.methods else None,
                    folds=args.folds,
                    out_dir=args.out,
                    concurrency=args.concurrency,
                )
        except JudgeCheckError as exc:
            raise UsageError(str(exc)) from None
    for line in scope.lines:  # on stderr, before the results: an error stays the last line
        print(line, file=sys.stderr)
    if args.json:
        from eval_pipeline.runs.outcome import dumps
        from eval_pipeline.score.judge_check_output import judge_check_output

        print(dumps(judge_check_output(outcome)))
        return 0
    for line in summary_lines(outcome):
        print(line)
    roots = sorted({str(p.parent.parent) for p in outcome.stored})
    print(f"stored: {len(outcome.stored)} result(s) in {', '.join(roots)}")
    print(f"wall time: {outcome.wall_s:.1f} s")
    print(outcome.out_dir)
    return 0


def _add_judge_check(sub) -> None:
    p = sub.add_parser(
        "judge-check",
        help="measure a judge's verdict methods against labels: kappa per method, cross-validated",
        description="Judges every labelled item (and the bias probes) exactly as scoring does, "
        "under every verdict method (docs/judge.md); prints each method's kappa with its "
        "interval, cross-validated on the project's set (a --labels file: as shipped), writes "
        "DIR/methods/<method>/{verdicts.jsonl,agreement.json}, and stores each result keyed by "
        "judge and method hash for run manifests, compare and reports.",
    )
    p.add_argument(
        "--judge",
        required=True,
        metavar="P:MODEL",
        help="the judge model to check; 'offline' checks the methods that need no model",
    )
    p.add_argument(
        "--methods", metavar="A,B", help="verdict methods to check (default: all of them)"
    )
    p.add_argument(
        "--folds", type=int, default=5, metavar="K", help="cross-validation folds (default 5)"
    )
    p.add_argument(
        "--labels",
        metavar="FILE",
        help="label file (default corpus/judge/labels.jsonl), or a published run: "
        "evaluate_qa.py output, or answers with --verdicts (docs/judge.md)",
    )
    p.add_argument(
        "--verdicts",
        metavar="FILE",
        help="a published run's verdicts kept apart from its answers, joined on question_id",
    )
    p.add_argument(
        "--references",
        metavar="FILE",
        help="the questions a run answers (question_id, question, answer, question_type), "
        "when the pinned LongMemEval_S file is not on this machine",
    )
    p.add_argument(
        "--answer-field",
        metavar="NAME",
        help="the field of a published run that holds the answer (default: hypothesis, ...)",
    )
    p.add_argument(
        "--probes", metavar="FILE", help="probe file (default corpus/judge/probes.jsonl)"
    )
    p.add_argument("--no-probes", action="store_true", help="skip the bias probes")
    p.add_argument(
        "--no-invariant", action="store_true", help="skip tier 2's invariant judge check"
    )
    p.add_argument("--out", metavar="DIR", help="default: a new dir under <state>/judge_checks")
    p.add_argument("--concurrency", type=int, default=4, metavar="N", help="calls in flight")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout (each method's agreement result) and nothing else",
    )
    p.set_defaults(func=cmd_judge_check)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eval-pipeline", description="Evaluate agent-memory context graphs on LongMemEval."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("corpus", help="build goldens.jsonl, fixtures.jsonl, manifest.json")
    add_run_options(p, only=CORPUS_FLAGS)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace goldens/fixtures/manifest files in --out that this command did not write",
    )
    p.add_argument("--json", action="store_true", help="one JSON document on stdout, nothing else")
    p.set_defaults(func=cmd_corpus)

    p = sub.add_parser("run", help="run the whole chain (the eval_chain job) through Dagster")
    add_run_options(p)
    p.set_defaults(func=cmd_run)

    from eval_pipeline.corpus.errata_cli import register as register_errata
    from eval_pipeline.graph.cli import register as register_graph
    from eval_pipeline.llm.cli import register as register_llm
    from eval_pipeline.ops.cli import register as register_ops
    from eval_pipeline.runs.cli import register as register_runs

    register_errata(sub)
    register_graph(sub)
    register_llm(sub)
    _add_judge_check(sub)
    register_runs(sub)
    register_ops(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from eval_pipeline.settings import private_umask

    private_umask()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (CorpusError, UsageError, LLMError, PreflightError, StorageError, OSError) as exc:
        return _bad_input(args, str(exc))
    except ValidationError as exc:
        return _bad_input(args, option_error(exc))


def _bad_input(args: argparse.Namespace, message: str) -> int:
    """One line on stderr, exit 2; with `--json` also the error document on stdout."""
    print(f"eval-pipeline: error: {message}", file=sys.stderr)
    if getattr(args, "json", False):
        from eval_pipeline.runs.outcome import ErrorOutput, dumps

        sub = [v for k, v in vars(args).items() if k.endswith("_command") and isinstance(v, str)]
        command = " ".join([args.command, *sub])
        print(dumps(ErrorOutput(command=command, exit_code=2, error=message)))
    return 2


if __name__ == "__main__":
    sys.exit(main())
