"""A chain with dataset errata, end to end: `eval-pipeline run --errata exclude` with a user's
errata file for the bundled sample (the bundled errata apply only to the pinned S file).

The suspect question is left out of the sample and the manifest says so; the other flagged
questions carry their errata on their rows, the summary counts them, the report shows them.
"""

from __future__ import annotations

import json

import pytest

from eval_pipeline.corpus.upstream import sample_pin

ISSUES = "https://github.com/xiaowu0162/LongMemEval/issues/"
ASSISTANT_ONLY = {"7f3a0d65", "b2e8c914", "gpt4_4d61c2aa", "e05b7d3f"}


@pytest.mark.slow
def test_a_run_excludes_suspects_flags_the_rest_and_pins_the_errata(module_chain, tmp_path):
    errata_file = tmp_path / "sample-errata.json"
    errata_file.write_text(
        json.dumps(
            {
                "errata_version": "sample-1",
                "applies_to": {"file_name": "longmemeval_sample.json", "sha256": sample_pin()},
                "entries": [
                    {
                        "question_id": "3c9e51a2",
                        "status": "suspect",
                        "source": [ISSUES + "0"],
                        "what": "A gold answer in doubt.",
                    },
                    {
                        "question_id": "a81f07d4",
                        "status": "note",
                        "source": [ISSUES + "1"],
                        "what": "A known artifact.",
                    },
                ],
                "derived": [
                    {
                        "derivation": "no_user_evidence",
                        "status": "note",
                        "source": [ISSUES + "16"],
                        "what": "Evidence only on assistant turns.",
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    res = module_chain.run(
        "--label", "errata", "--errata", "exclude", "--errata-file", str(errata_file)
    )
    assert res.returncode == 0, res.stderr[-3000:]
    manifest = json.loads((res.run_dir / "manifest.json").read_text())
    pin = manifest["pins"]["errata"]
    assert pin["applied"] and pin["mode"] == "exclude" and pin["version"] == "sample-1"
    assert pin["excluded"] == ["3c9e51a2"] and pin["flagged"] == 5
    assert pin["by_status"] == {"note": 5} and pin["not_in_file"] == []
    assert manifest["options"]["corpus"]["errata"] == "exclude"
    rows = [json.loads(x) for x in (res.run_dir / "results.jsonl").read_text().splitlines()]
    by_id = {r["question_id"]: r for r in rows}
    assert len(rows) == 30 and "3c9e51a2" not in by_id
    flagged = {q for q, r in by_id.items() if r["errata"]}
    assert flagged == {"a81f07d4", *ASSISTANT_ONLY}
    assert by_id["a81f07d4"]["errata"] == {
        "status": "note",
        "source": [ISSUES + "1"],
        "what": "A known artifact.",
    }
    assert all(r["errata"] is None for q, r in by_id.items() if q not in flagged)
    summary = json.loads((res.run_dir / "summary.json").read_text())
    e = summary["tiers"]["1"]["errata"]
    assert e["flagged"] == 5 and e["suspect_ids"] == []
    # No suspect left in the run: both figures are the same.
    assert e["coverage_without_suspect"] == summary["tiers"]["1"]["coverage"]
    html = (res.run_dir / "report.html").read_text()
    assert "Dataset errata" in html and "left out of the sample: 3c9e51a2" in html
