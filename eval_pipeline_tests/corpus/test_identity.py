"""Issue 11 section 5: any LongMemEval-schema file, whatever its name.

The variant is what the user says or what a known sha256 pin identifies; any other file is a
local file recorded by its own digest. The oracle variant is refused by label and by content.
`--sample N` above the corpus size is capped, says so in one line, and pins the effective size.
All through the real CLI on real files written to tmp dirs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eval_pipeline.cli import main
from eval_pipeline.corpus.convert import (
    CorpusPlan,
    build_corpus,
    check_not_oracle_content,
    iter_questions,
    oracle_by_content,
    plan_corpus,
)
from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.corpus.upstream import (
    SAMPLE_PATH,
    UpstreamSpec,
    file_sha256,
    resolve_upstream,
    sample_pin,
)
from eval_pipeline_tests.corpus.records import record, session, write_upstream

SAMPLE_QUESTIONS = 31  # corpus/upstream/README.md


def _corpus(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(["corpus", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def _refused(code: int, err: str, out: Path, *pieces: str) -> None:
    """Exit 2, one line naming why, and nothing written in --out."""
    assert code == 2
    assert len(err.splitlines()) == 1, err
    for piece in pieces:
        assert piece in err, (piece, err)
    assert not out.exists() or sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def _oracle_records() -> list[dict]:
    """Every haystack session is an answer session: LongMemEval's oracle shape. It covers an
    abstention question (answer sessions, no flagged turn) and a question with an empty
    haystack, neither of which may be taken for a distractor."""
    return [
        record("q1", sessions=[("answer_q1_1", session("q1", evidence_at=0))]),
        record(
            "q2",
            "multi-session",
            sessions=[
                ("answer_q2_1", session("q2a", evidence_at=1)),
                ("answer_q2_2", session("q2b", evidence_at=0)),
            ],
            answer_ids=["answer_q2_1", "answer_q2_2"],
        ),
        record("q3_abs", "temporal-reasoning", sessions=[("answer_q3_abs_1", session("q3"))]),
        record("q4", "knowledge-update", sessions=[], answer_ids=[]),
    ]


# ---- the name decides nothing ---------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["longmemeval_mine.json", "longmemeval_m.json", "longmemeval_s_cleaned.json"]
)
def test_longmemeval_named_file_is_accepted_and_recorded_by_its_digest(name, tmp_path, capsys):
    """Today `longmemeval_mine.json` is refused ("unknown variant"), `longmemeval_m.json` is
    labelled `m` and `longmemeval_s_cleaned.json` is held to the S pin, all by name."""
    up = write_upstream(tmp_path / name, [record("q1"), record("q2", "multi-session")])
    out = tmp_path / "out"
    code, _, err = _corpus(["--upstream", str(up), "--out", str(out)], capsys)
    assert code == 0, err
    pins = _manifest(out)["upstream"]
    digest = file_sha256(up)
    assert pins["variant"] == "local"
    assert pins["sha256"] == digest and pins["expected_sha256"] is None
    assert pins["file_name"] == name
    # The goldens' source_file carries the digest: a local file's only revision.
    (g1, _) = read_jsonl(out / "goldens.jsonl")
    assert g1["source_file"] == f"path:{name}@sha256:{digest}"


def test_bundled_sample_by_its_own_path_is_the_sample_pinned(tmp_path, capsys):
    """Today: refused with "unknown variant 'sample'" because of its name."""
    up = resolve_upstream(UpstreamSpec(source="path", path=str(SAMPLE_PATH)), verify=False)
    assert (up.variant, up.pinned, up.expected_sha256) == ("sample", True, sample_pin())
    out = tmp_path / "out"
    code, _, err = _corpus(["--upstream", str(SAMPLE_PATH), "--out", str(out)], capsys)
    assert code == 0, err
    pins = _manifest(out)["upstream"]
    assert pins["variant"] == "sample" and pins["expected_sha256"] == sample_pin()


def test_sample_bytes_under_another_name_are_the_sample_not_s(tmp_path, capsys):
    """Today: `mydata.json` with the bundled sample's bytes is labelled `s`, unpinned."""
    mine = tmp_path / "mydata.json"
    shutil.copy(SAMPLE_PATH, mine)
    out = tmp_path / "out"
    code, _, err = _corpus(["--upstream", str(mine), "--out", str(out)], capsys)
    assert code == 0, err
    pins = _manifest(out)["upstream"]
    assert pins["variant"] == "sample"
    assert pins["sha256"] == pins["expected_sha256"] == sample_pin()
    # Saying what the pin already says is fine.
    up = resolve_upstream(UpstreamSpec(source="path", path=str(mine), variant="sample"))
    assert up.variant == "sample" and up.pinned


@pytest.mark.parametrize("variant", ["m", "s-original"])
def test_declared_variant_on_unknown_file_is_recorded(variant, tmp_path, capsys):
    """Today a label other than s/m is refused ("unknown variant"); `m` is kept only because
    the file's name does not look like another variant's."""
    up = write_upstream(tmp_path / "longmemeval_x.json", [record("q1"), record("q2")])
    out = tmp_path / "out"
    code, _, err = _corpus(["--upstream", str(up), "--variant", variant, "--out", str(out)], capsys)
    assert code == 0, err
    pins = _manifest(out)["upstream"]
    assert pins["variant"] == variant and pins["expected_sha256"] is None
    assert pins["sha256"] == file_sha256(up)
    # With the user's own --sha256 the declared file is pinned to it.
    digest = file_sha256(up)
    out2 = tmp_path / "out2"
    args = ["--upstream", str(up), "--variant", variant, "--sha256", digest, "--out", str(out2)]
    code, _, err = _corpus(args, capsys)
    assert code == 0, err
    assert _manifest(out2)["upstream"]["expected_sha256"] == digest


@pytest.mark.parametrize(
    "args,pieces",
    [
        # The sample's bytes under another name, declared as S: the pin says otherwise.
        (["--variant", "s"], ["'variant'", "--variant s contradicts", "'sample'"]),
        (["--variant", "m"], ["'variant'", "--variant m contradicts", sample_pin()]),
    ],
)
def test_declared_variant_contradicting_a_pin_is_refused(args, pieces, tmp_path, capsys):
    """Today `--variant s` on the sample's bytes is accepted and labelled `s`."""
    mine = tmp_path / "mydata.json"
    shutil.copy(SAMPLE_PATH, mine)
    out = tmp_path / "out"
    code, _, err = _corpus(["--upstream", str(mine), *args, "--out", str(out)], capsys)
    _refused(code, err, out, *pieces)


def test_declaring_the_sample_on_other_bytes_or_another_variant_on_the_sample(tmp_path, capsys):
    up = write_upstream(tmp_path / "up.json", [record("q1"), record("q2")])
    out = tmp_path / "out"
    code, _, err = _corpus(
        ["--upstream", str(up), "--variant", "sample", "--out", str(out)], capsys
    )
    _refused(code, err, out, "'variant'", "bundled sample")
    code, _, err = _corpus(["--upstream", "sample", "--variant", "m", "--out", str(out)], capsys)
    _refused(code, err, out, "'variant'", "--variant m contradicts the bundled sample")


# ---- the oracle variant ----------------------------------------------------------------


@pytest.mark.parametrize("upstream", ["sample", "hf", "path"])
def test_variant_oracle_refused_for_every_source(upstream, tmp_path, capsys):
    """Today `--upstream sample --variant oracle` is silently ignored (exit 0)."""
    value = (
        str(write_upstream(tmp_path / "up.json", [record("q1")]))
        if upstream == "path"
        else upstream
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, err = _corpus(["--upstream", value, "--variant", "oracle", "--out", str(out)], capsys)
    _refused(code, err, out, "'variant'", "oracle", "by construction")


@pytest.mark.parametrize("name", ["mydata.json", "longmemeval_s_cleaned.json"])
@pytest.mark.parametrize("extra", [[], ["--sample", "2"], ["--variant", "s"]])
@pytest.mark.parametrize("out_exists", [True, False])
def test_no_distractor_anywhere_is_refused_by_content(name, extra, out_exists, tmp_path, capsys):
    """Today such a file converts (exit 0): precision would score well by construction."""
    up = write_upstream(tmp_path / name, _oracle_records())
    out = tmp_path / "out"
    if out_exists:
        out.mkdir()
        (out / "keep.txt").write_text("mine")
    code, _, err = _corpus(["--upstream", str(up), *extra, "--out", str(out)], capsys)
    _refused(code, err, out, "'haystack_sessions'", "oracle variant by content", name)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [name] + (["out"] if out_exists else [])
    )


def test_real_oracle_style_records_are_refused_by_content(tmp_path, capsys):
    """Two real upstream records with their evidence sessions only (../shared/data)."""
    real = Path(__file__).resolve().parents[3] / "shared" / "data"
    real = real / "longmemeval_real_sample.json"
    if not real.is_file():
        pytest.skip("../shared/data is absent (not in this clone)")
    out = tmp_path / "out"
    code, _, err = _corpus(["--upstream", str(real), "--out", str(out)], capsys)
    _refused(code, err, out, "oracle variant by content", "4 haystack sessions")


def test_oracle_content_rule_and_its_functions(tmp_path):
    oracle = write_upstream(tmp_path / "o.json", _oracle_records())
    assert oracle_by_content(oracle) is True
    with pytest.raises(CorpusError, match="field 'haystack_sessions'.*oracle variant by content"):
        list(iter_questions(oracle))
    # Haystacks all empty: no distractor either, refused with its own reason.
    empty = write_upstream(
        tmp_path / "e.json", [record("q1", sessions=[], answer_ids=[]), record("q2", sessions=[])]
    )
    assert oracle_by_content(empty) is True
    with pytest.raises(CorpusError, match="none of the 2 records .* has a haystack session"):
        list(iter_questions(empty))
    # One distractor anywhere (here in the very last record) is enough: a real file.
    mixed = _oracle_records() + [record("q5")]
    mixed_path = write_upstream(tmp_path / "m.json", mixed)
    assert oracle_by_content(mixed_path) is False
    assert len(list(iter_questions(mixed_path))) == 5
    plan = plan_corpus(
        resolve_upstream(UpstreamSpec(source="path", path=str(mixed_path))), SampleSpec()
    )
    assert plan.file_stats["questions_without_distractors"] == 4
    assert oracle_by_content(SAMPLE_PATH) is False
    # The pass-through form, for any iterable of parsed questions.
    parsed = list(iter_questions(mixed_path))
    assert list(check_not_oracle_content(parsed)) == parsed
    with pytest.raises(CorpusError, match="oracle variant by content"):
        list(check_not_oracle_content(parsed[:4], "o.json"))
    # No records at all keeps its own message.
    nothing = write_upstream(tmp_path / "n.json", [])
    assert oracle_by_content(nothing) is False
    with pytest.raises(CorpusError, match="holds no records"):
        plan_corpus(resolve_upstream(UpstreamSpec(source="path", path=str(nothing))), SampleSpec())


# ---- --sample above the corpus size ----------------------------------------------------


def test_sample_above_corpus_size_is_capped_said_and_pinned_effective(tmp_path, capsys):
    """Today: silently all 31, and the pin says 1000 (so it differs from asking for 31)."""
    code, out_1000, err = _corpus(
        ["--upstream", "sample", "--sample", "1000", "--out", str(tmp_path / "a")], capsys
    )
    assert code == 0, err
    notes = [line for line in out_1000.splitlines() if line.startswith("note:")]
    assert notes == [f"note: --sample 1000 capped to {SAMPLE_QUESTIONS} questions (all of them)"]
    code, out_31, err = _corpus(
        ["--upstream", "sample", "--sample", str(SAMPLE_QUESTIONS), "--out", str(tmp_path / "b")],
        capsys,
    )
    assert code == 0, err
    assert "note:" not in out_31
    code, _, err = _corpus(["--upstream", "sample", "--out", str(tmp_path / "c")], capsys)
    assert code == 0, err
    capped, asked_all = _manifest(tmp_path / "a"), _manifest(tmp_path / "b")
    assert capped["sample_spec"]["sample"] is None  # every question was drawn
    # The same pin as asking for all 31, and as asking for no sample at all (the default).
    assert (
        capped["sample_spec"]
        == asked_all["sample_spec"]
        == _manifest(tmp_path / "c")["sample_spec"]
    )
    assert capped["sample_requested"] == 1000
    assert capped["sample_note"] == notes[0].removeprefix("note: ")
    assert "sample_requested" not in asked_all and "sample_note" not in asked_all
    assert capped["counts"]["questions_selected"] == SAMPLE_QUESTIONS
    for name in ("goldens.jsonl", "fixtures.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_plan_exposes_the_cap_and_keeps_it_through_plan_json(tmp_path):
    up = resolve_upstream(UpstreamSpec())
    plan = plan_corpus(up, SampleSpec(sample=1000, seed=3))
    # What was drawn: every question (the seed ranks nothing then), as the default pins it.
    assert plan.spec == SampleSpec(floor=1) == plan_corpus(up, SampleSpec()).spec
    assert plan.requested_sample == 1000 and plan.sample_capped
    assert plan.sample_note == f"--sample 1000 capped to {SAMPLE_QUESTIONS} questions (all of them)"
    back = CorpusPlan.from_json(json.loads(json.dumps(plan.to_json())), plan.goldens)
    assert (back.spec, back.requested_sample, back.sample_note) == (
        plan.spec,
        1000,
        plan.sample_note,
    )
    exact = plan_corpus(up, SampleSpec(sample=12))
    assert exact.sample_note is None and not exact.sample_capped
    everything = plan_corpus(up, SampleSpec())
    assert everything.sample_note is None and everything.spec.sample is None


def test_sample_short_of_the_request_by_equal_quotas_is_noted(tmp_path):
    # Three strata of 5: 7 cannot be shared equally, so 6 are drawn; the pin keeps 7
    # (it reproduces this draw), the note says what happened.
    recs = [
        record(f"{t[:2]}{i}", t)
        for t in ("multi-session", "knowledge-update", "temporal-reasoning")
        for i in range(5)
    ]
    up = write_upstream(tmp_path / "up.json", recs)
    manifest = build_corpus(
        resolve_upstream(UpstreamSpec(source="path", path=str(up))),
        tmp_path / "out",
        SampleSpec(sample=7),
    )
    assert manifest["counts"]["questions_selected"] == 6
    assert manifest["sample_spec"]["sample"] == 7 and "sample_requested" not in manifest
    assert manifest["sample_note"] == (
        "--sample 7 drew 6 questions: strata of equal size keep equal quotas"
    )
