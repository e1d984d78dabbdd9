"""`eval-pipeline runs`: every directory of the runs dir listed (an unreadable one in one line),
keys and headline numbers, the comparable ones ranked, CSV and JSON exports that agree."""

from __future__ import annotations

import csv
import io
import json

import pytest

from eval_pipeline.runs import cli
from eval_pipeline.runs.calibrate import floor_key
from eval_pipeline.runs.listing import RunsListing, sort_entries
from eval_pipeline.runs.load import load_run
from eval_pipeline_tests.runs.synthetic import (
    BASE_PINS,
    PIN_CHANGES,
    outcomes,
    set_pin,
    write_run,
)


@pytest.fixture
def runs_dir(tmp_path):
    """Three comparable runs (60%, 90%, and 7 of 9 scored under another reconciler), one run
    of another scope, a foreign directory, and what compare and calibrate keep beside the
    bundles."""
    d = tmp_path / "runs"
    low = write_run(d, outcomes("q", [True] * 6 + [False] * 4, tokens=300), label="low")
    high = write_run(d, outcomes("q", [True] * 9 + [False], tokens=500), label="high")
    other_cfg = set_pin(BASE_PINS, "reconciler", {"name": "none", "version": "1"})
    mid = write_run(
        d, outcomes("q", [True] * 7 + [None] + [False] * 2), label="mid", pins=other_cfg
    )
    scope = write_run(
        d, outcomes("q", [True] * 10), label="scope", pins=set_pin(BASE_PINS, *PIN_CHANGES["scope"])
    )
    (d / "not-a-run").mkdir()
    (d / "not-a-run" / "manifest.json").write_text("{ broken")
    (d / "comparisons").mkdir()
    (d / "noise_floors").mkdir()
    return d, {"low": low, "high": high, "mid": mid, "scope": scope}


def _json(capsys, *argv):
    code = cli.main(["runs", *argv])
    out = capsys.readouterr().out
    return code, RunsListing.model_validate(json.loads(out))


def test_lists_every_run_and_the_foreign_directory_in_one_line(runs_dir, capsys):
    d, runs = runs_dir
    code = cli.main(["runs", "--runs-dir", str(d)])
    got = capsys.readouterr()
    assert code == 0 and got.err == ""
    lines = got.out.strip().splitlines()
    assert lines[0].split()[:3] == ["run", "status", "t1"]
    names = [line.split()[0] for line in lines[1:]]
    # Newest first, the unreadable directory last, the comparisons/noise floors not at all.
    assert names == [runs["scope"].name, runs["mid"].name, runs["high"].name, runs["low"].name,
                     "not-a-run"]  # fmt: skip
    assert lines[-1].startswith("not-a-run  unreadable: not a complete run bundle: ")
    high = next(line for line in lines if line.startswith(runs["high"].name))
    assert "90.0% (9/10)" in high and "extractive/fulltext k=10" in high
    mid = next(line for line in lines if line.startswith(runs["mid"].name))
    assert "77.8% (7/9)" in mid  # the unscored question is out of the rate, as in summary.json


def test_json_has_keys_headlines_and_comparable_counts(runs_dir, capsys):
    d, runs = runs_dir
    code, listing = _json(capsys, "--runs-dir", str(d), "--json")
    assert code == 0 and listing.runs_dir == str(d)
    by = {e.name: e for e in listing.runs}
    low, high, mid, scope = (by[runs[k].name] for k in ("low", "high", "mid", "scope"))
    assert low.readable and low.label == "low" and low.status == "complete"
    assert low.configuration_key == floor_key(load_run(runs["low"]))
    assert low.comparability_key == high.comparability_key == mid.comparability_key
    assert scope.comparability_key != low.comparability_key
    assert low.configuration_key == high.configuration_key != mid.configuration_key
    assert (low.comparable_runs, mid.comparable_runs, scope.comparable_runs) == (2, 2, 0)
    t = high.tier("1")
    assert (t.questions, t.covered, t.not_covered, t.unscored) == (10, 9, 1, 0)
    assert t.coverage == pytest.approx(0.9) and t.recall_any_at_5 == pytest.approx(0.9)
    assert t.median_payload_tokens == 500
    assert mid.tier("1").unscored == 1 and mid.configuration["reconciler"] == "none"
    bad = by["not-a-run"]
    assert not bad.readable and "lacks results.jsonl" in bad.error and bad.tiers == []


def test_comparable_with_ranks_a_leaderboard(runs_dir, capsys):
    d, runs = runs_dir
    code, listing = _json(
        capsys, "--runs-dir", str(d), "--comparable-with", runs["low"].name, "--sort", "coverage",
        "--json",
    )  # fmt: skip
    assert code == 0 and listing.comparable_with == str(runs["low"])
    assert [e.label for e in listing.runs] == ["high", "mid", "low"]  # scope and foreign: out
    _, by_tokens = _json(
        capsys, "--runs-dir", str(d), "--comparable-with", str(runs["low"]), "--sort", "tokens",
        "--json",
    )  # fmt: skip
    assert [e.label for e in by_tokens.runs][0] == "mid"  # 100 tokens (synthetic default)
    # The run of another scope is comparable with nothing here but itself.
    _, alone = _json(
        capsys, "--runs-dir", str(d), "--comparable-with", runs["scope"].name, "--json"
    )
    assert [e.label for e in alone.runs] == ["scope"]


def test_a_run_without_a_number_ranks_after_those_with_one(runs_dir, capsys):
    d, _ = runs_dir
    _, listing = _json(capsys, "--runs-dir", str(d), "--json")
    entries = list(listing.runs)
    entries[0].tiers = []  # e.g. a tier the run did not measure
    ranked = sort_entries(entries, "coverage", "1")
    assert ranked[-2] is entries[0] and not ranked[-1].readable


def test_csv_agrees_with_json_and_leaves_unmeasured_cells_empty(runs_dir, capsys):
    d, runs = runs_dir
    assert cli.main(["runs", "--runs-dir", str(d), "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    _, listing = _json(capsys, "--runs-dir", str(d), "--json")
    assert [r["name"] for r in rows] == [e.name for e in listing.runs]
    high = next(r for r in rows if r["label"] == "high")
    assert float(high["tier1_coverage"]) == pytest.approx(0.9)
    assert high["tier1_covered"] == "9" and high["comparable_runs"] == "2"
    assert high["reconciler"] == "extractive" and high["top_k"] == "10"
    bad = next(r for r in rows if r["name"] == "not-a-run")
    assert bad["readable"] == "False" and bad["tier1_coverage"] == "" and bad["error"]


def test_empty_or_missing_runs_dir_and_a_bad_reference(tmp_path, capsys):
    assert cli.main(["runs", "--runs-dir", str(tmp_path / "none")]) == 0
    got = capsys.readouterr()
    assert got.out == "" and "no runs in" in got.err
    code, listing = _json(capsys, "--runs-dir", str(tmp_path / "none"), "--json")
    assert code == 0 and listing.runs == []
    code = cli.main(["runs", "--runs-dir", str(tmp_path), "--comparable-with", "nope"])
    assert code == 2 and "no such run directory: nope" in capsys.readouterr().err


def test_an_incomplete_run_says_so_on_its_line_and_in_json(tmp_path, capsys):
    from eval_pipeline_tests.runs.test_cli_outcome import _infra

    rows = outcomes("q", [True] * 5)
    rows[0] = _infra(rows[0])
    run = write_run(tmp_path, rows, label="outage")
    assert cli.main(["runs", "--runs-dir", str(tmp_path)]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()[1:]
    assert line.startswith(run.name) and "INCOMPLETE (1 unscored)" in line
    assert "100.0% (4/4)" in line  # the unscored question is out of the rate, not a miss
    _, listing = _json(capsys, "--runs-dir", str(tmp_path), "--json")
    (entry,) = listing.runs
    assert entry.status == "incomplete" and entry.unscored_infrastructure == 1
