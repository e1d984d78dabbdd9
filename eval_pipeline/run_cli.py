"""`eval-pipeline run`: its flags and `--config` keys read off `RunConfig`, the `eval_chain`
job launched on the local instance, its outcome printed.

Flags: every field of `RunConfig` with `cli` metadata is a flag (a model role's field is
`--ROLE` for its model plus `--ROLE-timeout`, `--ROLE-concurrency`, `--ROLE-max-tokens`,
`--ROLE-structured-output`); help, type and choices come from the field. A `--config` file
(YAML or JSON) holds the same options: a flag's name (`top-k` or `top_k`) or a section with
its fields (`retrieval: {top_k: 5}`, as in the Dagster run config); the command line wins.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from eval_pipeline.config import SECTIONS, ModelRole, RunConfig
from eval_pipeline.llm.config import LOCAL_ROLE_DEFAULTS
from eval_pipeline.score import protocol
from eval_pipeline.scripts import command

# Exit codes of `eval-pipeline run` (docs/cli.md lists them).
EXIT_OK = 0  # complete: every question measured
EXIT_FAILED = 1  # a stage failed (its error printed); no bundle, or one from an earlier stage
EXIT_BAD_INPUT = 2  # an option or input is wrong; nothing ran
EXIT_REFUSED = 3  # the graph instance is held by another chain, or holds someone else's data
EXIT_INCOMPLETE = 4  # a bundle was written, but some questions are unscored (infrastructure)
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT) or SIGTERM: stopped between stages, resumable

# Presentation only, not options of the chain: stated here, once.
VERBOSE = "verbose"
JSON = "json"
ROLE_SETTINGS = {
    "timeout_s": "timeout",
    "concurrency": "concurrency",
    "max_tokens": "max-tokens",
    "structured_output": "structured-output",
}


METAVARS = {int: "N", float: "S"}


class UsageError(Exception):
    """A bad option or input the user can fix: printed as one line."""


def _extra(field: FieldInfo) -> dict[str, Any]:
    extra = field.json_schema_extra
    return extra if isinstance(extra, dict) else {}


def _plain(annotation: Any) -> Any:
    """`int | None` → int; a Literal stays itself."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is not Literal and len(args) == 1:
        return args[0]
    return annotation


def run_flags() -> dict[str, tuple[tuple[str, ...], FieldInfo]]:
    """Each flag of `eval-pipeline run` → (its path in RunConfig, its field)."""
    out: dict[str, tuple[tuple[str, ...], FieldInfo]] = {}
    for section, cls in SECTIONS.items():
        for name, field in cls.model_fields.items():
            extra = _extra(field)
            if "cli" not in extra:
                continue
            if "cli_prefix" in extra:  # a model role: its model, then its settings
                out[extra["cli"]] = ((section, name, "model"), field)
                for setting, suffix in ROLE_SETTINGS.items():
                    flag = f"--{extra['cli_prefix']}-{suffix}"
                    out[flag] = ((section, name, setting), ModelRole.model_fields[setting])
            else:
                out[extra["cli"]] = ((section, name), field)
    return out


def _help(path: tuple[str, ...], field: FieldInfo) -> str:
    text = field.description or ""
    if path[-1] == "model" and len(path) == 3:
        return text
    if field.default not in (None, False, "", {}) and not field.default_factory:
        text += f" (default {field.default})"
    return text


def add_run_options(p: argparse.ArgumentParser, only: tuple[str, ...] | None = None) -> None:
    """The flags of `run` (or `only` these), read off RunConfig: nothing is stated here a
    second time."""
    local = LOCAL_ROLE_DEFAULTS
    roles = p.add_argument_group(
        "per-role LLM settings",
        "ROLE is reader, judge, retrieval-agent or reconciler; unset: the provider's default "
        f"(local: {local['timeout_s']:g} s timeout, concurrency {local['concurrency']}, "
        "max tokens per role)",
    )
    flags = run_flags()
    p.set_defaults(_flags=tuple(only or flags))
    for flag, (path, field) in flags.items():
        if only is not None and flag not in only:
            continue
        extra = _extra(field)
        kind = _plain(field.annotation)
        target = roles if len(path) == 3 and path[-1] != "model" else p
        kwargs: dict[str, Any] = {
            "dest": "__".join(path),
            "default": None,
            "help": _help(path, field),
        }
        if kind is bool:
            # On by default: `--no-FLAG` turns it off.
            on = field.default is True
            kwargs["action"] = argparse.BooleanOptionalAction if on else "store_true"
        else:
            if get_origin(kind) is Literal:
                kwargs["choices"] = list(get_args(kind))
            elif "choices" in extra:
                kwargs["choices"] = extra["choices"]
            elif kind in (int, float):
                kwargs["type"] = kind
            if "choices" not in kwargs:
                kwargs["metavar"] = extra.get("metavar") or METAVARS.get(kind, "VALUE")
        target.add_argument(flag, *extra.get("aliases", ()), **kwargs)
    if only is not None:
        return
    p.add_argument(
        f"--{VERBOSE}",
        action="store_true",
        default=None,
        help="also print Dagster's own log lines (by default: one line per stage)",
    )
    p.add_argument(
        f"--{JSON}",
        action="store_true",
        help="print one JSON document on stdout (outcome, exit code, each bundle's headline "
        "numbers) and nothing else; the summary goes to stderr",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="YAML/JSON file of the same options: flag names (top-k or top_k) or sections "
        "(retrieval: {top_k: 5})",
    )


def _set(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        tree = tree.setdefault(part, {})
    tree[path[-1]] = value


def load_config_file(path: Path) -> dict[str, Any]:
    import yaml  # installed with dagster

    from eval_pipeline.corpus import strict_input

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:  # one line naming the option, not a bare "[Errno 2]"
        raise UsageError(f"--config {path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"--config {path}: not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    try:
        # Strict: no aliases (an alias bomb), no key given twice, bounded nesting.
        data = strict_input.load_yaml(text)
    except yaml.YAMLError as exc:
        raise UsageError(
            f"--config {path}: not valid YAML/JSON ({strict_input.yaml_error_text(exc)})"
        ) from None
    except strict_input.StrictInputError as exc:
        raise UsageError(f"--config {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--config {path}: expected a mapping of option names to values")
    return data


def config_tree(data: dict[str, Any], path: Path) -> tuple[dict[str, Any], bool]:
    """A config file's mapping as RunConfig's nested shape (and its `verbose`)."""
    flags = {
        name.removeprefix("--").replace("-", "_"): p
        for flag, (p, field) in run_flags().items()
        for name in (flag, *_extra(field).get("aliases", ()))
    }
    tree: dict[str, Any] = {}
    verbose = False
    spelled: dict[tuple[str, ...], str] = {}  # each option's path → the key that set it

    def once(option: tuple[str, ...], raw: str) -> None:
        # `top-k` and `top_k` (or a flag and its section's field) name one option: given
        # twice, which one wins would be an accident of order.
        if option in spelled:
            raise UsageError(
                f"--config {path}: {raw!r} and {spelled[option]!r} set the same option; keep one"
            )
        spelled[option] = raw

    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        if key in SECTIONS and isinstance(value, dict):
            for name, inner in value.items():
                once((key, str(name).replace("-", "_")), f"{raw_key}.{name}")
                _set(tree, (key, str(name)), inner)
        elif key in flags:
            once(flags[key], str(raw_key))
            _set(tree, flags[key], value)
        elif key == VERBOSE:
            verbose = bool(value)
        else:
            valid = ", ".join(sorted({*(k.replace("_", "-") for k in flags), VERBOSE, *SECTIONS}))
            raise UsageError(f"--config {path}: unknown key {raw_key!r}; valid keys: {valid}")
    return tree, verbose


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = (
            _merge(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else value
        )
    return out


def given_options(args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    """The options given (--config FILE, then the flags, which win) in RunConfig's nested
    shape, and `verbose`."""
    tree: dict[str, Any] = {}
    verbose = False
    if getattr(args, "config", None):
        tree, verbose = config_tree(load_config_file(Path(args.config)), Path(args.config))
    given: dict[str, Any] = {}
    flags = run_flags()
    for flag in args._flags:
        path = flags[flag][0]
        value = getattr(args, "__".join(path))
        if value is not None:
            _set(given, path, value)
    return _merge(tree, given), bool(getattr(args, VERBOSE, False)) or verbose


def run_config_from_args(args: argparse.Namespace) -> tuple[RunConfig, bool]:
    """--config FILE first, then the flags given on the command line, which win."""
    tree, verbose = given_options(args)
    try:
        run = RunConfig.model_validate(tree)
    except ValidationError as exc:
        raise UsageError(option_error(exc)) from None
    return run, verbose


def flag_of(path: tuple[str, ...]) -> str:
    """An option's flag (or its SECTION.FIELD key when it has none)."""
    return next((f for f, (p, _) in run_flags().items() if p == tuple(path)), ".".join(path))


def resumed(run: RunConfig, args: argparse.Namespace) -> RunConfig:
    """`--resume RUN`: the chain's own options, checked against those given beside it."""
    from eval_pipeline.dagster_home import local_instance
    from eval_pipeline.ops.resume import ResumeError, resumed_config

    given, _ = given_options(args)
    try:
        return resumed_config(local_instance(), str(run.paths.resume), given, flag_of)
    except ResumeError as exc:
        raise UsageError(str(exc)) from None


def option_error(exc: ValidationError) -> str:
    """A validation error as one line naming the option (its flag when it has one)."""
    first = exc.errors(include_url=False)[0]
    loc = tuple(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    flags = run_flags().items()
    flag = next((f for f, (p, _) in flags if p == loc), None)
    if flag is None and len(loc) == 1:
        # A section's own model (`graph --graph-uri` builds GraphConfig): its field by name,
        # when exactly one flag ends there.
        named = [f for f, (p, _) in flags if p[-1] == loc[0] and len(p) == 2]
        flag = named[0] if len(named) == 1 else None
    return f"option {flag or '.'.join(loc)}: {message}"


# --- launching and reporting ---------------------------------------------------------------


def _fmt(value: float | None) -> str:
    return "unscored" if value is None else f"{100 * value:.1f}%"


def print_summary(run_dir: Path) -> None:
    from eval_pipeline.score.coverage_meaning import coverage_meaning

    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    for tier, s in summary["tiers"].items():
        c, cov = s["counts"], s["coverage"]
        # Tier-2 evidence is never a user turn: only the all-evidence variant applies there.
        variant = "upstream" if tier == "1" else "all"
        recall = s["retrieval"]["turn"][variant]["recall_any@5"]["mean"]
        tokens = s["efficiency"]["median_payload_tokens_covered"]
        tokens_text = "n/a" if tokens is None else f"{tokens:g}"
        print(
            f"tier {tier}: {c['questions']} questions, coverage "
            f"{_fmt(cov['rate'] if cov else None)} "
            f"({c['covered']} covered, {c['not_covered']} not, {c['unscored']} unscored), "
            f"turn recall_any@5 ({variant}) {_fmt(recall)}, "
            f"median payload tokens (covered) {tokens_text}, "
            f"abstention {s['abstention']['questions']} apart"
        )
        if s.get("funnel"):  # where the questions that were not covered failed
            print(f"tier {tier} {funnel_line(s['funnel'])}")
        if s.get("arms"):  # --arms: where the system sits between floor and ceiling
            print(f"tier {tier} reference arms: {s['arms']['position']['overall']}")
    meaning = coverage_meaning(manifest.get("pins"))
    if meaning:  # what "covered" means when no model read or judged
        print(meaning)
    for line in judge_lines(run_dir):
        print(line)
    for line in protocol_lines(run_dir):
        print(line)
    canaries = canary_line(summary)
    if canaries:
        print(canaries)


def funnel_line(funnel: dict) -> str:
    """Answerable questions not covered, by the stage they failed at (abstention apart)."""
    lost = funnel["answerable"]
    stages = ", ".join(f"{s} {lost[s]}" for s in funnel["stages"] if lost.get(s))
    return f"failed at: {stages or 'no stage'} (answerable; see the report's funnel)"


def protocol_lines(run_dir: Path) -> list[str]:
    """The protocol checks' statuses in a line, and each failed one's detail."""
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    raw = manifest.get("protocol")
    head = protocol.summary_line(raw)
    if head is None:
        return []
    failed = [(n, s) for n, s in protocol.read_map(raw).items() if s.status == "failed"]
    return [head] + [f"  {name}: {s.detail}" for name, s in failed]


def canary_line(summary: dict) -> str | None:
    """The planted canaries' one line (`score.canaries`): none planted, none said."""
    from eval_pipeline.score.canaries import canary_verdict

    verdict, line = canary_verdict(summary.get("canaries"))
    return None if verdict == "off" else line


def judge_lines(run_dir: Path) -> list[str]:
    """The run's judge, its verdict method and checked kappa, and every bias its check
    found: named on every judged run (issue: a judge's bias travels with its scores)."""
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    judge = manifest.get("pins", {}).get("judge") or {}
    pin = judge.get("agreement")
    if not isinstance(pin, dict):
        return []
    # Which method decided, and whether asked for or the judge's default (`pins.judge.
    # verdict`); an older bundle has only the method's name.
    chosen = judge.get("verdict") or {}
    verdict = chosen.get("text") or (judge.get("method") or {}).get("verdict")
    head = f"judge {judge.get('model')}" + (f", verdict {verdict}" if verdict else "")
    if pin.get("status") != "checked":
        return [f"{head}: no agreement check (eval-pipeline judge-check)"]
    k = pin.get("kappa")
    out = [f"{head}: kappa {'undefined' if k is None else f'{k:.2f}'} on its check"]
    out += [f"  judge bias: {b}" for b in pin.get("biased_probes") or []]
    return out


def cmd_run(args: argparse.Namespace) -> int:
    from eval_pipeline import servers
    from eval_pipeline.dagster_home import local_instance
    from eval_pipeline.llm import ensure_no_confident_upload
    from eval_pipeline.ops.chain import outcome_of
    from eval_pipeline.ops.jobs import launch
    from eval_pipeline.preflight import preflight

    run, verbose = run_config_from_args(args)
    rerun = rerun_options(args)
    if run.paths.resume:
        run = resumed(run, args)
    # Refuse before anything runs, whatever the judge: deepeval would upload results.
    ensure_no_confident_upload()
    # Every option checked before any run is launched, so before the graph is wiped.
    preflight(run)
    from eval_pipeline.progress import remember_terminal

    remember_terminal()  # before a step's compute-log capture hides the terminal
    scope = None
    try:
        # Servers this run starts are stopped or announced at its end (`servers.py`).
        with servers.announced(
            "eval-pipeline run",
            keep_graph=run.graph.keep_running,
            used_roots=servers.embedded_roots(
                run.graph.data_dir, run.corpus.batches, external=bool(run.graph.uri)
            ),
        ) as scope:
            result = launch(local_instance(), run, verbose=verbose, trigger="cli")
    except KeyboardInterrupt:  # before the chain began or after it ended: nothing of it runs
        for line in scope.lines if scope else []:
            print(line, file=sys.stderr)
        print("eval-pipeline: interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
    # What stays running, after the stage lines and before the summary: stdout's last line
    # stays the bundle, stderr's last line the error when there is one.
    for line in scope.lines:
        print(line, file=sys.stderr)
    outcome = outcome_of(result)
    if outcome is None:
        print(
            f"eval-pipeline: error: the chain run {result.run_id} ended without an outcome",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if getattr(args, JSON, False):
        return report_json(outcome, rerun)
    return report(outcome, rerun)


def report_json(outcome: Any, rerun: list[str] | None = None) -> int:
    """`report`'s lines on stderr, one `runs.outcome.RunOutput` document on stdout."""
    import contextlib

    from eval_pipeline.runs.listing import entry_of
    from eval_pipeline.runs.load import BundleError, load_run
    from eval_pipeline.runs.outcome import RunOutput, RunRepeat, dumps

    with contextlib.redirect_stdout(sys.stderr):
        code = report(outcome, rerun)
    repeats, runs = [], []
    for r in outcome.repeats:
        failed = r.failed
        status = "failed" if failed else "incomplete" if r.incomplete else "complete"
        repeats.append(
            RunRepeat(
                run_dir=r.run_dir,
                status=status,
                failed_stage=failed.name if failed else None,
                error=failed.error if failed else None,
            )
        )
        if r.run_dir:
            try:
                runs.append(entry_of(load_run(r.run_dir)))
            except BundleError as exc:  # said in the document, never a traceback
                repeats[-1].error = repeats[-1].error or str(exc)
    names = {
        EXIT_OK: "complete",
        EXIT_INCOMPLETE: "incomplete",
        EXIT_REFUSED: "refused",
        EXIT_INTERRUPTED: "interrupted",
    }
    first = Path(runs[0].path) / "report.html" if runs else None
    doc = RunOutput(
        outcome=names.get(code, "failed"),  # type: ignore[arg-type]
        exit_code=code,
        error=outcome.refused or outcome.error,
        salt=outcome.salt,
        repeats=repeats,
        runs=runs,
        report=str(first) if first is not None and first.is_file() else None,
    )
    print(dumps(doc))
    return code


def report(outcome: Any, rerun: list[str] | None = None) -> int:
    """Summary, next steps and bundle paths on stdout (the last line a bundle); errors last on
    stderr. Returns the exit code: a refusal or a failure wins over an incomplete run."""
    if outcome.interrupted is not None:
        print(interrupted_line(outcome), file=sys.stderr)
        return EXIT_INTERRUPTED
    if outcome.refused:
        print(f"eval-pipeline: error: {outcome.refused}", file=sys.stderr)
        return EXIT_REFUSED
    if outcome.error:
        print(f"eval-pipeline: error: {outcome.error}", file=sys.stderr)
        return EXIT_FAILED
    run_dirs = [Path(r.run_dir) for r in outcome.repeats if r.run_dir]
    if run_dirs:
        print_summary(run_dirs[0])
        if (run_dirs[0] / "report.html").is_file():
            print(f"report: {run_dirs[0] / 'report.html'}")
        print_next_steps(run_dirs, rerun)
    if len(run_dirs) > 1:
        print(
            f"{len(run_dirs)} repeats (salt {outcome.salt}); calibrate with: "
            + shlex.join([*command("eval-pipeline"), "calibrate", *map(str, run_dirs)])
        )
    for d in run_dirs:
        print(d)
    code = EXIT_OK
    for repeat in outcome.repeats:
        if repeat.failed is not None:
            print(
                f"eval-pipeline: error: stage {repeat.failed.name} failed: {repeat.failed.error}",
                file=sys.stderr,
            )
            code = EXIT_FAILED
        elif repeat.incomplete:
            _print_incomplete(Path(repeat.run_dir) if repeat.run_dir else None)
            code = code if code == EXIT_FAILED else EXIT_INCOMPLETE
    if not run_dirs and code == EXIT_OK:
        print("eval-pipeline: error: the chain wrote no run bundle", file=sys.stderr)
        code = EXIT_FAILED
    return code


def interrupted_line(outcome: Any) -> str:
    """Ctrl-C's one line: where the chain stopped, what it kept, how to go on."""
    stage = outcome.interrupted
    kept = [s.name for r in outcome.repeats for s in r.stages if s.status == "ok"]
    text = f"eval-pipeline: interrupted at {stage.name}"
    text += f"; kept: {', '.join(kept)}" if kept else "; nothing was kept"
    partial = stage.metadata.get("measured")
    if partial:
        text += f" and {partial} measured question(s) of {stage.name}"
    if stage.metadata.get("withdrawn"):
        text += f"; its unfinished bundle was moved to {stage.metadata['withdrawn']}"
    return text + f"; resume with: eval-pipeline run --resume {outcome.chain}"


def _print_incomplete(run_dir: Path | None) -> None:
    info = {}
    if run_dir is not None:
        info = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["incomplete"]
    causes = ", ".join(f"{k} {v}" for k, v in (info.get("by_cause") or {}).items())
    print(
        f"eval-pipeline: run incomplete: {info.get('questions', 0)} question(s) unscored by "
        f"infrastructure failures ({causes}); they are not counted as misses. Bundle: "
        f"{run_dir}",
        file=sys.stderr,
    )


def rerun_options(args: argparse.Namespace) -> list[str]:
    """The options this run was given (its flags, and --config as an absolute path) as they
    would be typed again, without --repeat or --resume: the noise-floor hint repeats exactly
    this run, afresh."""
    out: list[str] = []
    flags = run_flags()
    for flag in args._flags:
        path, field = flags[flag]
        value = getattr(args, "__".join(path))
        if value is None or path in (("repeat", "count"), ("paths", "resume")):
            continue
        if _plain(field.annotation) is bool:
            out.append(flag if value else f"--no-{flag.removeprefix('--')}")
        else:
            out += [flag, str(value)]
    if getattr(args, "config", None):
        out += ["--config", str(Path(args.config).resolve())]
    return out


def print_next_steps(run_dirs: list[Path], rerun: list[str] | None = None) -> None:
    """What to do next, each a command that runs as printed (a placeholder is in capitals)."""
    from eval_pipeline.dagster_home import ensure_dagster_home
    from eval_pipeline.runs.load import BundleError, load_run
    from eval_pipeline.runs.select import previous_comparable_run

    run = run_dirs[-1]
    home = ensure_dagster_home()
    cli = command("eval-pipeline")
    try:
        base = previous_comparable_run(run.parent, load_run(run))
    except (BundleError, OSError):
        base = None
    print("next:")
    if base is not None:
        print(
            f"  compare with the last:    {shlex.join([*cli, 'compare', str(base.path), str(run)])}"
        )
    else:
        print(
            f"  compare with a baseline:  {shlex.join([*cli, 'compare', 'BASELINE_RUN', str(run)])}"
        )
    if len(run_dirs) == 1 and rerun is not None:
        print("  measure the noise floor:  " + shlex.join([*cli, "run", "--repeat", "3", *rerun]))
    ui = shlex.join([*command("dagster"), "dev", "-m", "eval_pipeline.definitions"])
    print(f"  browse it in the UI:      DAGSTER_HOME={shlex.quote(str(home))} {ui}")


# --- the reference, generated ---------------------------------------------------------------

DOCS_BEGIN = (
    "<!-- BEGIN run-options: generated by `python -m eval_pipeline.run_cli docs/cli.md` -->"
)
DOCS_END = "<!-- END run-options -->"


def _default_text(field: FieldInfo) -> str:
    if "env" in _extra(field):  # the deployment's environment decides (config.GraphConfig)
        return f"`${_extra(field)['env']}`"
    if field.default_factory is not None:
        value = field.default_factory()
        return "—" if isinstance(value, dict | list) and not value else f"`{value}`"
    return "—" if field.default is None else f"`{field.default}`"


def options_markdown() -> str:
    """Every option of a chain, section by section, as docs/cli.md shows them: its flag
    (if it has one), its key in a --config section and in the Dagster resource, its default
    and what it means — all read off RunConfig."""
    flags = {path: flag for flag, (path, _) in run_flags().items()}
    out = [
        DOCS_BEGIN,
        "",
        "### Run options",
        "",
        "Every option of a chain is a field of `RunConfig` (`eval_pipeline/config.py`), in one "
        "of the sections below. It is the flag shown, the key `SECTION.FIELD` in a `--config` "
        "file (as `SECTION: {FIELD: value}`, or by the flag's name at the top level: `top-k: "
        "5`), and `resources.SECTION.config.FIELD` in the Dagster run config the Launchpad "
        "shows for `eval_chain`. A field without a flag is set in a file or the Launchpad. A "
        "model role (`reconcile.model`, `retrieval.reader`, `retrieval.agent`, "
        "`scoring.judge`) has `model` (PROVIDER:MODEL) and the settings `timeout_s`, "
        "`concurrency`, `max_tokens`, `structured_output` (unset: the provider's default).",
        "",
    ]
    for section, cls in SECTIONS.items():
        out += [f"#### `{section}`", "", (cls.__doc__ or "").strip().splitlines()[0], ""]
        out += ["| flag | key | default | meaning |", "|---|---|---|---|"]
        for name, field in cls.model_fields.items():
            if _extra(field).get("cli_prefix"):
                rows = [((section, name, "model"), ModelRole.model_fields["model"])]
                rows += [((section, name, k), ModelRole.model_fields[k]) for k in ROLE_SETTINGS]
                text = field.description
            else:
                rows, text = [((section, name), field)], None
            for path, f in rows:
                flag = flags.get(path)
                meaning = (f.description or "").replace("|", "\\|").replace("<", "\\<")
                if text and path[-1] == "model":
                    meaning = text
                out.append(
                    f"| {f'`{flag}`' if flag else '—'} | `{'.'.join(path[1:])}` | "
                    f"{_default_text(f)} | {meaning} |"
                )
        out.append("")
    out += [
        "`--verbose` (not an option of the chain) also prints Dagster's own log lines, and "
        "`--json` prints one JSON document on stdout instead of the summary; "
        "`--config FILE` reads the options from a YAML or JSON file, and an option given on "
        "the command line wins over the file. An unknown key or a bad value is refused with "
        "one line naming the option, before anything runs.",
        "",
        DOCS_END,
    ]
    return "\n".join(out)


def write_reference(path: Path) -> bool:
    """Replace the generated part of `path`; True when it changed."""
    text = path.read_text(encoding="utf-8")
    start, end = text.index("<!-- BEGIN run-options"), text.index(DOCS_END) + len(DOCS_END)
    new = text[:start] + options_markdown() + text[end:]
    path.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    sys.exit(0 if not write_reference(Path(sys.argv[1])) else 1)
