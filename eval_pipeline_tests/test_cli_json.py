"""`--json` on the commands outside runs/: judge-check, corpus, errata verify, and the error
document any command prints on exit 2. Each test parses the whole of stdout as one document."""

from __future__ import annotations

import json

import pytest

from eval_pipeline.cli import main
from eval_pipeline.corpus.errata import bundled_errata
from eval_pipeline.runs.outcome import ErrorOutput
from eval_pipeline.score.judge_check_output import JudgeCheckOutput
from eval_pipeline_tests.corpus.errata_records import agreeing_records, write_records


def _run(capsys, *argv):
    code = main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


def test_judge_check_json_holds_each_methods_agreement(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(tmp_path / "home"))
    out = tmp_path / "check"
    code, stdout, _ = _run(
        capsys, "judge-check", "--judge", "offline", "--no-probes", "--no-invariant",
        "--out", str(out), "--json",
    )  # fmt: skip
    assert code == 0
    doc = JudgeCheckOutput.model_validate(json.loads(stdout))
    (match,) = doc.methods
    assert match.method == "match" and doc.out_dir == str(out)
    written = json.loads((out / "methods" / "match" / "agreement.json").read_text())
    assert json.loads(match.result.model_dump_json()) == written
    assert match.result.kappa.estimate is not None and doc.invariant is None
    assert doc.stored and all(p.endswith(".json") for p in doc.stored)


def test_corpus_json_gives_the_counts(tmp_path, capsys):
    code, stdout, _ = _run(
        capsys, "corpus", "--upstream", "sample", "--out", str(tmp_path / "c"), "--json"
    )
    doc = json.loads(stdout)
    assert code == 0 and doc["outcome"] == "written" and doc["out"] == str(tmp_path / "c")
    assert doc["counts"]["questions_selected"] == 31 and doc["sample_note"] is None


def test_errata_verify_json_says_ok_or_names_each_failure(tmp_path, capsys):
    (errata,) = bundled_errata()
    records = agreeing_records(errata)
    path = write_records(tmp_path / "s.json", records)
    code, stdout, _ = _run(capsys, "errata", "verify", str(path), "--json")
    doc = json.loads(stdout)
    assert code == 0 and doc["outcome"] == "ok" and doc["report"]["failures"] == []
    assert doc["errata"]["sha256"] == errata.digest and doc["report"]["pinned_file"] is False
    records["370a8ff4"]["answer"] = 12
    write_records(path, records)
    code, stdout, _ = _run(capsys, "errata", "verify", str(path), "--json")
    doc = json.loads(stdout)
    assert code == 1 == doc["exit_code"] and doc["outcome"] == "failed"
    assert doc["report"]["failures"] == [
        "370a8ff4: gold_answer_contains: '15' not in the gold answer '12'"
    ]


@pytest.mark.parametrize(
    ("argv", "command", "says"),
    [
        (["run", "--top-k", "0", "--json"], "run", "--top-k"),
        (["errata", "verify", "/nonexistent.json", "--json"], "errata verify", "not found"),
        (["corpus", "--upstream", "/nope.json", "--out", "/tmp/x", "--json"], "corpus", "nope"),
    ],
)
def test_bad_input_with_json_is_one_error_document_and_one_line(capsys, argv, command, says):
    code, stdout, stderr = _run(capsys, *argv)
    doc = ErrorOutput.model_validate(json.loads(stdout))
    assert code == 2 == doc.exit_code and doc.command == command and says in doc.error
    assert stderr.count("\n") == 1 and stderr.startswith("eval-pipeline: error: ")
