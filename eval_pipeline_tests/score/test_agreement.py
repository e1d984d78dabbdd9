"""Judge agreement on fixed data: hand-computed kappa, unscored items, one-class sets, bias
probes, the published files and the store keyed by (judge model, prompt hash)."""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction

import pytest

from eval_pipeline.corpus.judge_labels import LabelItem, LabelSet, ProbePair, load_labels
from eval_pipeline.score import agreement as agreement_module
from eval_pipeline.score.agreement import (
    AGREEMENT_FILE,
    ORDER_FIXED_NOTE,
    VERDICTS_FILE,
    AgreementStore,
    IntervalSettings,
    ProbePairVerdicts,
    VerdictRecord,
    agreement_pin,
    agreement_warnings,
    cohen_kappa,
    compute_agreement,
    kappa_from_counts,
    lookup_agreement,
    probe_report,
    probe_verdicts,
    read_agreement,
    recompute_from_verdicts,
    verdict_of,
    verdict_record,
    write_check,
)
from eval_pipeline.score.gate import MetricResult

MODEL = "openai_compatible:judge-7b@http://127.0.0.1:8080/v1"
HASH = "a" * 64
FAST = IntervalSettings(resamples=500)


def _item(i, label, qtype="multi-session", hard="baseline_correct", tier=1, abstention=False):
    if hard == "baseline_correct" and label == "no":
        hard = "baseline_wrong"
    return LabelItem(
        id=f"x-{i:03d}",
        tier=tier,
        question_type=qtype,
        abstention=abstention,
        question="q",
        reference="r",
        response="a",
        label=label,
        why="w",
        hard_case=hard,
    )


def _table(yy, yn, ny, nn):
    """Labels and verdicts realising a 2×2 table (label rows, verdict columns)."""
    labels = ["yes"] * (yy + yn) + ["no"] * (ny + nn)
    verdicts = ["yes"] * yy + ["no"] * yn + ["yes"] * ny + ["no"] * nn
    return labels, verdicts


def _set(labels, **kw):
    return LabelSet(
        path="fixed", sha256="f" * 64, items=[_item(i, x, **kw) for i, x in enumerate(labels)]
    )


def _records(items, verdicts):
    return [
        VerdictRecord(id=i.id, label=i.label, verdict=v, reason="r")
        for i, v in zip(items, verdicts, strict=True)
    ]


def test_kappa_matches_hand_computed_tables():
    # 50 items: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no.
    # p_o = 35/50 = 0.7; p_e = (25/50)(30/50) + (25/50)(20/50) = 0.3 + 0.2 = 0.5;
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    assert cohen_kappa(*_table(20, 5, 10, 15)) == pytest.approx(0.4)
    # 100 items: 45, 15, 25, 15. p_o = 0.6; p_e = 0.6·0.7 + 0.4·0.3 = 0.54;
    # kappa = 0.06 / 0.46 = 3/23
    assert Fraction(kappa_from_counts(45, 15, 25, 15)).limit_denominator(1000) == Fraction(3, 23)
    assert cohen_kappa(*_table(10, 0, 0, 10)) == 1.0
    assert cohen_kappa(*_table(0, 10, 10, 0)) == -1.0
    assert cohen_kappa(*_table(5, 5, 5, 5)) == 0.0


def test_kappa_one_class_cases():
    assert kappa_from_counts(0, 0, 0, 0) is None  # nothing judged
    assert kappa_from_counts(10, 0, 0, 0) is None  # both raters: all yes -> undefined
    assert kappa_from_counts(0, 0, 0, 10) is None
    assert kappa_from_counts(7, 3, 0, 0) == 0.0  # only the labels are one class
    assert kappa_from_counts(7, 0, 3, 0) == 0.0  # only the verdicts are one class


def test_verdicts_come_from_the_judges_metric_result():
    item = _item(1, "yes")
    assert verdict_of(MetricResult.judged(1.0, 1.0, "ok", gating=True)) == "yes"
    assert verdict_of(MetricResult.judged(0.0, 1.0, "bad", gating=True)) == "no"
    failed = MetricResult.unscored("judge failed", gating=True, error="HTTP 500")
    rec = verdict_record(item, failed)
    assert rec.verdict is None and rec.reason == "HTTP 500" and rec.label == "yes"
    with pytest.raises(ValueError):
        verdict_of(MetricResult.judged(0.5, 1.0, "?", gating=False))


def test_agreement_on_fixed_data_with_unscored_items():
    labels, verdicts = _table(20, 5, 10, 15)
    s = _set(labels + ["yes", "no", "no"])
    res = compute_agreement(
        s,
        _records(s.items, verdicts + [None, None, None]),
        judge_model=MODEL,
        prompt_hash=HASH,
        settings=FAST,
    )
    assert (res.n_items, res.n_judged, res.n_unscored) == (53, 50, 3)
    assert res.accuracy.estimate == pytest.approx(0.7) and res.accuracy.n == 50
    assert res.kappa.estimate == pytest.approx(0.4) and res.kappa.n == 50
    assert res.accuracy.low < 0.7 < res.accuracy.high
    assert -1 <= res.kappa.low < 0.4 < res.kappa.high <= 1
    c = res.confusion
    assert (c.yes_yes, c.yes_no, c.no_yes, c.no_no) == (20, 5, 10, 15)
    assert c.n_unscored == 3 and c.false_yes_rate == pytest.approx(10 / 25)
    assert c.false_no_rate == pytest.approx(5 / 25) and c.judge_yes_rate == pytest.approx(0.6)
    again = compute_agreement(
        s,
        _records(s.items, verdicts + [None, None, None]),
        judge_model=MODEL,
        prompt_hash=HASH,
        settings=FAST,
    )
    assert again.kappa == res.kappa and again.accuracy == res.accuracy  # seeded


def test_all_unscored_is_counted_and_rates_are_none():
    s = _set(["yes", "no", "yes"])
    res = compute_agreement(
        s, _records(s.items, [None] * 3), judge_model=MODEL, prompt_hash=HASH, settings=FAST
    )
    assert (res.n_judged, res.n_unscored) == (0, 3)
    assert res.accuracy.estimate is None and res.kappa.estimate is None
    assert res.confusion.accuracy is None and res.confusion.false_yes_rate is None
    assert "no agreement check" not in " ".join(agreement_warnings(res))
    assert any("undefined" in w for w in agreement_warnings(res))


def test_one_class_label_sets():
    s = _set(["yes"] * 6)
    perfect = compute_agreement(
        s, _records(s.items, ["yes"] * 6), judge_model=MODEL, prompt_hash=HASH, settings=FAST
    )
    assert perfect.accuracy.estimate == 1.0 and perfect.accuracy.low == 1.0
    assert perfect.kappa.estimate is None and "undefined" in perfect.kappa.note
    mixed = compute_agreement(
        s,
        _records(s.items, ["yes"] * 4 + ["no"] * 2),
        judge_model=MODEL,
        prompt_hash=HASH,
        settings=FAST,
    )
    assert mixed.kappa.estimate == 0.0 and mixed.accuracy.estimate == pytest.approx(4 / 6)


def test_confusion_per_type_and_hard_case():
    items = [
        _item(0, "yes", qtype="temporal-reasoning", hard="temporal_off_by_one"),
        _item(1, "no", qtype="temporal-reasoning", hard="temporal_off_by_one"),
        _item(2, "no", qtype="temporal-reasoning", hard="temporal_off_by_more"),
        _item(3, "no", qtype="knowledge-update", hard="outdated_value"),
        _item(4, "yes", qtype="knowledge-update", hard="updated_and_outdated"),
        _item(5, "no", tier=2, qtype="tier2-time", hard="outdated_value"),
        _item(6, "yes", qtype="multi-session", hard="abstention_refusal", abstention=True),
    ]
    s = LabelSet(path="p", sha256="0" * 64, items=items)
    res = compute_agreement(
        s,
        _records(items, ["yes", "yes", "no", "yes", "yes", None, "no"]),
        judge_model=MODEL,
        prompt_hash=HASH,
        settings=FAST,
    )
    tr = res.by_question_type["temporal-reasoning"]
    assert (tr.yes_yes, tr.no_yes, tr.no_no, tr.n_judged) == (1, 1, 1, 3)
    assert res.by_hard_case["temporal_off_by_one"].accuracy == 0.5
    outdated = res.by_hard_case["outdated_value"]
    assert (outdated.n_items, outdated.n_judged, outdated.n_unscored) == (2, 1, 1)
    assert outdated.false_yes_rate == 1.0  # the judge accepted the outdated value
    assert set(res.by_tier) == {"1", "2"} and res.by_tier["2"].n_unscored == 1
    assert res.by_abstention["abstention"].yes_no == 1
    assert list(res.by_question_type) == sorted(res.by_question_type)


def test_records_must_match_the_label_set():
    s = _set(["yes", "no"])
    recs = _records(s.items, ["yes", "no"])
    with pytest.raises(ValueError, match="no verdict"):
        compute_agreement(s, recs[:1], judge_model=MODEL, prompt_hash=HASH)
    with pytest.raises(ValueError, match="two verdicts"):
        compute_agreement(s, recs + recs[:1], judge_model=MODEL, prompt_hash=HASH)
    wrong = [recs[0].model_copy(update={"label": "no"}), recs[1]]
    with pytest.raises(ValueError, match="record label"):
        compute_agreement(s, wrong, judge_model=MODEL, prompt_hash=HASH)


def test_a_perfect_judge_of_the_protocol_agrees_with_the_shipped_set():
    s = load_labels()
    res = compute_agreement(
        s,
        _records(s.items, [i.label for i in s.items]),
        judge_model=MODEL,
        prompt_hash=HASH,
        settings=FAST,
    )
    assert res.accuracy.estimate == 1.0 and res.kappa.estimate == 1.0
    assert res.kappa.low == res.kappa.high == 1.0


# --------------------------------------------------------------------------------------------
# bias probes


def _pair(i, probe, label="yes"):
    same = probe == "response_order"
    return ProbePair(
        id=f"p-{probe}-{i}",
        probe=probe,
        tier=1,
        question_type="multi-session",
        abstention=False,
        question="q",
        reference="r",
        label=label,
        why="w",
        a={"response": "Two."},
        b={
            "response": "Two." if same else "Well, two.",
            "order": "response_first" if same else "reference_first",
        },
    )


def _pv(p, a, b):
    return ProbePairVerdicts(id=p.id, probe=p.probe, label=p.label, a=a, b=b)


def test_probe_deltas_on_fixed_data():
    pad = [_pair(i, "terse_vs_padded") for i in range(4)] + [_pair(9, "terse_vs_padded", "no")]
    hedge = [_pair(i, "hedged_vs_confident") for i in range(3)]
    order = [_pair(i, "response_order") for i in range(2)]
    verdicts = [
        _pv(pad[0], "yes", "yes"),
        _pv(pad[1], "no", "yes"),  # padding made it pass
        _pv(pad[2], "no", "no"),
        _pv(pad[3], "yes", None),  # unscored on one side: left out of the delta
        _pv(pad[4], "no", "yes"),  # a wrong answer passing once padded
        _pv(hedge[0], "yes", "no"),
        _pv(hedge[1], "yes", "no"),
        _pv(hedge[2], "yes", "yes"),
    ]
    rep = probe_report(pad + hedge + order, verdicts, order_can_vary=False, settings=FAST)
    r = rep.results["terse_vs_padded"]
    assert (r.a, r.b, r.status) == ("terse", "padded", "measured")
    assert (r.n_pairs, r.n_judged_pairs, r.n_unscored_pairs) == (5, 4, 1)
    assert r.yes_rate_a == 0.25 and r.yes_rate_b == 0.75 and r.delta == 0.5
    assert r.delta_by_label == {"yes": pytest.approx(1 / 3), "no": 1.0}
    assert (r.flips_to_yes, r.flips_to_no) == (2, 0)
    assert r.delta_low <= 0.5 <= r.delta_high
    h = rep.results["hedged_vs_confident"]
    assert (h.a, h.b) == ("confident", "hedged") and h.delta == pytest.approx(-2 / 3)
    o = rep.results["response_order"]
    assert o.status == "not_applicable" and o.note == ORDER_FIXED_NOTE and o.n_pairs == 2
    assert [p.id for p in rep.pairs] == [v.id for v in verdicts]
    measured = probe_report(
        order,
        [_pv(order[0], "yes", "no"), _pv(order[1], "yes", "yes")],
        order_can_vary=True,
        settings=FAST,
    )
    assert measured.results["response_order"].delta == -0.5
    assert measured.results["terse_vs_padded"].n_pairs == 0


def test_probe_verdicts_from_metric_results():
    pair = _pair(0, "terse_vs_padded")
    ok = MetricResult.judged(1.0, 1.0, "fine", gating=True)
    failed = MetricResult.unscored("judge failed", gating=True, error="timeout")
    v = probe_verdicts(pair, ok, failed)
    assert (v.a, v.b, v.reason_a, v.reason_b) == ("yes", None, "fine", "timeout")
    assert (v.id, v.probe, v.label) == (pair.id, "terse_vs_padded", "yes")


def test_probe_verdicts_must_match_the_pairs():
    pad = [_pair(0, "terse_vs_padded")]
    with pytest.raises(ValueError, match="no verdicts"):
        probe_report(pad, [], order_can_vary=False)
    with pytest.raises(ValueError, match="unknown pair"):
        probe_report(pad, [_pv(_pair(5, "terse_vs_padded"), "yes", "yes")], order_can_vary=False)


# --------------------------------------------------------------------------------------------
# files and the store


def _result(labels=("yes", "no", "yes", "no"), verdicts=("yes", "no", "no", None), **kw):
    s = _set(list(labels))
    recs = _records(s.items, list(verdicts))
    return recs, compute_agreement(
        s,
        recs,
        judge_model=kw.get("model", MODEL),
        prompt_hash=kw.get("hash", HASH),
        measured_at=kw.get("at"),
        settings=FAST,
    )


def test_write_check_publishes_both_files_and_they_recompute(tmp_path):
    recs, res = _result()
    out = write_check(tmp_path / "check", recs, res)
    lines = out.verdicts.read_text("utf-8").splitlines()
    assert [json.loads(x) for x in lines][3] == {
        "id": "x-003",
        "label": "no",
        "verdict": None,
        "reason": "r",
    }
    stored = read_agreement(out.agreement)
    assert stored == out.result and stored.verdicts_sha256
    assert hashlib.sha256(out.verdicts.read_bytes()).hexdigest() == stored.verdicts_sha256
    again = recompute_from_verdicts(out.verdicts)
    assert again["accuracy"] == stored.accuracy.estimate == pytest.approx(2 / 3)
    assert again["kappa"] == stored.kappa.estimate
    assert (again["n_judged"], again["n_unscored"]) == (stored.n_judged, stored.n_unscored)
    raw = json.loads(out.agreement.read_text("utf-8"))
    for key in ("accuracy", "kappa", "n_judged", "n_unscored", "by_question_type", "by_hard_case"):
        assert key in raw


def test_write_check_leaves_nothing_on_failure(tmp_path, monkeypatch):
    recs, res = _result()

    def boom(_):
        raise RuntimeError("disk full")

    monkeypatch.setattr(agreement_module, "_json_text", boom)
    with pytest.raises(RuntimeError):
        write_check(tmp_path / "check", recs, res)
    assert not (tmp_path / "check").exists()
    assert list(tmp_path.iterdir()) == []


def test_write_check_redacts_reasons(tmp_path, monkeypatch):
    secret = "sk-agree-LEAKCANARY-0123456789abcdef"
    monkeypatch.setenv("AGREEMENT_TEST_KEY", secret)
    from eval_pipeline.llm.credentials import read_api_key

    read_api_key("AGREEMENT_TEST_KEY")  # registers it for redaction
    recs, res = _result()
    recs[0] = recs[0].model_copy(update={"reason": f"echo {secret}"})
    out = write_check(tmp_path / "c", recs, res)
    assert secret not in (tmp_path / "c" / VERDICTS_FILE).read_text("utf-8")
    assert (tmp_path / "c" / AGREEMENT_FILE).exists() and out.result.verdicts_sha256


def test_store_keys_by_judge_model_and_prompt_hash(tmp_path):
    store = AgreementStore(tmp_path / "store")
    _, old = _result(at="2025-01-01T00:00:00+00:00")
    _, new = _result(verdicts=("yes", "no", "yes", "no"), at="2025-02-01T00:00:00+00:00")
    path = store.put(old)
    assert path.is_file() and path.parent.parent == tmp_path / "store"
    assert store.get(MODEL, HASH) == old
    other = new.model_copy(update={"labels": new.labels.model_copy(update={"sha256": "e" * 64})})
    store.put(other)
    assert store.get(MODEL, HASH) == other  # the latest measured
    assert store.get(MODEL, HASH, labels_sha256="f" * 64) == old
    store.put(new)  # same label set: replaces the older check
    assert store.get(MODEL, HASH, labels_sha256="f" * 64) == new
    assert store.get(MODEL, "b" * 64) is None
    assert store.get("openai:gpt-4o-mini", HASH) is None
    # Neither is a check on the committed set: a user's file never stands in for it.
    assert lookup_agreement(MODEL, HASH, root=tmp_path / "store") is None
    assert len(store.all()) == 2


def test_store_skips_unreadable_entries(tmp_path):
    store = AgreementStore(tmp_path)
    _, res = _result(at="2025-01-01T00:00:00+00:00")
    path = store.put(res)
    (path.parent / "0000000000000000.json").write_text("{broken", "utf-8")
    assert store.get(MODEL, HASH) == res


def test_manifest_pin_and_warnings():
    assert agreement_pin(None) == {
        "status": "none",
        "warnings": ["no agreement check exists for this judge and prompt hash"],
    }
    _, res = _result(labels=["yes", "no"] * 10, verdicts=["yes", "no"] * 10)
    pin = agreement_pin(res)
    assert pin["status"] == "checked" and pin["kappa"] == 1.0 and pin["warnings"] == []
    _, poor = _result()
    assert any("below 0.8" in w for w in agreement_warnings(poor))
    assert any("unscored" in w for w in agreement_warnings(poor))


def test_the_scoring_judge_on_label_items_end_to_end(tmp_path, monkeypatch):
    """The pieces a judge-check composes: items as goldens, the scoring judge through the LLM
    layer (a scripted local judge: yes iff the response repeats the reference), verdicts,
    agreement, both files, and a recomputation from verdicts.jsonl."""
    from eval_pipeline.corpus.judge_labels import as_golden
    from eval_pipeline.llm import LLMLayer, LLMSettings, RetryPolicy
    from eval_pipeline.score.judges import longmemeval_judge, prompt_hash
    from eval_pipeline_tests.wire_server import ScriptedReply, WireServer

    monkeypatch.delenv("CONFIDENT_API_KEY", raising=False)
    monkeypatch.setenv("AGREEMENT_JUDGE_KEY", "sk-test-agreement-000")
    items = load_labels().items[:12]

    def responder(request):
        text = request.last_user_text
        ref = text.split("Correct answer: ")[1].split("\n\nAssistant's response: ")[0]
        said = text.split("Assistant's response: ")[1]
        if "Halifax" in said:
            return ScriptedReply(status=500, text="down")  # one item unscored
        verdict = "yes" if ref.lower().rstrip(".") in said.lower() else "no"
        return ScriptedReply(text=json.dumps({"verdict": verdict, "reason": "compared"}))

    with WireServer(responder=responder) as server:
        settings = LLMSettings.from_specs(
            {"judge": f"openai_compatible:judge-model@{server.openai_base_url}"},
            role_overrides={"judge": {"api_key_env": "AGREEMENT_JUDGE_KEY", "max_retries": 0}},
            cache_path=str(tmp_path / "cache.sqlite3"),
            retry=RetryPolicy(backoff_base_s=0.001, backoff_max_s=0.01),
        )
        layer = LLMLayer(settings)
        judge = layer.role("judge")

        async def run():
            return [await longmemeval_judge(judge, as_golden(i), i.response) for i in items]

        results = layer.run_sync(run())
        layer.close()
    records = [verdict_record(i, r) for i, r in zip(items, results, strict=True)]
    assert sum(r.verdict is None for r in records) == 1
    subset = LabelSet(path="labels.jsonl", sha256="0" * 64, items=items)
    res = compute_agreement(
        subset, records, judge_model=settings.roles["judge"].spec, prompt_hash=prompt_hash()
    )
    out = write_check(tmp_path / "check", records, res)
    again = recompute_from_verdicts(out.verdicts)
    assert again["n_unscored"] == res.n_unscored == 1 and again["n_judged"] == 11
    assert again["accuracy"] == res.accuracy.estimate and again["kappa"] == res.kappa.estimate
    store = AgreementStore(tmp_path / "store")
    store.put(out.result)
    found = store.get(settings.roles["judge"].spec, prompt_hash())
    assert found == out.result and found.verdicts_sha256
