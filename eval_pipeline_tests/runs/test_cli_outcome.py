"""`compare`'s exit codes and `--fail-on`, the incomplete line in its terminal output, and the
`--json` documents of compare, calibrate and report, on synthetic bundles with the real layout.
Every `--json` test parses the whole of stdout as one document: nothing else may be there."""

from __future__ import annotations

import json

import pytest

from eval_pipeline.runs import cli, outcome
from eval_pipeline.runs.calibrate import save_noise_floor
from eval_pipeline.runs.outcome import CompareOutput, exit_code, parse_fail_on
from eval_pipeline_tests.runs.synthetic import (
    BASE_PINS,
    PIN_CHANGES,
    hand_floor,
    outcomes,
    row,
    set_pin,
    write_run,
)

COVERED = [True] * 20
REGRESSION = [False] * 8 + [True] * 12  # -40 pp, McNemar p = 0.0078


def _infra(r: dict) -> dict:
    """The row as a graph outage left it: unscored, an infrastructure failure."""
    r = dict(r, covered=None)
    r["metrics"]["answer_judge"].update(score=None, passed=None, error="graph down")
    r["infra_failures"] = [{"stage": "retrieval", "cause": "graph_server", "error": "down"}]
    return r


def _runs(tmp_path, cand_values, *, incomplete=0, cand_pins=None):
    base = write_run(tmp_path, outcomes("q", COVERED), label="base")
    rows = outcomes("q", cand_values)
    rows = [_infra(r) if i < incomplete else r for i, r in enumerate(rows)]
    cand = write_run(tmp_path, rows, label="cand", pins=cand_pins)
    floor = save_noise_floor(hand_floor(base, 5.0), tmp_path / "floor.json")
    return base, cand, floor


def _compare(capsys, base, cand, *extra):
    code = cli.main(["compare", str(base), str(cand), *extra])
    got = capsys.readouterr()
    return code, got.out, got.err


def _doc(out: str) -> dict:
    doc = json.loads(out)  # the whole of stdout is one document
    CompareOutput.model_validate(doc)
    return doc


# --- the rule --------------------------------------------------------------------------------


def test_fail_on_parses_conditions_and_refuses_an_unknown_one():
    assert parse_fail_on("regressed,incomplete,refused") == outcome.DEFAULT_FAIL_ON
    assert parse_fail_on("inconclusive, regressed") == ("regressed", "inconclusive")
    assert parse_fail_on("none") == () == parse_fail_on("")
    with pytest.raises(ValueError, match=r"unknown condition 'regresed'; valid: regressed"):
        parse_fail_on("regresed")


def test_exit_code_precedence_and_never_one():
    every = outcome.CONDITIONS
    assert exit_code(["regressed", "incomplete"], every) == 5
    assert exit_code(["incomplete", "inconclusive"], every) == 4
    assert exit_code(["inconclusive"], every) == 6
    assert exit_code(["refused"], every) == 3
    assert exit_code(["regressed"], ("incomplete",)) == 0  # not chosen: no failure
    assert 1 not in outcome.CODES.values()  # a traceback's code never reads as a verdict


# --- compare's exit codes --------------------------------------------------------------------


def test_regressed_exits_5_and_json_holds_the_comparison(tmp_path, capsys):
    base, cand, floor = _runs(tmp_path, REGRESSION)
    code, out, err = _compare(capsys, base, cand, "--noise-floor", str(floor), "--json")
    assert code == outcome.EXIT_REGRESSED == 5
    doc = _doc(out)
    assert doc["outcome"] == "regressed" and doc["exit_code"] == 5
    assert doc["conditions"] == ["regressed"] and doc["failed_on"] == ["regressed"]
    assert doc["fail_on"] == ["regressed", "incomplete", "refused"]
    tier = doc["comparison"]["tiers"][0]
    assert tier["delta_pp"] == pytest.approx(-40.0) and tier["classification"] == "real"
    assert doc["comparison"]["verdict"] == "REGRESSED"
    saved = json.loads((tmp_path / "comparisons").glob("*/comparison.json").__next__().read_text())
    assert doc["comparison"] == saved  # the document's comparison is comparison.json
    assert doc["base"]["status"] == doc["candidate"]["status"] == "complete"
    assert "compare fails on regressed (exit 5" in err


def test_regressed_does_not_fail_when_not_chosen(tmp_path, capsys):
    base, cand, floor = _runs(tmp_path, REGRESSION)
    code, out, err = _compare(
        capsys, base, cand, "--noise-floor", str(floor), "--fail-on", "incomplete"
    )
    assert code == 0 and "verdict: REGRESSED" in out and err == ""


def test_improved_exits_zero_and_inconclusive_only_when_chosen(tmp_path, capsys):
    base = write_run(tmp_path, outcomes("q", REGRESSION), label="base")
    cand = write_run(tmp_path, outcomes("q", COVERED), label="cand")
    floor = save_noise_floor(hand_floor(base, 5.0), tmp_path / "floor.json")
    code, out, _ = _compare(capsys, base, cand, "--noise-floor", str(floor), "--json")
    assert code == 0 and _doc(out)["outcome"] == "improved" and _doc(out)["conditions"] == []

    # No floor: NOT CALIBRATED, INCONCLUSIVE: a pass by default, a failure when asked.
    code, out, _ = _compare(capsys, base, cand, "--json")
    assert code == 0 and _doc(out)["outcome"] == "inconclusive"
    code, out, err = _compare(capsys, base, cand, "--json", "--fail-on", "inconclusive")
    assert code == outcome.EXIT_INCONCLUSIVE == 6
    assert _doc(out)["failed_on"] == ["inconclusive"] and "exit 6" in err


def test_incomplete_exits_4_and_the_terminal_says_so(tmp_path, capsys):
    # Three of the candidate's questions unscored by a graph outage, the rest unchanged.
    base, cand, floor = _runs(tmp_path, COVERED, incomplete=3)
    code, out, err = _compare(capsys, base, cand, "--noise-floor", str(floor))
    assert code == outcome.EXIT_INCOMPLETE == 4
    assert (
        f"candidate: {cand.name} INCOMPLETE: 3 question(s) unscored by infrastructure "
        "(graph_server 3); left out of every pair"
    ) in out
    assert f"INCOMPLETE: {cand.name} left questions unscored by infrastructure" in out
    assert "17 paired, 3 unscored left out" in out
    assert "compare fails on incomplete (exit 4" in err
    assert out.strip().splitlines()[-1].startswith("report: ")  # still the last line

    code, out, _ = _compare(capsys, base, cand, "--noise-floor", str(floor), "--json")
    doc = _doc(out)
    assert code == 4 and doc["outcome"] == "inconclusive"
    assert doc["conditions"] == ["incomplete", "inconclusive"]
    assert doc["failed_on"] == ["incomplete"]
    assert doc["candidate"] == {
        "name": cand.name,
        "path": str(cand),
        "status": "incomplete",
        "unscored_infrastructure": 3,
        "by_cause": {"graph_server": 3},
    }


def test_regressed_and_incomplete_exit_regressed(tmp_path, capsys):
    base, _, floor = _runs(tmp_path, COVERED)
    rows = outcomes("q", REGRESSION)  # 8 lost, and one more question unscored by an outage
    rows[-1] = _infra(rows[-1])
    cand = write_run(tmp_path, rows, label="cand2")
    code, out, _ = _compare(capsys, base, cand, "--noise-floor", str(floor), "--json")
    doc = _doc(out)
    assert code == 5 and doc["conditions"] == ["regressed", "incomplete"]
    assert doc["failed_on"] == ["regressed", "incomplete"]


def test_refused_exits_3_with_every_pin_in_json_unless_not_chosen(tmp_path, capsys):
    pins = set_pin(set_pin(BASE_PINS, *PIN_CHANGES["scope"]), *PIN_CHANGES["judge.model"])
    base, cand, _ = _runs(tmp_path, COVERED, cand_pins=pins)
    code, out, err = _compare(capsys, base, cand, "--json")
    assert code == outcome.EXIT_REFUSED == 3
    doc = _doc(out)
    assert doc["outcome"] == "refused" and doc["comparison"] is None
    names = [d["name"] for d in doc["refusal"]["differences"]]
    assert names == ["scope", "judge.model"]
    scope = doc["refusal"]["differences"][0]
    assert scope["base"] == "question" and scope["candidate"] == "batch"
    assert scope["line"] == "scope: base 'question' ≠ candidate 'batch'"
    assert "refusing to compare" in err
    code, out, _ = _compare(capsys, base, cand, "--json", "--fail-on", "regressed")
    assert code == 0 and _doc(out)["conditions"] == ["refused"] and _doc(out)["failed_on"] == []


def test_bad_input_exits_2_with_an_error_document(tmp_path, capsys):
    run = write_run(tmp_path, outcomes("q", [True]))
    code, out, err = _compare(capsys, run, tmp_path / "nope", "--json")
    assert code == 2 and "no such run directory" in err
    doc = _doc(out)
    assert doc["outcome"] == "error" and "no such run directory" in doc["error"]
    code, out, err = _compare(capsys, run, run, "--fail-on", "sometimes")
    assert code == 2 and out == ""
    assert err.strip() == (
        "eval-pipeline: error: --fail-on: unknown condition 'sometimes'; valid: regressed, "
        "incomplete, inconclusive, refused, none"
    )


# --- calibrate and report --------------------------------------------------------------------


def test_calibrate_json_is_the_floor_written(tmp_path, capsys):
    one = write_run(tmp_path, outcomes("q", COVERED), label="r1")
    two = write_run(tmp_path, outcomes("q", [False] + [True] * 19), label="r2")
    code = cli.main(["calibrate", str(one), str(two), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["outcome"] == "calibrated"
    written = json.loads(open(doc["noise_floor"]).read())
    assert doc["floor"] == written
    assert doc["floor"]["tiers"]["1"]["coverage"]["floor_pp"] == pytest.approx(5.0)

    other = write_run(tmp_path, outcomes("x", COVERED), label="other")
    code = cli.main(["calibrate", str(one), str(other), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 3 and doc["outcome"] == "refused" and doc["refusal"]


def test_report_json_names_the_report(tmp_path, capsys):
    run = write_run(tmp_path, [row("q0", True), row("q1", False)])
    assert cli.main(["report", str(run), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["outcome"] == "written" and doc["report"] == str(run / "report.html")
    assert (run / "report.html").is_file()
    assert cli.main(["report", str(tmp_path / "nope"), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["outcome"] == "error"


# --- the documents' published schemas --------------------------------------------------------


def test_the_committed_cli_schemas_are_what_the_models_generate(tmp_path, capsys):
    from eval_pipeline.runs.output_schemas import SCHEMA_DIR, SCHEMAS, main, stale

    assert stale() == [], "regenerate: python -m eval_pipeline.runs.output_schemas"
    assert sorted(p.name for p in SCHEMA_DIR.glob("*.schema.json")) == sorted(SCHEMAS)
    out = tmp_path / "cli"
    assert main(["--out", str(out)]) == 0
    (out / "compare.schema.json").write_text("{}\n")
    assert main(["--out", str(out), "--check"]) == 1
    assert "compare.schema.json" in capsys.readouterr().err


def test_a_run_compared_with_itself_is_refused_as_bad_input(tmp_path, capsys):
    """Issue 28, finding 9: `compare RUN RUN` exited 0, every delta 0."""
    run = write_run(tmp_path, outcomes("q", [True, False]))
    code, out, err = _compare(capsys, run, run, "--json")
    assert code == 2 and "same run" in err and len(err.strip().splitlines()) == 1
    assert _doc(out)["outcome"] == "error"
    code, _, err = _compare(capsys, run, tmp_path / ".." / tmp_path.name / run.name)
    assert code == 2 and "same run" in err  # the same directory, spelt another way
