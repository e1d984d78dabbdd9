"""The default judge against the field's: published LongMemEval_S runs with GPT-4o's verdicts
(`../shared/data/third_party_runs/`), read by `judge-check` as a user runs it, and the
project's adversarial set (`corpus/judge/adversarial.jsonl`).

The floors are what the rules measured when they were written (the note of issue 38 gives the
figures); a change to the rules that falls below them agrees less with the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eval_pipeline import cli
from eval_pipeline.corpus.judge_labels import DEFAULT_LABELS

RUNS = Path(__file__).resolve().parents[3] / "shared" / "data" / "third_party_runs"
REFERENCES = RUNS / "longmemeval_s_references.json"
needs_runs = pytest.mark.skipif(
    not REFERENCES.is_file(), reason=f"the published runs are not here ({RUNS})"
)
LINE = re.compile(
    r"^match +kappa (?P<kappa>[\d.]+) .*run accuracy (?P<labels>[\d.]+)% by the file's labels, "
    r"(?P<judge>[\d.]+)% by match \((?P<delta>[+-][\d.]+) pts\)"
)


def _check(capsys, tmp_path, *args) -> tuple[list[str], dict]:
    out = tmp_path / "check"
    code = cli.main(["judge-check", "--judge", "offline", "--no-probes", "--out", str(out), *args])
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    return lines, json.loads((out / "methods" / "match" / "agreement.json").read_text())


@needs_runs
@pytest.mark.parametrize(
    ("files", "min_kappa", "accuracy"),
    [
        (["auditcrux_qwen25-32b-129810.eval-results-gpt-4o.jsonl"], 0.85, 47.6),
        (["engrava-0.5.0_hypotheses.jsonl", "--verdicts", "engrava-0.5.0_judge_labels.jsonl"],
         0.70, 82.4),
    ],
)  # fmt: skip
def test_judge_check_on_a_published_run(capsys, tmp_path, files, min_kappa, accuracy):
    paths = [a if a.startswith("--") else str(RUNS / a) for a in files]
    lines, result = _check(capsys, tmp_path, "--labels", *paths, "--references", str(REFERENCES))
    found = [m for m in map(LINE.match, lines) if m]
    assert len(found) == 1, lines
    m = found[0]
    assert float(m["labels"]) == accuracy  # the file's own labels, recomputed
    assert float(m["kappa"]) >= min_kappa
    assert abs(float(m["delta"])) <= 3.0
    assert result["n_items"] == 500 and result["n_unscored"] == 0
    assert result["labels"]["path"].startswith(str(RUNS))


@needs_runs
def test_a_run_without_its_question_set_is_refused_in_one_line(capsys, tmp_path):
    run = RUNS / "auditcrux_qwen25-32b-129810.eval-results-gpt-4o.jsonl"
    short = tmp_path / "refs.json"
    refs = json.loads(REFERENCES.read_text())
    short.write_text(json.dumps(refs[:-1]), encoding="utf-8")
    code = cli.main(["judge-check", "--judge", "offline", "--no-probes", "--labels", str(run),
                     "--references", str(short), "--out", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert "is not in the question set" in err[-1] and refs[-1]["question_id"] in err[-1]


def test_the_adversarial_set_false_yes_rate(capsys, tmp_path):
    adversarial = DEFAULT_LABELS.parent / "adversarial.jsonl"
    _, result = _check(capsys, tmp_path, "--labels", str(adversarial))
    confusion = result["confusion"]
    assert confusion["no_yes"] + confusion["no_no"] >= 90  # the set is mostly traps
    assert confusion["false_yes_rate"] <= 0.15
    assert confusion["false_no_rate"] <= 0.15
