"""`judge-check` end to end over the wire: the real openai SDK against the scripted local
server, the layer scoring itself builds, every labelled item and probe, the files it writes
(accuracy and kappa recomputed here from verdicts.jsonl by hand), the store, the cache, and
the CLI's one-line refusals of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline import cli
from eval_pipeline.corpus.judge_labels import (
    DEFAULT_LABELS,
    invariant_items,
    load_labels,
    load_probes,
)
from eval_pipeline.score.agreement import AgreementStore, read_agreement
from eval_pipeline.score.judge_check import (
    INVARIANT_SUBDIR,
    judge_agreement_pins,
    run_judge_check,
)
from eval_pipeline.score.judges import prompt_hash
from eval_pipeline.tier2.invariant_judge import invariant_prompt_hash
from eval_pipeline_tests.wire_server import RecordedRequest, ScriptedReply, WireServer

LABELS = load_labels()
PROBES = load_probes()
BY_RESPONSE = {i.response: i for i in LABELS.items}
INVARIANT = {i.response: i for i in invariant_items(LABELS).items}
# An imperfect scripted judge, so the figures are not all 1: lenient on padding without an
# answer, no verdict at all on hedged answers (garbage, then garbage to the repair).
LENIENT = "verbose_no_answer"
SILENT = "hedged_correct"


def answer_verdict(response: str) -> str | None:
    """What the scripted answer judge says to a response (None: it gives no verdict)."""
    item = BY_RESPONSE.get(response)
    if item is not None:
        if item.hard_case == SILENT:
            return None
        return "yes" if item.hard_case == LENIENT else item.label
    for pair in PROBES.pairs:  # a probe variant: padding always passes
        if response == pair.b.response and pair.probe == "terse_vs_padded":
            return "yes"
        if response in (pair.a.response, pair.b.response):
            return pair.label
    raise AssertionError(f"unknown response {response[:60]!r}")


def _grades(ok: bool) -> dict:
    g = (4, 4, 3, 3) if ok else (1, 2, 4, 3)
    names = ("faithfulness", "coverage", "clarity", "usefulness")
    return {
        **{n: {"score": s, "reason": n} for n, s in zip(names, g, strict=True)},
        "unsupported_claims": [] if ok else ["an invented claim"],
    }


def responder(request: RecordedRequest) -> ScriptedReply:
    text = request.last_user_text
    system = " ".join(str(m.get("content", "")) for m in request.messages)
    if "InvariantGrades" in system:
        item = INVARIANT[text.split("Assistant's answer: ", 1)[1].strip()]
        return ScriptedReply(text=json.dumps(_grades(item.expected_invariant == "yes")))
    response = text.split("Assistant's response: ", 1)[-1].strip()
    if response not in BY_RESPONSE and not any(
        response in (p.a.response, p.b.response) for p in PROBES.pairs
    ):
        return ScriptedReply(text="no idea")  # a repair request: no verdict again
    verdict = answer_verdict(response)
    if verdict is None:
        return ScriptedReply(text="Hmm, hard to say.")
    return ScriptedReply(text=json.dumps({"verdict": verdict, "reason": "scripted"}))


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("EVAL_PIPELINE_HOME", str(home))
    monkeypatch.setenv("JUDGE_CHECK_TEST_KEY", "sk-judge-check-LEAKCANARY-123")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-judge-check-LEAKCANARY-123")
    monkeypatch.delenv("CONFIDENT_API_KEY", raising=False)
    return home


def _spec(server: WireServer) -> str:
    return f"openai_compatible:judge-model@{server.openai_base_url}"


def _hand_kappa(pairs: list[tuple[str, str]]) -> float:
    """Cohen's kappa from its definition: (p_o - p_e) / (1 - p_e)."""
    n = len(pairs)
    p_o = sum(a == b for a, b in pairs) / n
    p_e = sum(
        (sum(a == c for a, _ in pairs) / n) * (sum(b == c for _, b in pairs) / n)
        for c in ("yes", "no")
    )
    return (p_o - p_e) / (1 - p_e)


def test_judge_check_writes_both_files_and_they_recompute(home, tmp_path):
    out = tmp_path / "check"
    with WireServer(responder=responder) as server:
        spec = _spec(server)
        outcome = run_judge_check(spec, methods=["reference"], out_dir=out, progress_stream=None)
        calls = server.request_count
        # the same check again: every verdict comes from the layer's cache
        again = run_judge_check(
            spec, methods=["reference"], out_dir=tmp_path / "again", progress_stream=None
        )
        retried = server.request_count - calls

    silent = [i for i in LABELS.items if i.hard_case == SILENT]
    failed_probe_sides = [
        p
        for p in PROBES.pairs
        if p.probe != "response_order"
        for v in (p.a, p.b)
        if answer_verdict(v.response) is None
    ]
    # failures are never cached: each is asked again, its call and its one repair
    assert retried == 2 * (len(silent) + len(failed_probe_sides))
    assert outcome.out_dir == out

    # verdicts.jsonl: one line per item, in file order, verdict null when none was given
    lines = [json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines()]
    assert [x["id"] for x in lines] == [i.id for i in LABELS.items]
    assert all(set(x) == {"id", "label", "verdict", "reason"} for x in lines)
    for x in lines:
        item = LABELS.by_id()[x["id"]]
        assert x["label"] == item.label
        assert x["verdict"] == answer_verdict(item.response)
    unscored = [x for x in lines if x["verdict"] is None]
    assert len(unscored) == len(silent) and all(x["reason"] for x in unscored)

    # accuracy and kappa recomputed by hand from the file alone
    judged = [(x["label"], x["verdict"]) for x in lines if x["verdict"] is not None]
    accuracy = sum(a == b for a, b in judged) / len(judged)
    agreement = json.loads((out / "agreement.json").read_text())
    assert agreement["n_items"] == len(LABELS) == len(lines)
    assert agreement["n_judged"] == len(judged)
    assert agreement["n_unscored"] == len(unscored)
    assert agreement["accuracy"]["estimate"] == pytest.approx(accuracy)
    assert agreement["kappa"]["estimate"] == pytest.approx(_hand_kappa(judged))
    assert 0 < agreement["kappa"]["estimate"] < 1 and accuracy < 1  # the lenient cases
    lo, hi = agreement["kappa"]["low"], agreement["kappa"]["high"]
    assert lo <= agreement["kappa"]["estimate"] <= hi
    lenient = agreement["by_hard_case"][LENIENT]
    assert lenient["no_yes"] == lenient["n_judged"] > 0 and lenient["false_yes_rate"] == 1.0
    assert agreement["by_hard_case"][SILENT]["n_unscored"] == len(silent)
    assert agreement["judge"] == {
        "kind": "answer_judge",
        "model": spec,
        "prompt_hash": prompt_hash(),
    }

    # the probes: padding turns every terse "no" into a "yes"; order is not applicable
    probes = agreement["probes"]["results"]
    pad = probes["terse_vs_padded"]
    pad_pairs = [p for p in PROBES.pairs if p.probe == "terse_vs_padded"]
    no_pairs = [p for p in pad_pairs if p.label == "no"]
    assert pad["status"] == "measured" and pad["n_judged_pairs"] == len(pad_pairs)
    assert pad["delta"] == pytest.approx(len(no_pairs) / len(pad_pairs))
    assert pad["delta_by_label"] == {"yes": 0.0, "no": 1.0}
    assert probes["response_order"]["status"] == "not_applicable"
    assert probes["hedged_vs_confident"]["status"] == "measured"

    # the invariant judge: its own files, its own prompt hash, its labels
    inv = read_agreement(out / INVARIANT_SUBDIR / "agreement.json")
    assert inv.judge.kind == "invariant_judge" and inv.judge.prompt_hash == invariant_prompt_hash()
    assert inv.n_items == len(INVARIANT) and inv.accuracy.estimate == 1.0
    inv_lines = (out / INVARIANT_SUBDIR / "verdicts.jsonl").read_text().splitlines()
    assert len(inv_lines) == len(INVARIANT)
    # behind the rules: an answer they find wrong fails the invariants; never a right one
    both = read_agreement(out / INVARIANT_SUBDIR / "rules_then_model" / "agreement.json")
    assert both.method == "rules_then_model" and both.accuracy.estimate == 1.0

    # stored under the state dir, keyed by judge and prompt hash; the re-check replaced it
    store = AgreementStore()
    assert store.root == home / "judge_agreement"
    got = store.get(spec, prompt_hash())
    assert got is not None and got.measured_at == again.answer.result.measured_at
    assert got.kappa.estimate == pytest.approx(agreement["kappa"]["estimate"])
    assert store.get(spec, invariant_prompt_hash()).judge.kind == "invariant_judge"
    assert "LEAKCANARY" not in (out / "verdicts.jsonl").read_text()

    # what a run's manifest records for this judge
    pins = judge_agreement_pins(spec)
    assert pins["invariant_prompt_hash"] == invariant_prompt_hash()
    assert pins["agreement"]["status"] == "checked"
    assert pins["agreement"]["kappa"] == pytest.approx(agreement["kappa"]["estimate"])
    assert pins["agreement"]["n_unscored"] == len(silent)
    assert any("below 0.8" in w or "unscored" in w for w in pins["agreement"]["warnings"])
    assert pins["invariant_agreement"]["kappa"] == 1.0
    assert judge_agreement_pins("openai:never-checked")["agreement"]["status"] == "none"
    assert judge_agreement_pins("offline") == {}  # nothing judged, nothing pinned


def _small_labels(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_cli_judge_check_prints_the_figures_and_the_dir(home, tmp_path, capsys):
    raw = DEFAULT_LABELS.read_text(encoding="utf-8").splitlines()
    labels = _small_labels(tmp_path, raw[:6])
    with WireServer(responder=responder) as server:
        code = cli.main(
            ["judge-check", "--judge", _spec(server), "--labels", str(labels), "--no-probes"]
            + ["--methods", "reference"]
        )
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    check_dir = Path(out[-1])
    assert check_dir.parent == home / "judge_checks"  # default: a fresh dir under the state dir
    assert (check_dir / "verdicts.jsonl").is_file() and (check_dir / "agreement.json").is_file()
    assert not (check_dir / INVARIANT_SUBDIR).exists()  # no tier-2 item in these six
    assert out[0].startswith("reference ") and "kappa" in out[0] and "as shipped" in out[0]
    result = read_agreement(check_dir / "agreement.json")
    assert result.n_items == 6 and result.probes is None


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.update(label="maybe"), ":2: item 't1-ssu-02': field 'label'"),
        (lambda d: d.pop("response"), ":2: item 't1-ssu-02': field 'response': missing"),
        (
            lambda d: d.update(tier=2, question_type="tier2-time", golden="t2-nope-q1"),
            "field 'golden'",
        ),
    ],
)
def test_cli_refuses_a_malformed_label_file_in_one_line(home, tmp_path, capsys, mutate, needle):
    raw = DEFAULT_LABELS.read_text(encoding="utf-8").splitlines()
    second = json.loads(raw[1])
    mutate(second)
    labels = _small_labels(tmp_path, [raw[0], json.dumps(second), raw[2]])
    out_dir = tmp_path / "never"
    with WireServer(responder=responder) as server:
        code = cli.main(
            ["judge-check", "--judge", _spec(server), "--labels", str(labels)]
            + ["--out", str(out_dir)]
        )
        assert server.request_count == 0  # refused before any call
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and needle in err[0], err
    assert not out_dir.exists()


def test_cli_refuses_a_model_method_offline_and_a_missing_key(home, tmp_path, capsys, monkeypatch):
    args = ["judge-check", "--judge", "offline", "--methods", "match,reference"]
    assert cli.main([*args, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--methods reference: needs a judge model" in err[0], err
    monkeypatch.delenv("OPENAI_API_KEY")
    assert cli.main(["judge-check", "--judge", "openai:gpt-4o-mini"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--judge" in err[0] and "OPENAI_API_KEY" in err[0]
    assert not (tmp_path / "x").exists()


def test_no_invariant_skips_that_check_but_still_validates_goldens(home, tmp_path):
    with WireServer(responder=responder) as server:
        outcome = run_judge_check(
            _spec(server),
            methods=["reference"],
            with_probes=False,
            with_invariant=False,
            out_dir=tmp_path / "c",
            progress_stream=None,
        )
        assert server.request_count == len(LABELS) + sum(
            1 for i in LABELS.items if i.hard_case == SILENT
        )  # one call per item, and one repair per failed one
    assert outcome.invariant is None and not (tmp_path / "c" / INVARIANT_SUBDIR).exists()
    assert outcome.answer.result.n_items == len(LABELS) and outcome.answer.result.probes is None
    assert len(outcome.stored) == 1
