"""Dataset errata: the bundled file, its verifier, and how a run applies it (in-process).

The real S file is not on this machine: the verifier is tested on a file built here in the
exact upstream schema that agrees with every claim, then broken one claim at a time. The
test against the real file runs where it is (EVAL_TEST_LONGMEMEVAL_S, or the Hugging Face
cache) and skips elsewhere.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from eval_pipeline.cli import main
from eval_pipeline.corpus.errata import ERRATA_DIR, bundled_errata, errata_for, load_errata
from eval_pipeline.corpus.errata_apply import errata_applier, with_errata
from eval_pipeline.corpus.errata_verify import derive, verify
from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.upstream import (
    HF_FILES,
    HF_REPO_ID,
    HF_REVISION,
    file_sha256,
    sample_pin,
)
from eval_pipeline_tests.corpus.errata_records import (
    agreeing_records,
    with_duplicate,
    write_records,
)

ISSUES = "https://github.com/xiaowu0162/LongMemEval/issues/"
# The 13 histories #54 names, with the filler session each repeats.
ISSUE_54 = {
    "58bf7951": "07b7a667_1",
    "1e043500": "d5d1f9c4",
    "001be529": "sharegpt_SYbLHTK_0",
    "d23cf73b": "334ab2f1",
    "caf03d32": "sharegpt_YCfhENU_0",
    "91b15a6e": "sharegpt_fgnzLtE_0",
    "078150f1": "sharegpt_z7Ogy29_0",
    "gpt4_4929293b": "sharegpt_81riySf_0",
    "gpt4_76048e76": "8fcaf3a9_2",
    "gpt4_c27434e8_abs": "8c64ce26_3",
    "18bc8abd": "sharegpt_vyHqfrX_0",
    "c7dc5443": "6b8e8bb3_1",
    "1d4da289": "sharegpt_qktLFWS_21",
}


@pytest.fixture(scope="module")
def errata():
    (only,) = bundled_errata()
    return only


@pytest.fixture
def agreeing(errata):
    return agreeing_records(errata)


def test_the_bundled_errata_load_and_name_the_pinned_s_file(errata):
    name, sha, size = HF_FILES["s"]
    to = errata.doc.applies_to
    assert (to.repo_id, to.revision, to.file_name, to.sha256, to.bytes) == (
        HF_REPO_ID,
        HF_REVISION,
        name,
        sha,
        size,
    )
    assert errata.digest == file_sha256(errata.path) and errata.version == "1"
    # Carried from the issues, not checked on the pinned file here: never marked verified.
    assert errata.doc.verified is False
    assert not any(e.verified for e in errata.doc.entries)
    assert not any(d.verified for d in errata.doc.derived)
    suspect = {e.question_id for e in errata.doc.entries if e.status == "suspect"}
    assert suspect == {"370a8ff4", "gpt4_88806d6e", "eac54add", "9aaed6a3", "gpt4_f420262d"}
    dups = {
        e.question_id: c.session_id
        for e in errata.doc.entries
        for c in e.claims
        if c.kind == "duplicate_session_id"
    }
    assert dups == ISSUE_54
    for e in errata.doc.entries:
        assert e.source and all(s.startswith(ISSUES) for s in e.source), e.question_id
        assert e.claims, f"{e.question_id}: no machine-checkable claim"
    no_user = next(d for d in errata.doc.derived if d.derivation == "no_user_evidence")
    assert no_user.expect.count == 51 and no_user.source == [ISSUES + "16"]


def test_verify_passes_on_a_file_that_agrees(tmp_path, errata, agreeing):
    report = verify(errata, write_records(tmp_path / "s.json", agreeing))
    assert report.ok, report.failures
    assert report.records == len(agreeing) and not report.pinned_file
    assert report.checked_claims == sum(len(e.claims) for e in errata.doc.entries)
    assert sorted(report.derived["duplicate_session_id"]) == sorted(ISSUE_54)
    assert len(report.derived["no_user_evidence"]) == 51


def _date(rec: dict, session_id: str, date: str) -> None:
    rec["haystack_dates"][rec["haystack_session_ids"].index(session_id)] = date


def _break_dup(rec: dict) -> None:
    # The second copy of the repeated filler gets other content.
    rec["haystack_sessions"][-1][0]["content"] += " (edited)"


def _evidence_on_user(rec: dict) -> None:
    rec["haystack_sessions"][0][0]["has_answer"] = True


BREAKS = {
    # question id, how to break it, what the one-line failure must say
    "gap": ("370a8ff4", lambda r: _date(r, "answer_61d1be50_2", "2023/05/04 (Thu) 08:00"), "105"),
    "gold": ("gpt4_88806d6e", lambda r: r.update(answer="Mark and Sarah"), "gold_answer"),
    "question": ("eac54add", lambda r: r.update(question="When did I start?"), "buisiness"),
    "question_date": ("9aaed6a3", lambda r: r.update(question_date="2023/06/01 (Thu) 10:00"), ""),
    "evidence_date": (
        "gpt4_f420262d",
        lambda r: _date(r, "gpt4_f420262d_answer_d8a1af6c_4", "2023/02/14 (Tue) 18:00"),
        "2023/02/20",
    ),
    "dup_content": ("c7dc5443", _break_dup, "differ in content"),
    "dup_gone": (
        "58bf7951",
        lambda r: [
            r[k].pop() for k in ("haystack_session_ids", "haystack_dates", "haystack_sessions")
        ],
        "listed 1 time",
    ),
}


@pytest.mark.parametrize("case", sorted(BREAKS))
def test_verify_fails_on_each_broken_claim_with_one_line_naming_the_id(
    tmp_path, errata, agreeing, case
):
    qid, breaks, says = BREAKS[case]
    broken = copy.deepcopy(agreeing)
    breaks(broken[qid])
    report = verify(errata, write_records(tmp_path / "s.json", broken))
    assert not report.ok
    mine = [f for f in report.failures if f.startswith(f"{qid}: ")]
    assert mine and says in mine[0] and "\n" not in mine[0], report.failures
    # Only that question fails (and, for a repeat removed, the count derived from the file).
    others = [f for f in report.failures if f not in mine and "derived" not in f]
    assert others == []


def test_verify_names_a_question_missing_from_the_file(tmp_path, errata, agreeing):
    del agreeing["eac54add"]
    report = verify(errata, write_records(tmp_path / "s.json", agreeing))
    assert report.failures == ["eac54add: not in the file"]


def test_derivations_are_cross_checked_against_what_their_sources_report(
    tmp_path, errata, agreeing
):
    # A named question gains user-side evidence: the derivation no longer finds it, and
    # finds 50 where the issue reports 51.
    _evidence_on_user(agreeing["1568498a"])
    # A history nobody listed repeats a session: found, and refused as unlisted.
    agreeing["zz_dup"] = with_duplicate(
        {**agreeing["eac54add"], "question_id": "zz_dup"}, "filler_x"
    )
    report = verify(errata, write_records(tmp_path / "s.json", agreeing))
    assert "1568498a: derived no_user_evidence: named by its source, not found" in report.failures
    assert any(
        f.startswith("derived no_user_evidence: found 50 question(s)") for f in report.failures
    )
    assert "derived duplicate_session_id: found 14 question(s), its source reports 13" in (
        report.failures
    )
    assert any(f.startswith("zz_dup: duplicate_session_id:") for f in report.failures)


def test_derive_lists_what_the_file_holds(tmp_path, errata, agreeing):
    found = derive(errata, write_records(tmp_path / "s.json", agreeing))
    dups = {
        d["question_id"]: d["detail"] for d in found if d["derivation"] == "duplicate_session_id"
    }
    assert dups == {q: f"repeats {s}" for q, s in ISSUE_54.items()}
    no_user = [d for d in found if d["derivation"] == "no_user_evidence"]
    assert len(no_user) == 51 and {d["status"] for d in no_user} == {"note"}


def test_errata_apply_only_to_the_file_they_name(tmp_path):
    name, sha, _ = HF_FILES["s"]
    errata, why = errata_for(sha)
    assert errata is not None and errata.applies_to(sha) and why == ""
    # The bundled sample, and any other file: none apply, and the reason says so.
    none, why = errata_for(sample_pin())
    assert none is None and "no errata for this file" in why and name in why
    # A user's errata file for another file does not apply to the pinned one either.
    own = _own_errata(tmp_path, "0" * 64, [])
    none, why = errata_for(sha, str(own))
    assert none is None and str(own) in why
    mine, _ = errata_for("0" * 64, str(own))
    assert mine is not None and mine.path == own


def _own_errata(tmp_path: Path, sha256: str, entries: list[dict], derived=None) -> Path:
    path = tmp_path / "mine.json"
    doc = {
        "errata_version": "test-1",
        "applies_to": {"file_name": "longmemeval_sample.json", "sha256": sha256},
        "entries": entries,
        "derived": derived or [],
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _entry(qid: str, status: str = "suspect") -> dict:
    return {"question_id": qid, "status": status, "source": [ISSUES + "0"], "what": "Wrong."}


@pytest.mark.parametrize(
    "entries, says",
    [
        ([_entry("a1", "maybe")], "entry 'a1': status: 'maybe' is not one of"),
        ([_entry("a1"), _entry("a1")], "question 'a1' has two entries"),
        ([{**_entry("a1"), "source": []}], "entry 'a1': source"),
        (
            [{**_entry("a1"), "claims": [{"kind": "question_date", "date": "May 30"}]}],
            "entry 'a1': claims.0.question_date.date",
        ),
        ([{**_entry("a1"), "claims": [{"kind": "nonsense"}]}], "entry 'a1': claims.0"),
    ],
)
def test_a_bad_errata_file_is_one_line_naming_entry_and_field(tmp_path, entries, says):
    path = _own_errata(tmp_path, "0" * 64, entries)
    with pytest.raises(CorpusError) as err:
        load_errata(path)
    message = str(err.value)
    assert says in message and str(path) in message and "\n" not in message, message


def test_a_bad_errata_file_stops_the_run_before_anything_is_launched(tmp_path, capsys, monkeypatch):
    path = _own_errata(tmp_path, "0" * 64, [_entry("a1", "maybe")])
    state = tmp_path / "state"
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(state))
    monkeypatch.setenv("DAGSTER_HOME", str(state / "dh"))
    code = main(["run", "--errata-file", str(path), "--label", "never"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "--errata-file" in err[0] and "status" in err[0] and "'a1'" in err[0]
    # Nothing ran: no Dagster run, no bundle.
    assert not (state / "runs").exists()


def test_an_unknown_errata_mode_is_refused_as_an_option(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--errata", "maybe", "--label", "never"])
    assert exit_.value.code == 2 and "--errata: invalid choice: 'maybe'" in capsys.readouterr().err
    # The same option as a --config key: one line naming it.
    config = tmp_path / "run.yaml"
    config.write_text("corpus:\n  errata: maybe\n", encoding="utf-8")
    assert main(["run", "--config", str(config), "--label", "never"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "errata" in err[0], err


def _sample_goldens(tmp_path, mode: str, entries, derived=None):
    """plan_corpus over the bundled sample with a user's errata file for it, as the goldens
    stage runs it; returns (plan, the errata record it publishes)."""
    from eval_pipeline.corpus.convert import plan_corpus
    from eval_pipeline.corpus.sampling import SampleSpec
    from eval_pipeline.corpus.upstream import UpstreamSpec, resolve_upstream

    upstream = resolve_upstream(UpstreamSpec(source="sample"))
    own = _own_errata(tmp_path, upstream.sha256, entries, derived)
    applier = errata_applier(upstream.sha256, mode=mode, errata_file=str(own))
    plan = plan_corpus(upstream, SampleSpec(), exclude=applier)
    return plan, applier.record(plan.goldens)


NO_USER = {
    "derivation": "no_user_evidence",
    "status": "note",
    "source": [ISSUES + "16"],
    "what": "Evidence only on assistant turns.",
}
ASSISTANT_ONLY = {"7f3a0d65", "b2e8c914", "gpt4_4d61c2aa", "e05b7d3f"}  # the sample's four


def _row(qid: str, covered: bool | None, qtype: str = "single-session-user", **kw) -> dict:
    from eval_pipeline.score.retrieval_metrics import KS, METRIC_NAMES, VARIANTS

    unmeasured = {f"{name}@{k}": None for name in METRIC_NAMES for k in KS}
    return {
        "question_id": qid,
        "tier": 1,
        "question_type": qtype,
        "abstention": qid.endswith("_abs"),
        "covered": covered,
        "weakest_link": None,
        "payload_tokens": 10,
        "metrics": {},
        "retrieval_metrics": {
            "turn": {v: dict(unmeasured) for v in VARIANTS},
            "session": {v: dict(unmeasured) for v in VARIANTS},
            "excluded": dict.fromkeys(VARIANTS),
        },
        **kw,
    }


def test_flag_mode_marks_rows_and_the_summary_gives_both_figures(tmp_path):
    from eval_pipeline.score.summary import summarize_tier

    plan, applied = _sample_goldens(tmp_path, "flag", [_entry("3c9e51a2")], [NO_USER])
    # Flags change nothing measured: every question is still in the sample.
    assert len(plan.goldens) == 31 and applied["pin"]["excluded"] == []
    pin = applied["pin"]
    assert pin["applied"] and pin["mode"] == "flag" and pin["version"] == "test-1"
    assert pin["flagged"] == 5 and pin["by_status"] == {"note": 4, "suspect": 1}
    assert pin["not_in_file"] == []
    flags = applied["flags"]
    assert set(flags) == {"3c9e51a2", *ASSISTANT_ONLY}
    assert flags["3c9e51a2"] == {"status": "suspect", "source": [ISSUES + "0"], "what": "Wrong."}
    # Scoring copies them onto the rows: a flag, or null.
    rows = with_errata(
        [
            _row("3c9e51a2", False),
            _row("a81f07d4", True),
            _row("5d2b6e90", False),
            _row("7f3a0d65", True, "single-session-assistant"),
            _row("91e4f2c8_abs", False),
        ],
        flags,
    )
    assert rows[0]["errata"]["status"] == "suspect" and rows[1]["errata"] is None
    assert rows[3]["errata"]["status"] == "note"
    s = summarize_tier(rows)
    # With the suspect miss: 2 of 4 answerable covered; without it: 2 of 3.
    assert s["coverage"]["rate"] == 0.5
    e = s["errata"]
    assert e["flagged"] == 2 and e["by_status"] == {"note": 1, "suspect": 1}
    assert e["suspect_ids"] == ["3c9e51a2"]
    assert e["coverage_without_suspect"]["rate"] == pytest.approx(2 / 3)
    assert e["coverage_without_suspect"]["n_scored"] == 3
    # Per type without the suspect: single-session-user 1/2, single-session-assistant 1/1.
    assert e["coverage_task_averaged_without_suspect"] == pytest.approx(0.75)
    # No flag on any row: no errata block.
    assert "errata" not in summarize_tier(with_errata(rows[1:3], {}))


def test_the_records_carry_the_errata_shapes(tmp_path):
    from eval_pipeline.runs.records.manifest import ErrataPin
    from eval_pipeline.runs.records.results import ErrataFlag
    from eval_pipeline.runs.records.summary import ErrataSummary

    _, applied = _sample_goldens(tmp_path, "exclude", [_entry("3c9e51a2")], [NO_USER])
    ErrataPin.model_validate(applied["pin"])
    for flag in applied["flags"].values():
        ErrataFlag.model_validate(flag)
    ErrataSummary.model_validate(
        {"flagged": 1, "by_status": {"suspect": 1}, "coverage_without_suspect": None}
    )


def test_exclude_mode_leaves_suspect_questions_out_and_says_so(tmp_path):
    plan, applied = _sample_goldens(
        tmp_path, "exclude", [_entry("3c9e51a2"), _entry("a5c8e1d7", "note")], [NO_USER]
    )
    names = {g["name"] for g in plan.goldens}
    assert "3c9e51a2" not in names and "a5c8e1d7" in names and len(names) == 30
    assert applied["pin"]["excluded"] == ["3c9e51a2"]
    assert applied["pin"]["flagged"] == 5  # the note and the four assistant-only questions
    assert "3c9e51a2" not in applied["flags"]
    # The file's own counts are unchanged: only the population drawn from shrank.
    assert plan.file_stats["records"] == 31


def test_errata_for_another_file_and_off_mode_apply_nothing(tmp_path):
    from eval_pipeline.corpus.convert import plan_corpus
    from eval_pipeline.corpus.sampling import SampleSpec
    from eval_pipeline.corpus.upstream import UpstreamSpec, resolve_upstream

    upstream = resolve_upstream(UpstreamSpec(source="sample"))
    other = _own_errata(tmp_path, "0" * 64, [_entry("3c9e51a2")])
    for mode, errata_file in (("exclude", str(other)), ("exclude", None), ("off", None)):
        applier = errata_applier(upstream.sha256, mode=mode, errata_file=errata_file)
        plan = plan_corpus(upstream, SampleSpec(), exclude=applier)
        record = applier.record(plan.goldens)
        assert len(plan.goldens) == 31 and record["flags"] == {}
        assert record["pin"]["applied"] is False and record["pin"]["reason"]


def test_errata_verify_cli_exit_codes(tmp_path, errata, agreeing, capsys):
    path = write_records(tmp_path / "s.json", agreeing)
    assert main(["errata", "verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "NOT the file these errata apply to" in out and "claim(s) checked: ok" in out
    agreeing["370a8ff4"]["answer"] = 12
    write_records(path, agreeing)
    assert main(["errata", "verify", str(path)]) == 1
    fails = [x for x in capsys.readouterr().out.splitlines() if x.startswith("FAIL")]
    assert fails == ["FAIL 370a8ff4: gold_answer_contains: '15' not in the gold answer '12'"]
    assert main(["errata", "verify", str(tmp_path / "absent.json")]) == 2
    assert "not found" in capsys.readouterr().err


def _real_s_file() -> Path | None:
    env = os.environ.get("EVAL_TEST_LONGMEMEVAL_S")
    if env:
        return Path(env)
    from eval_pipeline.corpus.errata_cli import pinned_file_in_cache

    (only,) = bundled_errata()
    return pinned_file_in_cache(only)


@pytest.mark.slow
def test_the_errata_hold_on_the_real_pinned_s_file(errata):
    path = _real_s_file()
    if path is None or not path.is_file():
        pytest.skip(
            "the pinned longmemeval_s_cleaned.json is not here: set EVAL_TEST_LONGMEMEVAL_S to "
            "its path or seed the Hugging Face cache (98d7416c…) to run this test"
        )
    report = verify(errata, path)
    assert report.pinned_file, f"{path} is not the pinned file (sha256 {report.sha256})"
    assert report.ok, "\n".join(report.failures)


def test_the_errata_directory_holds_only_valid_files():
    for path in ERRATA_DIR.glob("*.json"):
        load_errata(path)
    assert (ERRATA_DIR / "README.md").is_file()
