"""The run report of a real bundle: `eval-pipeline run --tier all --light` offline (no judge,
real embedded graph server, real Dagster instance: the session's `light_tier2_run`), written
again by `eval-pipeline report` and read back from the parsed page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline_tests.runs.html_dom import parse
from eval_pipeline_tests.runs.test_report_readable import (
    assert_dashes_say_why,
    assert_no_empty_chart,
    card,
    charts,
    section,
)

# A whole two-tier chain's bundle: the full suite runs it, `make test-fast` not.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real_run(light_tier2_run):
    chain, res = light_tier2_run
    rep = chain.cli("report", str(res.run_dir))
    assert rep.returncode == 0, rep.stderr
    return res.run_dir


def test_real_bundle_report_reads_for_people(real_run):
    html = (real_run / "report.html").read_text(encoding="utf-8")
    doc = parse(html)
    manifest = json.loads((real_run / "manifest.json").read_text())
    rows = list(read_jsonl(real_run / "results.jsonl"))
    goldens = Path(manifest["stages"]["goldens"]["artifact"]) / "goldens.jsonl"
    texts = {g["name"]: g["input"] for g in read_jsonl(goldens)}
    assert {r["tier"] for r in rows} == {1, 2}

    # Status first; no judge said so.
    assert doc.find("div", cls="banner").text().startswith("Complete: every question")
    assert "judge none" in doc.text()
    # Tier-2 panels, each with a chart.
    for title in ("use case", "difficulty", "source mix", "COMBO dimension"):
        assert any(n.tag == "svg" for n in section(doc, "h4", f"Per {title}")), title
    # Every question: its text from the goldens, expected, hypothesis, context, why.
    assert not any("Question text unavailable" in p.text() for p in doc.find_all("p"))
    for r in rows:
        node, kv = card(doc, r["question_id"])
        assert node.find(cls="text").text() == texts[r["question_id"]]
        assert kv["expected answer"] == r["expected_output"]
        assert kv["hypothesis"] == r["answer"]
        if r["retrieval_context"]:  # turn text (dashes, degrees, quotes) round-trips
            assert [li.text() for li in node.find("details").find_all("li")] == [
                str(c) for c in r["retrieval_context"]
            ]
        if r["covered"] is False:
            assert kv["why not covered"].startswith(f"{r['weakest_link']} failed")
        elif r["covered"] is None:  # the abstention questions: no judge decides them
            assert r["abstention"]
            assert kv["why unscored"].startswith("unscored, not a failure: no judge in this run")
    assert any(r["covered"] is False for r in rows)
    # Directions, intervals, charts.
    for tab in doc.find_all("table"):
        if tab.headers()[:2] == ["metric", "good direction"]:
            for r in tab.rows():
                assert r[1] in ("higher is better", "lower is better"), r
    assert all("is better" in label for label in charts(doc))
    assert_dashes_say_why(doc)
    assert_no_empty_chart(doc)
    assert not doc.find_all("script") and "https://" not in html


def test_real_bundle_records_are_the_models_as_written(real_run):
    """What the chain wrote passes every record's model as a writer must (no unknown field,
    every field typed), at this code's schema versions."""
    from eval_pipeline.runs.load import load_run
    from eval_pipeline.runs.records import Manifest, ResultRow, Summary
    from eval_pipeline_tests.runs.test_records import assert_valid_as_written

    assert_valid_as_written(real_run)
    records = load_run(real_run).records
    assert records.manifest.schema_version == Manifest.VERSION
    assert records.summary.schema_version == Summary.VERSION
    assert {r.schema_version for r in records.rows} == {ResultRow.VERSION}
    assert records.summary.tiers["2"].pass_criteria is not None
