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
from eval_pipeline.llm.errors import LLMError
from eval_pipeline.preflight import PreflightError
from eval_pipeline.run_chain import RunOptions


class UsageError(Exception):
    """A bad option or input the user can fix: printed as one line."""


def upstream_spec_from_args(args: argparse.Namespace) -> UpstreamSpec:
    """The upstream the options name. --variant is passed on for every source (None: not
    said), and a refused one (oracle) stops here, before anything runs."""
    from eval_pipeline.corpus.upstream import check_variant

    value = args.upstream
    check_variant(args.variant)
    common = {"variant": args.variant, "sha256": args.sha256}
    if value in (None, "sample"):
        return UpstreamSpec(source="sample", **common)
    if value in ("hf", "huggingface"):
        return UpstreamSpec(source="huggingface", revision=args.revision, **common)
    return UpstreamSpec(source="path", path=value, **common)


def sample_spec_from_args(args: argparse.Namespace) -> SampleSpec:
    return SampleSpec(
        sample=args.sample,
        seed=0 if args.seed is None else args.seed,
        floor=1 if args.floor is None else args.floor,
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
    p.add_argument(
        "--variant",
        default=None,
        metavar="V",
        help="what the file is: s or m for Hugging Face (default s), any label for a local "
        "file (default: what its sha256 pin identifies, else 'local'); oracle is refused",
    )
    p.add_argument("--revision", default=HF_REVISION, help="Hugging Face commit (40 hex)")
    p.add_argument("--sha256", help="expected sha256 of the upstream file (overrides the pin)")
    p.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="questions to draw (default: all; above what the file holds: all, with a note)",
    )
    p.add_argument("--seed", type=int, metavar="S", help="sampling seed (default 0)")
    p.add_argument("--floor", type=int, help="minimum questions per stratum (default 1)")
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
    if manifest.get("sample_note"):
        print(f"note: {manifest['sample_note']}")
    counts = manifest["counts"]
    print(
        f"{counts['questions_selected']} goldens, {counts['sessions']} sessions, "
        f"{counts['turns']} turns → {args.out}"
    )
    return 0


RUN_OPTION_KEYS = (
    "runs_dir",
    "label",
    "reconciler",
    "reconciler_model",
    "retriever",
    "retrieval_agent",
    "scope",
    "top_k",
    "reader",
    "judge",
    "backend",
    "graph_uri",
    "graph_database",
    "graph_http_url",
    "repeat",
    "repeat_reconcile",
    "repeat_salt",
    "wait_for_graph",
    "batches",
    "verbose",
    "tier",
    "light",
    *(
        f"{role}_{setting}"
        for role in ("reader", "judge", "retrieval_agent", "reconciler")
        for setting in ("timeout", "concurrency", "max_tokens", "structured_output")
    ),
)


def _add_llm_role_options(p: argparse.ArgumentParser) -> None:
    """--ROLE-timeout, --ROLE-concurrency, --ROLE-max-tokens, --ROLE-structured-output for
    each model role. Unset: the provider's default (for `local`: 600 s, one request at a
    time, an output budget sized per role; elsewhere 60 s, 8 in flight, 1024 tokens)."""
    from eval_pipeline.llm.config import STRUCTURED_OUTPUT_MODES

    g = p.add_argument_group(
        "per-role LLM settings",
        "ROLE is reader, judge, retrieval-agent or reconciler; unset: the provider's default "
        "(local: 600 s timeout, concurrency 1, max tokens per role)",
    )
    for role in ("reader", "judge", "retrieval-agent", "reconciler"):
        g.add_argument(f"--{role}-timeout", type=float, metavar="S", help="seconds per request")
        g.add_argument(f"--{role}-concurrency", type=int, metavar="N", help="requests in flight")
        g.add_argument(f"--{role}-max-tokens", type=int, metavar="N", help="output token budget")
        g.add_argument(
            f"--{role}-structured-output",
            choices=STRUCTURED_OUTPUT_MODES,
            help="first mode tried; a server refusing it is asked in the next",
        )


def run_options_from_args(args: argparse.Namespace) -> RunOptions:
    """--config FILE first (JSON or YAML, the CLI's own option names), then the options given
    on the command line, which win."""
    if args.config:
        merge_config(args, load_config_file(Path(args.config)), Path(args.config))
    values: dict = {
        "upstream": upstream_spec_from_args(args),
        "sample": sample_spec_from_args(args),
    }
    for key in RUN_OPTION_KEYS:
        if getattr(args, key) is not None:
            values[key] = getattr(args, key)
    return RunOptions.model_validate(values)


def merge_config(args: argparse.Namespace, config: dict, path: Path) -> None:
    """Fill `args` from a --config mapping whose keys are `run`'s options (`top-k` or `top_k`);
    an option given on the command line is kept. Values are converted as the command line's
    would be; an unknown key or a bad value is one line naming it."""
    actions = {
        a.dest: a
        for a in args._run_parser._actions  # noqa: SLF001 - the run parser's own options
        if a.option_strings and a.dest not in ("help", "config")
    }
    for raw_key, value in config.items():
        key = str(raw_key).replace("-", "_")
        action = actions.get(key)
        if action is None:
            valid = ", ".join(sorted(k.replace("_", "-") for k in actions))
            raise UsageError(f"--config {path}: unknown key {raw_key!r}; valid keys: {valid}")
        if getattr(args, key) != action.default:
            continue  # given on the command line: it wins
        if value is not None and action.type is not None and not isinstance(value, bool):
            try:
                value = action.type(value)
            except (TypeError, ValueError):
                raise UsageError(
                    f"--config {path}: {raw_key}: {value!r} is not a valid "
                    f"{getattr(action.type, '__name__', 'value')}"
                ) from None
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(str, action.choices))
            raise UsageError(f"--config {path}: {raw_key}: {value!r} is not one of {choices}")
        setattr(args, key, value)


def load_config_file(path: Path) -> dict:
    import yaml  # installed with dagster

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UsageError(f"--config {path}: not valid YAML/JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"--config {path}: expected a mapping of option names to values")
    return data


def cmd_run(args: argparse.Namespace) -> int:
    from eval_pipeline.run_chain import run_chain

    return run_chain(run_options_from_args(args))


def cmd_judge_check(args: argparse.Namespace) -> int:
    """Thin: the check itself is `score.judge_check`; a bad input is one line, exit 2."""
    from eval_pipeline.score.judge_check import JudgeCheckError, run_judge_check, summary_lines

    try:
        outcome = run_judge_check(
            args.judge,
            labels=args.labels,
            probes=args.probes,
            with_probes=not args.no_probes,
            with_invariant=not args.no_invariant,
            out_dir=args.out,
            concurrency=args.concurrency,
        )
    except JudgeCheckError as exc:
        raise UsageError(str(exc)) from None
    for line in summary_lines(outcome):
        print(line)
    print(f"stored: {', '.join(str(p) for p in outcome.stored)}")
    print(f"wall time: {outcome.wall_s:.1f} s")
    print(outcome.out_dir)
    return 0


def _add_judge_check(sub) -> None:
    p = sub.add_parser(
        "judge-check",
        help="measure a judge against the labelled set: verdicts.jsonl, agreement.json",
        description="Runs the judge exactly as scoring does over every labelled item (and the "
        "bias probes), writes DIR/verdicts.jsonl and DIR/agreement.json, and stores the "
        "result keyed by judge and prompt hash for run manifests, compare and reports.",
    )
    p.add_argument("--judge", required=True, metavar="P:MODEL", help="the judge to check")
    p.add_argument(
        "--labels", metavar="FILE", help="label file (default corpus/judge/labels.jsonl)"
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
    p.set_defaults(func=cmd_judge_check)


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
    p.add_argument("--runs-dir", metavar="DIR", help="where run bundles go")
    p.add_argument("--label", metavar="L", help="a label in the run directory name")
    p.add_argument(
        "--reconciler",
        metavar="NAME",
        help="none | extractive | consolidating | llm | pkg.mod:Class",
    )
    p.add_argument("--reconciler-model", metavar="P:MODEL", help="model for --reconciler llm")
    p.add_argument("--retriever", metavar="NAME", help="fulltext | graph_agent | pkg.mod:Class")
    p.add_argument("--retrieval-agent", metavar="P:MODEL", help="model for graph_agent")
    p.add_argument("--scope", choices=["question", "batch"], help="retrieval scope")
    p.add_argument("--top-k", type=int, metavar="K", help="items retrieved per question")
    p.add_argument("--reader", metavar="P:MODEL", help="reader model (default: offline)")
    p.add_argument("--judge", metavar="P:MODEL", help="judge model (default: none, unscored)")
    p.add_argument("--backend", choices=["arcadedb", "memgraph"], help="graph dialect")
    p.add_argument("--graph-uri", metavar="URI", help="bolt://host:port (default: embedded)")
    p.add_argument("--graph-database", metavar="NAME", help="database on that server")
    p.add_argument("--graph-http-url", metavar="URL", help="ArcadeDB HTTP API, for indexes")
    p.add_argument(
        "--tier",
        choices=["1", "2", "all"],
        help="1: LongMemEval (default); 2: the authored organizational-memory scenarios; all",
    )
    p.add_argument(
        "--light",
        action="store_true",
        default=None,
        help="tier 2, light scenarios only (one per use case): a quick check",
    )
    p.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help="N runs of retrieval and scoring over one graph (for eval-pipeline calibrate); "
        "each repeat is a fresh sample of every model call",
    )
    p.add_argument(
        "--repeat-reconcile",
        action="store_true",
        default=None,
        help="repeats reconcile afresh too (measures an LLM reconciler's variance)",
    )
    p.add_argument(
        "--repeat-salt",
        metavar="SALT",
        help="the repeats' sample salt (default: a new one): give a run's salt to reproduce "
        "its repeats from the LLM cache",
    )
    p.add_argument(
        "--wait-for-graph",
        type=float,
        metavar="SECONDS",
        help="wait this long for another chain holding the graph instance (default: refuse)",
    )
    p.add_argument(
        "--batches",
        type=int,
        metavar="K",
        help="split the questions into K batches, each on a graph instance of its own, run "
        "in parallel (embedded: K servers; else put {batch} in --graph-uri); default 1",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        default=None,
        help="also print Dagster's own log lines (by default: one line per stage)",
    )
    _add_llm_role_options(p)
    p.add_argument(
        "--config", metavar="FILE", help="YAML/JSON file of the same options (top-k or top_k)"
    )
    p.set_defaults(func=cmd_run, _run_parser=p)

    from eval_pipeline.graph.cli import register as register_graph
    from eval_pipeline.llm.cli import register as register_llm
    from eval_pipeline.ops.cli import register as register_ops
    from eval_pipeline.runs.cli import register as register_runs

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
    except (CorpusError, UsageError, LLMError, PreflightError) as exc:
        print(f"eval-pipeline: error: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        option = "--" + where.replace("_", "-") if "." not in where else where
        print(f"eval-pipeline: error: option {option}: {message}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"eval-pipeline: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
