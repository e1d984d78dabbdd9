"""compare under a judge panel, on synthetic bundles: a real delta stays real only if every
member keeps its sign and clears the floor; the band (min..max of the members' deltas) is in
the text and the HTML report; split questions and member-dependent flips are listed; panels
that differ give no band and say why, never a refusal."""

from __future__ import annotations

import copy
import json
from typing import Any

from eval_pipeline.runs.cli import print_comparison
from eval_pipeline.runs.compare import compare, comparison_markdown, panel_lines
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.report import render_comparison_report, render_run_report
from eval_pipeline_tests.runs.synthetic import BASE_PINS, hand_floor, row, write_run

REF = "reference=openai:gpt-4o-mini"
MEMBERS = ("match", REF)


def _pins(members: tuple[str, ...] = MEMBERS, ref_hash: str = "h-ref") -> dict[str, Any]:
    pins = copy.deepcopy(BASE_PINS)
    pins["judge"]["panel"] = [
        {
            "member": m,
            "method": m.split("=")[0],
            "method_hash": "h-match" if m == "match" else ref_hash,
            "model": m.split("=", 1)[1] if "=" in m else None,
            "role": None,
        }
        for m in members
    ]
    return pins


def _rows(main: list[bool], by_member: dict[str, list[bool | None]]) -> list[dict[str, Any]]:
    """Rows whose main coverage is `main` and each member's coverage its list."""
    out = []
    for i, covered in enumerate(main):
        r = row(f"q{i}", covered)
        scores = {m: None if v[i] is None else float(v[i]) for m, v in by_member.items()}
        judged = {s for s in scores.values() if s is not None}
        r["judge_panel"] = scores
        r["panel_covered"] = {m: v[i] for m, v in by_member.items()}
        r["panel_split"] = (
            None if sum(s is not None for s in scores.values()) < 2 else len(judged) > 1
        )
        out.append(r)
    return out


N = 40
BASE = [i < 10 for i in range(N)]  # 25%
CAND = [i < 30 for i in range(N)]  # 75%: +50 pp, 20 gained, none lost


def _pair(tmp_path, base_members, cand_members, *, base_pins=None, cand_pins=None):
    base = write_run(tmp_path, _rows(BASE, base_members), label="base", pins=base_pins or _pins())
    cand = write_run(tmp_path, _rows(CAND, cand_members), label="cand", pins=cand_pins or _pins())
    return base, cand


def test_all_members_agree_the_delta_is_real(tmp_path):
    base, cand = _pair(
        tmp_path,
        {"match": BASE, REF: BASE},
        {"match": CAND, REF: [i < 28 for i in range(N)]},  # +45 pp
    )
    c = compare(base, cand, hand_floor(base, 5.0))
    assert c.verdict == "IMPROVED" and c.verdict_without_panel is None
    assert "robust to the judge panel (2 members agree)" in c.verdict_reason
    band = c.judge_panel.tiers[0]
    assert (band.low_pp, band.high_pp, band.main_delta_pp) == (45.0, 50.0, 50.0)
    assert band.robust is True and all(m.holds for m in band.members)
    text = "\n".join(panel_lines(c))
    assert "tier 1 sensitivity band +45.0 pp .. +50.0 pp (main +50.0 pp, real; robust)" in text
    assert f"    {REF}: 25.0% → 70.0% (+45.0 pp, 40 paired)" in text
    # Member-dependent flips: q28, q29 gained under match (and the main judge), not under REF.
    flips = {f.question_id: f.by_member for f in c.judge_panel.member_dependent_flips}
    assert flips == {
        "q28": {"match": "gained", REF: "same"},
        "q29": {"match": "gained", REF: "same"},
    }
    assert c.judge_panel.split_candidate == ["q28", "q29"] and c.judge_panel.split_base == []


def test_one_member_flips_the_sign_and_the_verdict_is_downgraded(tmp_path, capsys):
    base, cand = _pair(
        tmp_path,
        {"match": BASE, REF: [i < 20 for i in range(N)]},  # REF: 50% → 40%
        {"match": CAND, REF: [i < 16 for i in range(N)]},
    )
    c = compare(base, cand, hand_floor(base, 5.0))
    assert c.tiers[0].classification == "real"  # the main judge alone: +50 pp, real
    assert c.verdict == "INCONCLUSIVE" and c.verdict_without_panel == "IMPROVED"
    assert c.verdict_reason.startswith(
        f"IMPROVED downgraded: tier 1 +50.0 pp is not robust to the judge panel: {REF} "
        "-10.0 pp (opposite sign, "
    )
    band = c.judge_panel.tiers[0]
    assert (band.low_pp, band.high_pp) == (-10.0, 50.0) and band.robust is False
    held = {m.member: m.holds for m in band.members}
    assert held == {"match": True, REF: False}
    print_comparison(c, tmp_path / "report.html")
    out = capsys.readouterr().out
    assert "judge panel (2 members: match, reference=openai:gpt-4o-mini):" in out
    assert "tier 1 sensitivity band -10.0 pp .. +50.0 pp (main +50.0 pp, real; NOT ROBUST)" in out
    assert "verdict: INCONCLUSIVE (IMPROVED downgraded: tier 1 +50.0 pp is not robust" in out
    assert "```" in comparison_markdown(c) and "sensitivity band" in comparison_markdown(c)


def test_a_member_within_the_floor_is_not_robust_either(tmp_path):
    base, cand = _pair(
        tmp_path,
        {"match": BASE, REF: BASE},
        {"match": CAND, REF: [i < 11 for i in range(N)]},  # +2.5 pp, same sign, not real
    )
    c = compare(base, cand, hand_floor(base, 5.0))
    assert c.verdict == "INCONCLUSIVE"
    assert f"{REF} +2.5 pp (not real)" in c.verdict_reason


def test_the_band_is_in_the_html_report(tmp_path):
    base, cand = _pair(
        tmp_path,
        {"match": BASE, REF: [i < 20 for i in range(N)]},
        {"match": CAND, REF: [i < 16 for i in range(N)]},
    )
    c = compare(base, cand, hand_floor(base, 5.0))
    html = render_comparison_report(c)
    assert "Judge panel: sensitivity band" in html
    assert "band -10.0 pp .. +50.0 pp (main +50.0 pp, real; NOT ROBUST)" in html
    assert "Without the judge panel the verdict would be IMPROVED" in html
    assert "no: -10.0 pp (opposite sign" in html
    assert "Flips that depend on the member" in html
    dumped = json.loads(c.model_dump_json())["judge_panel"]["tiers"][0]
    assert dumped["robust"] is False and dumped["low_pp"] == -10.0  # comparison.json too
    run_html = render_run_report(load_run(cand))
    assert "<h2>Judge panel</h2>" in run_html and "The panel splits on" in run_html


def test_uncalibrated_the_band_is_still_shown(tmp_path):
    base, cand = _pair(
        tmp_path,
        {"match": BASE, REF: BASE},
        {"match": CAND, REF: [i < 16 for i in range(N)]},
    )
    c = compare(base, cand)
    assert c.verdict == "INCONCLUSIVE" and c.verdict_without_panel is None
    band = c.judge_panel.tiers[0]
    assert (band.low_pp, band.high_pp) == (15.0, 50.0) and band.robust is None
    assert "main +50.0 pp, cannot tell; main delta not real" in "\n".join(panel_lines(c))


def test_panels_that_differ_give_no_band_and_say_why(tmp_path):
    members = {"match": BASE, REF: BASE}
    cand_members = {"match": CAND, REF: [i < 16 for i in range(N)]}
    base, cand = _pair(tmp_path, members, cand_members, cand_pins=_pins(ref_hash="h-other"))
    c = compare(base, cand, hand_floor(base, 5.0))  # not a refusal
    assert c.verdict == "IMPROVED" and c.judge_panel.band is False
    assert c.judge_panel.reason == f"member {REF} is pinned differently in the two runs (method)"
    assert "  no band: member" in "\n".join(panel_lines(c))
    base2 = write_run(tmp_path, _rows(BASE, members), label="nopanel", pins=BASE_PINS)
    c2 = compare(base2, cand, hand_floor(base2, 5.0))
    assert c2.judge_panel.reason == "the base was scored without a judge panel"
    assert "No band: the base was scored without a judge panel" in render_comparison_report(c2)


def test_without_a_panel_compare_is_as_before(tmp_path):
    base = write_run(tmp_path, [row(f"q{i}", v) for i, v in enumerate(BASE)], label="b")
    cand = write_run(tmp_path, [row(f"q{i}", v) for i, v in enumerate(CAND)], label="c")
    c = compare(base, cand, hand_floor(base, 5.0))
    assert c.judge_panel is None and panel_lines(c) == []
    assert c.verdict == "IMPROVED" and "judge panel" not in c.verdict_reason
    assert "sensitivity band" not in render_comparison_report(c)
