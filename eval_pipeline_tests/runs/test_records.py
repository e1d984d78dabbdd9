"""Typed, versioned bundle records: the shape written is the shape given (plus
schema_version), a mismatch is refused before anything is written and names the field, old
bundles read as version 1, and the published JSON Schemas are what the models generate."""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.failures import InfraFailure
from eval_pipeline.retrieve.results import QueryRecord
from eval_pipeline.runs.bundle import BUNDLE_FILES, write_bundle
from eval_pipeline.runs.compare import compare
from eval_pipeline.runs.load import BundleError, load_run
from eval_pipeline.runs.records import (
    Hypothesis,
    Manifest,
    RecordError,
    ResultRow,
    Summary,
    for_writing,
)
from eval_pipeline.runs.records.manifest import ProtocolStatus, SampleSpecPin
from eval_pipeline.runs.records.results import InfraFailureRecord, Metric, Query
from eval_pipeline.runs.records.schemas import SCHEMA_DIR, SCHEMAS, stale_schemas
from eval_pipeline.runs.records.summary import RateEstimate
from eval_pipeline.runs.records.tier2_summary import IngestionScenario
from eval_pipeline.runs.report import render_run_report
from eval_pipeline.score.gate import MetricResult
from eval_pipeline.score.protocol import CheckStatus
from eval_pipeline.score.stats import RateEstimate as StatsRateEstimate
from eval_pipeline.score.summary import summarize
from eval_pipeline.tier2.ingestion import IngestionResult
from eval_pipeline_tests.runs.synthetic import manifest, outcomes, row, write_run
from eval_pipeline_tests.runs.test_report_readable import TIER2_META, full_rows, goldens_for

LEGACY = Path(__file__).parent / "fixtures" / "legacy-bundle"
MODELS = {
    "manifest.json": Manifest,
    "summary.json": Summary,
    "results.jsonl": ResultRow,
    "hypotheses.jsonl": Hypothesis,
}


def _records(run_dir: Path) -> dict[str, list[dict]]:
    """Each bundle file's records as written (one per JSON file, one per JSONL line)."""
    out = {}
    for name in BUNDLE_FILES:
        text = (run_dir / name).read_text(encoding="utf-8")
        out[name] = (
            [json.loads(text)]
            if name.endswith(".json")
            else [json.loads(line) for line in text.splitlines() if line.strip()]
        )
    return out


def assert_valid_as_written(run_dir: Path) -> None:
    """Every record of the bundle passes its model as a writer must (no unknown field)."""
    for name, records in _records(run_dir).items():
        for n, record in enumerate(records, 1):
            for_writing(MODELS[name], record, f"{run_dir.name}/{name} #{n}")


@pytest.fixture
def tier2_bundle(tmp_path):
    """The synthetic bundle with every part: both tiers, panels, infra failures, abstention."""
    from eval_pipeline_tests.runs.synthetic import write_run_with_goldens

    rows = full_rows()
    return write_run_with_goldens(tmp_path, rows, goldens_for(rows, **TIER2_META)), rows


# --- the shape written ----------------------------------------------------------------------


def test_written_records_are_the_given_dicts_plus_their_schema_version(tier2_bundle):
    run_dir, rows = tier2_bundle
    written = _records(run_dir)
    assert [r.pop("schema_version") for r in written["results.jsonl"]] == [1] * len(rows)
    assert written["results.jsonl"] == rows  # same keys, same values, nothing filled in
    summary = written["summary.json"][0]
    assert summary.pop("schema_version") == Summary.VERSION == 2
    assert "panels" in summary["tiers"]["2"] and "panels" not in summary["tiers"]["1"]
    assert written["manifest.json"][0]["schema_version"] == Manifest.VERSION == 2
    assert list(written["manifest.json"][0])[0] == "schema_version"
    assert {h["schema_version"] for h in written["hypotheses.jsonl"]} == {1}
    assert_valid_as_written(run_dir)


def test_the_models_can_be_given_instead_of_dicts(tmp_path):
    rows = outcomes("q", [True, False])
    run_dir = write_bundle(
        tmp_path,
        manifest=Manifest.model_validate(manifest()),
        rows=[ResultRow.model_validate(r) for r in rows],
        summary=Summary.model_validate(summarize(rows)),
    )
    by_dicts = write_run(tmp_path, rows)
    for name in ("results.jsonl", "summary.json"):
        assert _records(run_dir)[name] == _records(by_dicts)[name]
    assert load_run(run_dir).records.manifest.pins.judge.model == "openai:gpt-4o-mini"


# --- a mismatch: refused before anything is written ------------------------------------------


@pytest.mark.parametrize(
    ("change", "names"),
    [
        (
            lambda m, rows, s: m["pins"]["corpus"].pop("goldens_sha256"),
            "manifest.json: pins.corpus.goldens_sha256: Field required",
        ),
        (
            lambda m, rows, s: rows[1]["metrics"]["answer_judge"].update(score="high"),
            "results.jsonl line 2 (question q1): metrics.answer_judge.score",
        ),
        (
            lambda m, rows, s: rows[0].update(coverd=True),
            "results.jsonl line 1 (question q0): coverd: unknown field",
        ),
        (
            lambda m, rows, s: s["tiers"]["1"]["counts"].update(covered=None),
            "summary.json: tiers.1.counts.covered",
        ),
        (lambda m, rows, s: m.update(schema_version=1), "manifest.json: schema_version"),
        (lambda m, rows, s: rows.append(dict(rows[0])), "question_id 'q0' appears twice"),
    ],
    ids=["missing", "mistyped", "unknown", "summary", "version", "duplicate"],
)
def test_a_mismatch_names_the_record_and_field_and_writes_nothing(tmp_path, change, names):
    rows = outcomes("q", [True, False])
    m, s = manifest(), summarize(rows)
    change(m, rows, s)
    with pytest.raises(RecordError) as err:
        write_bundle(tmp_path / "runs", manifest=m, rows=rows, summary=s)
    assert str(err.value).startswith("run bundle not written: ")
    assert names in str(err.value)
    assert not (tmp_path / "runs").exists()  # not even the runs directory


# --- reading: old bundles, newer bundles -----------------------------------------------------


def test_a_bundle_from_before_versioning_reads_as_version_1(tmp_path):
    """A real bundle written at d822992 (before schema_version), trimmed to three questions
    and the first entry of each keyed map of its summary: it still loads, compares, reports."""
    assert "schema_version" not in (LEGACY / "results.jsonl").read_text()
    run = load_run(LEGACY)
    assert run.records is not None
    versions = {
        run.records.manifest.schema_version,
        run.records.summary.schema_version,
        *(r.schema_version for r in run.records.rows),
        *(h.schema_version for h in run.records.hypotheses),
    }
    assert versions == {1}
    assert run.tiers() == ["1", "2"]
    assert run.records.summary.tiers["2"].panels is not None
    assert compare(run, load_run(LEGACY)).changes == []
    assert "Tier 2" in render_run_report(run)
    assert_valid_as_written(LEGACY)  # its shape is version 1's


def test_a_bundle_without_schema_version_and_later_fields_still_loads(tmp_path):
    run_dir = write_run(tmp_path, outcomes("q", [True, None]))
    for name, records in _records(run_dir).items():
        for record in records:
            record.pop("schema_version")
            if name == "results.jsonl":
                record.pop("notes", None), record.pop("infra_failures", None)
        _rewrite(run_dir / name, records)
    run = load_run(run_dir)
    assert run.records.rows[0].schema_version == 1 and run.records.rows[0].notes == []
    assert "schema_version" not in run.manifest  # the dicts are as read


def test_a_newer_bundle_with_more_fields_loads_and_keeps_them(tmp_path):
    run_dir = write_run(tmp_path, outcomes("q", [True]))
    records = _records(run_dir)
    records["results.jsonl"][0]["new_measure"] = {"x": 1}
    records["manifest.json"][0]["pins"]["new_pin"] = "v"
    for name in ("results.jsonl", "manifest.json"):
        _rewrite(run_dir / name, records[name])
    run = load_run(run_dir)
    assert run.rows[0].model_extra["new_measure"] == {"x": 1}
    assert run.records.manifest.pins.model_extra == {"new_pin": "v"}
    # ... but a writer never writes what the model does not declare.
    with pytest.raises(RecordError, match="manifest.json: pins.new_pin: unknown field"):
        for_writing(Manifest, records["manifest.json"][0], "manifest.json")


def test_a_schema_version_newer_than_the_code_is_refused(tmp_path):
    run_dir = write_run(tmp_path, outcomes("q", [True]))
    records = _records(run_dir)
    records["summary.json"][0]["schema_version"] = Summary.VERSION + 1
    _rewrite(run_dir / "summary.json", records["summary.json"])
    with pytest.raises(BundleError, match="summary.json: schema_version: .*not one this code"):
        load_run(run_dir)


def test_a_malformed_row_names_its_line_question_and_field(tmp_path):
    run_dir = write_run(tmp_path, outcomes("q", [True, False]))
    records = _records(run_dir)
    records["results.jsonl"][1]["covered"] = "maybe"
    _rewrite(run_dir / "results.jsonl", records["results.jsonl"])
    with pytest.raises(BundleError, match=r"results.jsonl line 2 \(question q1\): covered"):
        load_run(run_dir)


def _rewrite(path: Path, records: list[dict]) -> None:
    if path.suffix == ".json":
        path.write_text(json.dumps(records[0], indent=2) + "\n", encoding="utf-8")
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


# --- the parts mirror the domain models they are dumped from ---------------------------------


@pytest.mark.parametrize(
    ("part", "fields"),
    [
        (Metric, set(MetricResult.model_fields)),
        (Query, set(QueryRecord.model_fields)),
        (InfraFailureRecord, set(InfraFailure.model_fields)),
        (IngestionScenario, set(IngestionResult.model_fields) - {"scenario_id"}),
        (RateEstimate, {f.name for f in dataclasses.fields(StatsRateEstimate)}),
        (SampleSpecPin, set(SampleSpec.model_fields)),
        (ProtocolStatus, set(CheckStatus.model_fields)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_record_parts_keep_the_domain_models_fields(part, fields):
    assert set(part.model_fields) == fields


# --- the published JSON Schemas --------------------------------------------------------------


def test_the_committed_json_schemas_are_what_the_models_generate():
    assert stale_schemas() == [], "regenerate: python -m eval_pipeline.runs.records"
    assert sorted(p.name for p in SCHEMA_DIR.glob("*.schema.json")) == sorted(SCHEMAS)


def test_the_schema_check_names_a_stale_file(tmp_path, capsys):
    from eval_pipeline.runs.records.schemas import main

    out = tmp_path / "schemas"
    assert main(["--out", str(out)]) == 0
    schema = json.loads((out / "manifest.schema.json").read_text())
    assert schema["properties"]["schema_version"]["maximum"] == Manifest.VERSION
    assert schema["additionalProperties"] is False
    (out / "summary.schema.json").write_text("{}\n")
    assert main(["--out", str(out), "--check"]) == 1
    assert "summary.schema.json" in capsys.readouterr().err


def test_synthetic_bundles_validate_as_a_writer_writes_them(tier2_bundle, tmp_path):
    run_dir, _ = tier2_bundle
    assert_valid_as_written(run_dir)
    legacy_copy = tmp_path / "legacy"
    shutil.copytree(LEGACY, legacy_copy)
    assert_valid_as_written(legacy_copy)


def test_row_is_the_model_scores_write(tmp_path):
    """`row()` and real score_question rows agree on the fields (no test-only shape)."""
    from eval_pipeline.score.tokens import PayloadTokenizer
    from eval_pipeline_tests.score.test_summary_answerable import _rows

    real = _rows(PayloadTokenizer("o200k_base"))[0]
    assert set(row("q", True)) <= set(real)
    checked = for_writing(ResultRow, copy.deepcopy(real), "row")
    assert {k: v for k, v in checked.items() if k != "schema_version"} == real
