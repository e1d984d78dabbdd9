"""HTML reports: self-contained, charts and tables present, unscored shown as "unscored",
the bundle left untouched, comparison files where they belong."""

from __future__ import annotations

import hashlib
import json
import re

from eval_pipeline.runs import cli
from eval_pipeline.runs.bundle import BUNDLE_FILES
from eval_pipeline.runs.compare import Comparison, compare
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.report import (
    render_run_report,
    write_comparison_report,
    write_run_report,
)
from eval_pipeline_tests.runs.synthetic import hand_floor, outcomes, row, write_run

EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)

JUDGE_USAGE = {
    "prices_as_of": "2026-01-01",
    "total_cost_usd": 0.0123,
    "roles": {
        "judge": {
            "role": "judge",
            "provider": "openai",
            "model": "gpt-4o-mini",
            "calls": 42,
            "cache_hits": 2,
            "provider_requests": 40,
            "retries": 1,
            "failures": 0,
            "input_tokens": 12345,
            "output_tokens": 678,
            "cost_usd": 0.0123,
        },
        "reader": {"role": "reader", "provider": "offline", "model": None, "calls": 0},
    },
}


def assert_self_contained(html: str) -> None:
    assert html.startswith("<!DOCTYPE html>")
    assert not EXTERNAL.search(html), EXTERNAL.search(html)
    for tag in ("<script", "<link", "<img", "<iframe", "@import", "url("):
        assert tag not in html.lower(), tag
    assert "<svg" in html and "<table" in html and "<style>" in html


def _digests(run_dir):
    return {
        name: hashlib.sha256((run_dir / name).read_bytes()).hexdigest() for name in BUNDLE_FILES
    }


def _mixed_run(tmp_path):
    rows = [
        *outcomes("m", [True, True, False], qtype="multi-session", tokens=300),
        # A judge outage: a whole question type unscored.
        *outcomes("t", [None, None], qtype="temporal-reasoning", tokens=200),
        row("x0", None, abstention=True, qtype="multi-session"),
    ]
    llm = {"retrieval": None, "reconcile": None, "judge": JUDGE_USAGE}
    return write_run(tmp_path, rows, llm_usage=llm)


def test_run_report_is_self_contained_with_tables_and_charts(tmp_path):
    run_dir = _mixed_run(tmp_path)
    before = _digests(run_dir)
    path = write_run_report(run_dir)
    assert path == run_dir / "report.html"
    html = path.read_text(encoding="utf-8")
    assert_self_contained(html)
    assert html.count("<svg") >= 5  # coverage, two recalls, payload histogram, stage timings
    for heading in (
        "Coverage per question type",
        "Evidence recall per question type",
        "Payload tokens",
        "Stage timings",
        "LLM accounting",
    ):
        assert heading in html
    # Stage timings from the manifest, the unrecorded one said so.
    assert "injected_graph" in html and "8.5" in html and "not recorded" in html
    # LLM accounting: the judge role used, the idle reader role left out.
    assert "openai:gpt-4o-mini" in html and ">42<" in html and "12,345" in html
    assert "judge / reader" not in html
    assert "No LLM calls recorded (offline): retrieval, reconcile" in html
    assert _digests(run_dir) == before
    assert sorted(p.name for p in run_dir.iterdir()) == sorted([*BUNDLE_FILES, "report.html"])
    # A refresh replaces only the report.
    write_run_report(run_dir)
    assert _digests(run_dir) == before


def test_unscored_is_shown_as_unscored_never_zero(tmp_path):
    html = render_run_report(load_run(_mixed_run(tmp_path)))
    cells = re.search(r"<td>temporal-reasoning</td>(.*?)</tr>", html, re.S)
    assert cells is not None
    assert "unscored" in cells.group(1) and "0.0%" not in cells.group(1)
    # The abstention rate (its only question unscored) too.
    assert re.search(r"abstention coverage.*?unscored", html, re.S)
    # The coverage chart draws the word, not an empty bar.
    assert re.search(r"<svg[^>]*aria-label=\"Tier 1: coverage per question type[^<]*<title>", html)
    # ... saying why: the judge's gate was not taken.
    assert ">unscored — answer_judge not taken (2)</text>" in html


def test_comparison_report_files_and_content(tmp_path):
    base = write_run(tmp_path, outcomes("q", [True] * 20, tokens=500), label="base")
    cand_rows = outcomes("q", [False] * 8 + [True] * 12, tokens=100)
    cand_rows[10] = row("q10", None)  # unscored in the candidate: left out of the pair
    cand = write_run(tmp_path, cand_rows, label="cand")

    uncalibrated = write_comparison_report(compare(base, cand))
    target = tmp_path / "comparisons" / f"{base.name}__vs__{cand.name}"
    assert uncalibrated == target / "comparison.html"
    html = uncalibrated.read_text(encoding="utf-8")
    assert_self_contained(html)
    assert "<b>NOT CALIBRATED</b>" in html and "INCONCLUSIVE" in html
    assert "cannot tell" in html and "q0" in html

    c = compare(base, cand, hand_floor(base, 5.0))
    out = write_comparison_report(c, tmp_path / "elsewhere")
    html = out.read_text(encoding="utf-8")
    assert_self_contained(html)
    assert "REGRESSED" in html and "<b>NOT CALIBRATED</b>" not in html
    assert "floor 5.0 pp" in html and "real" in html
    assert "Lost: covered in base, not in candidate (8)" in html
    assert "evidence_recall" in html  # the weakest link of each lost question
    assert "Efficiency (questions covered in both runs only)" in html
    saved = Comparison.model_validate(json.loads((out.parent / "comparison.json").read_text()))
    assert saved.verdict == "REGRESSED" and saved.tiers[0].excluded_unscored == 1
    assert sorted(p.name for p in out.parent.iterdir()) == ["comparison.html", "comparison.json"]


def test_cli_report_writes_the_run_report(tmp_path, capsys):
    run_dir = _mixed_run(tmp_path)
    assert cli.main(["report", run_dir.name, "--runs-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(run_dir / "report.html")
    assert cli.main(["report", str(tmp_path / "missing")]) == cli.EXIT_BAD_INPUT
