"""The run bundle is enough on its own (issue 27, part 2): every result row carries its
question and date, `eval-pipeline report RUN` regenerates the same report after the stage
artifacts are gone, a bundle from before still reports as it did, and a report is never
replaced by one that lost question text it showed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.report import (
    RUN_REPORT,
    TEXT_UNAVAILABLE,
    PoorerReport,
    render_run_report,
    write_run_report,
)
from eval_pipeline_tests.runs.html_dom import parse
from eval_pipeline_tests.runs.synthetic import golden, outcomes, write_run, write_run_with_goldens


def _texts(rows: list[dict]) -> dict[str, str]:
    return {r["question_id"]: f"What did I say about {r['question_id']}?" for r in rows}


def _card_text(html: str, qid: str) -> str:
    return parse(html).find("div", cls="q", id=f"q-{qid}").find(cls="text").text()


def test_rows_carrying_their_question_need_no_goldens(tmp_path):
    rows = outcomes("q", [True, False])
    texts = _texts(rows)
    for r in rows:
        r.update(question=texts[r["question_id"]], question_date="2023/05/30 (Tue) 23:40")
    run = write_run(tmp_path, rows)  # the manifest names no goldens artifact at all
    html = render_run_report(load_run(run))
    assert TEXT_UNAVAILABLE not in html and "Question text unavailable" not in html
    assert _card_text(html, "q1") == texts["q1"]
    assert "asked 2023/05/30 (Tue) 23:40" in html


def test_an_old_bundle_reports_as_before_and_its_report_is_never_made_poorer(tmp_path):
    rows = outcomes("q", [True, False, True])  # rows as written before: no question text
    texts = _texts(rows)
    goldens = [golden(qid, text) for qid, text in texts.items()]
    run = write_run_with_goldens(tmp_path, rows, goldens)
    report = write_run_report(run)
    before = report.read_bytes()
    assert _card_text(before.decode(), "q2") == texts["q2"]  # read from the goldens artifact
    assert write_run_report(run).read_bytes() == before  # a refresh that loses nothing: written

    artifact = Path(load_run(run).manifest["stages"]["goldens"]["artifact"])
    shutil.rmtree(artifact)  # pruned
    with pytest.raises(PoorerReport, match=r"kept: a new report would lack the text of 3 "):
        write_run_report(run)
    assert report.read_bytes() == before

    # The CLI says so in one line (an OSError: exit 2) and keeps the report.
    from eval_pipeline.cli import main

    assert main(["report", str(run)]) == 2
    assert report.read_bytes() == before

    # With no report to lose, the old bundle still reports, as it always did: ids stand in.
    report.unlink()
    html = write_run_report(run).read_text(encoding="utf-8")
    assert html.count(TEXT_UNAVAILABLE) == 3 and "is gone" in html


@pytest.mark.slow
def test_the_bundle_alone_regenerates_its_report(chain):
    """A real chain; then every stage artifact deleted; `eval-pipeline report RUN` writes the
    same report, byte for byte, question text included; the rows join nothing."""
    res = chain.run("--sample", "4", "--label", "alone")
    assert res.returncode == 0, res.stderr[-3000:]
    run = res.run_dir
    original = (run / RUN_REPORT).read_bytes()
    manifest = json.loads((run / "manifest.json").read_text())
    goldens_dir = Path(manifest["stages"]["goldens"]["artifact"])
    asked = {g["name"]: g for g in read_jsonl(goldens_dir / "goldens.jsonl")}

    artifacts = chain.state / "artifacts"
    assert goldens_dir.is_relative_to(artifacts)
    shutil.rmtree(artifacts)

    ran = chain.cli("report", str(run))
    assert ran.returncode == 0, ran.stderr
    assert Path(ran.stdout.strip()) == run / RUN_REPORT
    regenerated = (run / RUN_REPORT).read_bytes()
    assert regenerated == original
    html = regenerated.decode()
    assert TEXT_UNAVAILABLE not in html and "Question text unavailable" not in html

    # One table, joining nothing: each row has its question, date, answer, gold and outcome.
    rows = list(read_jsonl(run / "results.jsonl"))
    assert {r["question_id"] for r in rows} == set(asked)
    for r in rows:
        g = asked[r["question_id"]]
        assert r["question"] == g["input"]
        assert r["question_date"] == g["additional_metadata"]["question_date"]
        assert r["expected_output"] == g["expected_output"]
        assert {"answer", "covered", "question_type"} <= set(r)
        assert _card_text(html, r["question_id"]) == g["input"]
    try:
        import pandas as pd
    except ImportError:  # not installed here: the plain-json check above is the table
        return
    table = pd.read_json(run / "results.jsonl", lines=True)
    assert list(table["question"]) == [r["question"] for r in rows]
