"""One run configuration: `RunConfig` is the only place an option of a chain is stated. The
flags of `eval-pipeline run`, the keys of a --config file and the Dagster run config of the
jobs all come from it, and a value is checked the same way whichever way it came in."""

from __future__ import annotations

import argparse
from typing import Any

import dagster as dg
import pytest
from dagster._config import ConfigTypeKind
from pydantic import BaseModel

from eval_pipeline.cli import build_parser
from eval_pipeline.config import SECTIONS, ModelRole, RunConfig
from eval_pipeline.definitions import defs
from eval_pipeline.run_cli import UsageError, config_tree, run_config_from_args, run_flags

OWN_FLAGS = {"-h", "--help", "--config", "--verbose", "--json"}  # the CLI's own, not the chain's


def run_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def leaves(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    out = set()
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out |= leaves(kind, (*prefix, name))
        else:
            out.add((*prefix, name))
    return out


def test_every_flag_of_run_is_a_field_of_the_run_configuration():
    parser_flags = {
        flag for action in run_parser()._actions for flag in action.option_strings
    } - OWN_FLAGS
    aliases = {a for _, field in run_flags().values() for a in _aliases(field)}
    # A switch that is on by default is turned off by its `--no-` spelling (`--no-canaries`).
    negated = {
        f"--no-{flag[2:]}" for flag, (_, field) in run_flags().items() if field.default is True
    }
    assert negated == {"--no-canaries", "--no-keep-graph-running"}
    assert parser_flags == set(run_flags()) | aliases | negated
    assert "--reconciler" in aliases  # --memory's other spelling
    fields = leaves(RunConfig)
    for flag, (path, _) in run_flags().items():
        assert path in fields, flag


def _aliases(field: Any) -> list[str]:
    return list((field.json_schema_extra or {}).get("aliases", []))


def test_a_flag_says_what_its_field_says():
    by_flag = {f: a for a in run_parser()._actions for f in a.option_strings}
    for flag, (path, field) in run_flags().items():
        action = by_flag[flag]
        assert action.dest == "__".join(path)
        assert field.description and action.help.startswith(field.description), flag
    assert by_flag["--scope"].choices == ["question", "batch"]
    assert by_flag["--judge-structured-output"].choices == ["json_schema", "json_object", "prompt"]
    assert by_flag["--top-k"].type is int and by_flag["--judge-timeout"].type is float


def _schema_fields(config_type: Any) -> set[tuple[str, ...]]:
    """Leaf paths of a Dagster config type (Shape fields, recursively)."""
    out = set()
    for name, field in config_type.fields.items():
        inner = field.config_type
        if inner.kind == ConfigTypeKind.NONEABLE:
            inner = inner.inner_type
        if ConfigTypeKind.is_shape(inner.kind):
            out |= {(name, *p) for p in _schema_fields(inner)}
        else:
            out.add((name,))
    return out


@pytest.mark.parametrize("job", ["eval_chain", "eval_stage"])
def test_the_dagster_run_config_is_the_run_configuration(job):
    """Each section is the typed, nested config of the resource of its name: no JSON strings,
    nothing added or left out, in the job the Launchpad shows and in the stages' job."""
    schema = defs.resolve_job_def(job).run_config_schema.config_type
    resources = schema.fields["resources"].config_type
    for name, section in SECTIONS.items():
        config = resources.fields[name].config_type.fields["config"].config_type
        assert _schema_fields(config) == leaves(section), name
    roles = resources.fields["retrieval"].config_type.fields["config"].config_type
    reader = roles.fields["reader"].config_type
    assert set(reader.fields) == set(ModelRole.model_fields)


def test_a_configuration_is_valid_run_config_of_the_chain():
    run = RunConfig.model_validate(
        {"corpus": {"sample": 8, "tier": "all"}, "scoring": {"judge": {"model": "local"}}}
    )
    job = defs.resolve_job_def("eval_chain")
    assert job.run_config_schema.config_type  # resolvable
    result = dg._config.validate_config(
        job.run_config_schema.config_type, {"resources": run.resources_config()}
    )
    assert result.success, result.errors


def parse(*argv: str) -> RunConfig:
    return run_config_from_args(run_parser().parse_args(list(argv)))[0]


def test_flags_file_keys_and_sections_give_the_same_configuration(tmp_path):
    flat = tmp_path / "flat.yaml"
    flat.write_text("sample: 12\ntop-k: 5\njudge-timeout: 30\nreconciler: consolidating\n")
    nested = tmp_path / "nested.yaml"
    nested.write_text(
        "corpus: {sample: 12}\nretrieval: {top_k: 5}\n"
        "scoring: {judge: {timeout_s: 30}}\nreconcile: {reconciler: consolidating}\n"
    )
    by_flags = parse("--sample", "12", "--top-k", "5", "--judge-timeout", "30",
                     "--reconciler", "consolidating")  # fmt: skip
    assert parse("--config", str(flat)) == by_flags == parse("--config", str(nested))
    assert by_flags.retrieval.top_k == 5 and by_flags.scoring.judge.timeout_s == 30.0


def test_the_command_line_wins_over_the_file(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("top_k: 5\nseed: 3\n")
    run = parse("--config", str(cfg), "--top-k", "7")
    assert (run.retrieval.top_k, run.corpus.seed) == (7, 3)


def test_an_unknown_key_is_one_line_naming_it_and_the_valid_ones(tmp_path):
    with pytest.raises(UsageError, match="unknown key 'top-kk'.*top-k") as err:
        config_tree({"top-kk": 5}, tmp_path / "x.yaml")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--top-k", "0"], "option --top-k: "),
        (["--judge-timeout", "0"], "option --judge-timeout: "),
        (["--reader-concurrency", "0"], "option --reader-concurrency: "),
        (["--reconcile-processes", "0"], "option --reconcile-processes: "),
        (["--reader", "nope:x"], "option --reader: provider 'nope': unknown name"),
        (["--variant", "oracle"], "option --variant: "),
        (["--repeat-salt", "bad salt"], "option --repeat-salt: "),
        (["--retrieval-agent-max-tokens", "-1"], "option --retrieval-agent-max-tokens: "),
    ],
)
def test_a_bad_value_names_its_flag(argv, says):
    with pytest.raises(UsageError, match=says):
        parse(*argv)


def test_a_bad_value_in_a_file_names_its_flag_too(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("retrieval:\n  reader:\n    structured_output: xml\n")
    with pytest.raises(UsageError, match="option --reader-structured-output: must be one of"):
        parse("--config", str(cfg))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("scoring: {judge: {temperature: 1}}", "option scoring.judge.temperature: "),
        ("scoring: {jduge: openai:x}", "option scoring.jduge: "),
    ],
)
def test_an_unknown_role_setting_in_a_file_is_one_line_naming_it(tmp_path, text, says):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(text + "\n")
    with pytest.raises(UsageError, match=says):
        parse("--config", str(cfg))


def test_an_option_without_a_flag_is_still_a_file_key(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("retrieval:\n  max_steps: 3\n  options: {rank_by: bm25}\n")
    run = parse("--config", str(cfg))
    assert run.retrieval.max_steps == 3 and run.retrieval.options == {"rank_by": "bm25"}


def test_the_cli_reference_is_generated_from_the_run_configuration():
    """docs/cli.md's run options are `options_markdown()` itself: the reference cannot drift
    from the options (regenerate: `python -m eval_pipeline.run_cli docs/cli.md`)."""
    from eval_pipeline.run_cli import DOCS_END, options_markdown
    from eval_pipeline.settings import REPO_DIR

    text = (REPO_DIR / "docs" / "cli.md").read_text(encoding="utf-8")
    start = text.index("<!-- BEGIN run-options")
    assert text[start : text.index(DOCS_END) + len(DOCS_END)] == options_markdown()
    for flag in run_flags():
        assert f"`{flag}`" in text, flag


# --- a config file read strictly (issue 28, finding 7) -----------------------------------------


@pytest.mark.parametrize(
    ("text", "says"),
    [
        # An alias is refused before it is expanded: a 456-byte alias bomb reached 3.3 GB.
        ("base: &n 5\nsample: *n\n", "aliases (*name) are refused"),
        ("sample: 5\nseed: 1\nsample: 6\n", "key 'sample' given twice"),
        ("top-k: 5\ntop_k: 6\n", "'top_k' and 'top-k' set the same option"),
        ("retrieval: {top-k: 5}\ntop_k: 6\n", "set the same option"),
        ("retrieval: {options: " + "[" * 5_000 + "]" * 5_000 + "}\n", "nested deeper than 32"),
        ("retrieval:\n  options: " + "{a: " * 40 + "1" + "}" * 40 + "\n", "nested deeper than 32"),
        ("graph: {wait_s: .inf}\n", "graph.wait_s is inf (not a finite number)"),
        # Strict types: a value of another type is refused, never coerced.
        ("sample: true\n", "option --sample: Input should be a valid integer"),
        ("sample: 10.0\n", "option --sample: Input should be a valid integer"),
        ("sample: '10'\n", "option --sample: Input should be a valid integer"),
        ("canaries: 'no'\n", "option --canaries: Input should be a valid boolean"),
    ],
)
def test_a_config_file_is_read_strictly(tmp_path, text, says):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as err:
        parse("--config", str(cfg))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_config_file_that_is_not_utf8_is_one_line(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_bytes(b"sample: 5\n# caf\xe9\n")
    with pytest.raises(UsageError, match=r"--config .*run.yaml: not UTF-8 text \(byte 15"):
        parse("--config", str(cfg))


def test_an_int_is_still_a_float_under_strict_types(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("wait-for-graph: 5\njudge-timeout: 30\n", encoding="utf-8")
    run = parse("--config", str(cfg))
    assert run.graph.wait_s == 5.0 and run.scoring.judge.timeout_s == 30.0


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--label", "x" * 300], "option --label: String should have at most 64 characters"),
        (["--label", "a\nb"], "option --label: must not hold a newline"),
        (["--runs-dir", "/tmp/runs\n/etc"], "option --runs-dir: must not hold a newline"),
    ],
)
def test_a_label_or_runs_dir_that_would_break_the_bundle_path_is_refused(argv, says):
    """Issue 28, finding 9: a 300-character label failed with ENAMETOOLONG after the graph
    was rebuilt; a newline in --runs-dir broke "the bundle path is the last line"."""
    with pytest.raises(UsageError, match=says):
        parse(*argv)
