"""`eval-pipeline corpus` on bad input: one clear line naming record + field, nothing written."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline.cli import main
from eval_pipeline.corpus import limits
from eval_pipeline_tests.corpus.records import record, write_upstream


def _good() -> list[dict]:
    return [record("q1"), record("q2", "multi-session")]


def _mutate(fn):
    recs = copy.deepcopy(_good())
    fn(recs)
    return recs


BAD_INPUTS = {
    "missing_field": (
        _mutate(lambda r: r[1].pop("question_date")),
        ["'q2'", "'question_date'", "missing"],
    ),
    "parallel_arrays": (
        _mutate(lambda r: r[0]["haystack_dates"].pop()),
        ["'q1'", "'haystack_sessions'", "parallel arrays"],
    ),
    "wrong_type_answer": (
        _mutate(lambda r: r[1].__setitem__("answer", ["a"])),
        ["'q2'", "'answer'", "list"],
    ),
    "wrong_type_turns": (
        _mutate(lambda r: r[0]["haystack_sessions"].__setitem__(1, "oops")),
        ["'q1'", "'haystack_sessions[1]'", "str"],
    ),
    "wrong_type_role": (
        _mutate(lambda r: r[0]["haystack_sessions"][0][2].__setitem__("role", 7)),
        ["'q1'", "'haystack_sessions[0][2].role'"],
    ),
    "has_answer_not_bool": (
        _mutate(lambda r: r[0]["haystack_sessions"][0][1].__setitem__("has_answer", "yes")),
        ["'q1'", "has_answer"],
    ),
    "invalid_session_id": (
        _mutate(lambda r: r[1]["haystack_session_ids"].__setitem__(1, "bad id/../x")),
        ["'q2'", "'haystack_session_ids[1]'", "invalid session id"],
    ),
    "bad_date": (
        _mutate(lambda r: r[0]["haystack_dates"].__setitem__(0, "yesterday")),
        ["'q1'", "'haystack_dates[0]'"],
    ),
    "answer_session_not_in_haystack": (
        _mutate(lambda r: r[0]["answer_session_ids"].append("answer_zz_9")),
        ["'q1'", "'answer_session_ids'", "answer_zz_9"],
    ),
    "unknown_type": (
        _mutate(lambda r: r[0].__setitem__("question_type", "trivia")),
        ["'q1'", "'question_type'"],
    ),
    "not_an_object": (_good()[:1] + [42], ["record #1", "object"]),
    "no_question_id": (_mutate(lambda r: r[1].pop("question_id")), ["record #1", "'question_id'"]),
    "duplicate_question_id": (
        _mutate(lambda r: r[1].__setitem__("question_id", "q1")),
        ["'q1'", "duplicate"],
    ),
    "conflicting_duplicate_session": (
        _mutate(lambda r: r[1]["haystack_sessions"][1][0].__setitem__("content", "changed")),
        [],  # filled below: shared ids differ per question in _good(), so build one
    ),
}
# Issue 28, finding 5: sizes refused where the corpus is read, long before any wipe.
BAD_INPUTS["turn_too_long"] = (
    _mutate(
        lambda r: r[0]["haystack_sessions"][0][1].__setitem__(
            "content", "x" * limits.MAX_TURN_CHARS
        )
    ),
    ["'q1'", "'haystack_sessions[0][1].content'", "over the limit of 200,000 per turn"],
)
BAD_INPUTS["session_too_many_turns"] = (
    _mutate(
        lambda r: r[0]["haystack_sessions"].__setitem__(
            1, [{"role": "user", "content": "t"}] * (limits.MAX_SESSION_TURNS + 1)
        )
    ),
    ["'q1'", "'haystack_sessions[1]'", "2,001 turns, over the limit of 2,000 per session"],
)
BAD_INPUTS["session_text_too_long"] = (
    _mutate(
        lambda r: r[0]["haystack_sessions"].__setitem__(
            1, [{"role": "user", "content": "y" * 190_000}] * 5
        )
    ),
    ["'q1'", "'haystack_sessions[1]'", "characters of text, over the limit of 800,000"],
)
# Issue 28, finding 7: NaN and Infinity are not answers (json.dumps writes them bare).
BAD_INPUTS["nan_answer"] = (
    _mutate(lambda r: r[1].__setitem__("answer", float("nan"))),
    ["record #1", "NaN is not a JSON value"],
)
BAD_INPUTS["infinity_answer"] = (
    _mutate(lambda r: r[0].__setitem__("answer", float("-inf"))),
    ["record #0", "-Infinity is not a JSON value"],
)
# Make q2 reuse q1's distractor id with different content.
BAD_INPUTS["conflicting_duplicate_session"] = (
    _mutate(
        lambda r: (
            r[1]["haystack_session_ids"].__setitem__(1, "shared_q1"),
            r[1]["haystack_sessions"][1][0].__setitem__("content", "changed"),
        )
    ),
    ["'q2'", "shared_q1", "'q1'", "'haystack_sessions'"],
)


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
@pytest.mark.parametrize("out_exists", [True, False])
def test_bad_record_clear_error_and_nothing_written(case, out_exists, tmp_path, capsys):
    recs, expected = BAD_INPUTS[case]
    up = write_upstream(tmp_path / "up.json", recs)
    out = tmp_path / "out"
    if out_exists:
        out.mkdir()
        (out / "keep.txt").write_text("mine")
    code = main(["corpus", "--upstream", str(up), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert len(err.splitlines()) == 1, err
    for piece in expected:
        assert piece in err, (piece, err)
    if out_exists:
        assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    else:
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["up.json"] + (["out"] if out_exists else [])
    )


@pytest.mark.parametrize(
    "text,expected",
    [
        ('[{"question_id": "q1",', "record #0: invalid JSON"),
        ('{"question_id": "q1"}', "JSON array"),
        ("", "empty"),
        ("[] trailing", "after the closing"),
        # Issue 28, finding 7: each was a traceback (RecursionError) or accepted.
        (
            '[{"question_id": "q1", "x": ' + "[" * 100_000 + "]" * 100_000 + "}]",
            "record #0: nested deeper than 32 levels",
        ),
        (
            '[{"question_id": "q1", "x": ' + "[" * 40 + "]" * 40 + "}]",
            "record #0: nested deeper than 32 levels at x",
        ),
        ('[{"question_id": "q1", "answer": 1e400}]', "record #0: the number 1e400 overflows"),
        ('[{"question_id": "q\\ud800"}]', "record #0: question_id holds a lone surrogate"),
    ],
)
def test_bad_json(text, expected, tmp_path, capsys):
    up = tmp_path / "up.json"
    up.write_text(text)
    assert main(["corpus", "--upstream", str(up), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_missing_file_and_bad_options(tmp_path, capsys):
    assert (
        main(["corpus", "--upstream", str(tmp_path / "nope.json"), "--out", str(tmp_path / "o")])
        == 2
    )
    assert "not found" in capsys.readouterr().err
    up = write_upstream(tmp_path / "up.json", _good())
    assert (
        main(["corpus", "--upstream", str(up), "--out", str(tmp_path / "o"), "--sample", "0"]) == 2
    )
    assert "sample" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_console_script_end_to_end(tmp_path):
    """The installed `eval-pipeline` entry point, as a user runs it."""
    up = write_upstream(tmp_path / "up.json", _good())
    exe = Path(sys.executable).with_name("eval-pipeline")
    ok = subprocess.run(
        [exe, "corpus", "--upstream", up, "--out", tmp_path / "o"], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [
        "fixtures.jsonl",
        "goldens.jsonl",
        "manifest.json",
    ]
    bad = write_upstream(tmp_path / "bad.json", [record("q1"), {"question_id": "x"}])
    res = subprocess.run(
        [exe, "corpus", "--upstream", bad, "--out", tmp_path / "p"], capture_output=True, text=True
    )
    assert res.returncode == 2
    assert res.stderr.strip() == "eval-pipeline: error: record 'x', field 'question_type': missing"
    assert not (tmp_path / "p").exists()


# --- `corpus --out` never replaces files it did not write (issue 28, finding 9) ---------------


def test_corpus_out_keeps_a_users_goldens_unless_forced(tmp_path, capsys):
    up = write_upstream(tmp_path / "up.json", _good())
    out = tmp_path / "out"
    out.mkdir()
    mine = out / "goldens.jsonl"
    mine.write_text('{"mine": true}\n')
    assert main(["corpus", "--upstream", str(up), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "field '--out'" in err and "--force" in err
    assert mine.read_text() == '{"mine": true}\n' and sorted(os.listdir(out)) == ["goldens.jsonl"]

    assert main(["corpus", "--upstream", str(up), "--out", str(out), "--force"]) == 0
    assert "mine" not in mine.read_text()


def test_corpus_out_replaces_its_own_output_but_not_once_edited(tmp_path, capsys):
    up = write_upstream(tmp_path / "up.json", _good())
    out = tmp_path / "out"
    assert main(["corpus", "--upstream", str(up), "--out", str(out)]) == 0
    assert main(["corpus", "--upstream", str(up), "--out", str(out), "--seed", "3"]) == 0
    fixtures = out / "fixtures.jsonl"
    fixtures.write_text(fixtures.read_text() + "\n")  # a hand edit: no longer what we wrote
    capsys.readouterr()
    assert main(["corpus", "--upstream", str(up), "--out", str(out)]) == 2
    assert "did not write (or that changed since)" in capsys.readouterr().err
