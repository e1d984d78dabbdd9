"""report.html is for people (issue 12, item 7), read from the parsed page: tier-2 panels,
each question with its text, expected answer, hypothesis, collapsible context and why it
failed (or why it is unscored), no empty charts, a good direction for every metric, a reason
for every "–" interval, the run's status first, and every bundle string escaped."""

from __future__ import annotations

import re

import pytest

from eval_pipeline.runs.compare import compare
from eval_pipeline.runs.load import load_run
from eval_pipeline.runs.report import render_comparison_report, render_run_report
from eval_pipeline_tests.runs.html_dom import Node, parse
from eval_pipeline_tests.runs.synthetic import (
    BASE_PINS,
    golden,
    infra_row,
    no_judge_row,
    outcomes,
    row,
    set_pin,
    with_citations,
    write_run,
    write_run_with_goldens,
)

NASTY = "Turn <b>bold</b> | pipe \"double\" 'single' café 東京 — <script>x()</script> &amp; ü"
OFFLINE = set_pin(BASE_PINS, "judge", {"model": "offline", "prompt_hash": None})


def text_of(qid: str) -> str:
    return f"What did I say about {qid}?"


def goldens_for(rows, texts=None, **meta):
    texts = texts or {}
    return [
        golden(
            r["question_id"],
            texts.get(r["question_id"], text_of(r["question_id"])),
            tier=r["tier"],
            qtype=r["question_type"],
            abstention=r["abstention"],
            **meta.get(r["question_id"], {}),
        )
        for r in rows
    ]


def full_rows():
    """Tier 1 and tier 2: covered, not covered, unscored (infrastructure), abstention."""
    rows = [
        *outcomes("m", [True, True, False], qtype="multi-session", tokens=300),
        row("s0", True, qtype="single-session-user", tokens=120),
        *outcomes("a", [True, True], qtype="single-session-assistant", tokens=80),
        infra_row("g0", "graph_server", qtype="temporal-reasoning"),
        infra_row("j0", "judge", stage="judge", error="HTTP 500 from judge", qtype="multi-session"),
        row("x0", True, abstention=True, qtype="multi-session"),
        infra_row("x1", "judge", stage="judge", abstention=True, qtype="multi-session"),
        with_citations(row("t2-bug-q1", True, tier=2, qtype="tier2-bug"), 0.5, 1.0),
        with_citations(row("t2-combo-q1", False, tier=2, qtype="tier2-combo"), 1.0, 0.0),
        with_citations(row("t2-pref-q1", True, tier=2, qtype="tier2-pref"), None, None),
    ]
    rows[0]["retrieval_context"] = ["first turn", "second turn"]
    rows[0]["answer"] = "the answer m0 gave"
    rows[0]["expected_output"] = "what m0 should say"
    rows[0]["retrieval_metrics"]["turn"]["upstream"]["ndcg@5"] = 0.63  # a graded score
    rows[2]["metrics"]["evidence_recall"] = {
        "score": 0.0,
        "threshold": 1.0,
        "passed": False,
        "gating": True,
        "reason": "turn recall_all@10 over all evidence turns = 0",
        "error": None,
    }
    return rows


TIER2_META = {
    "t2-bug-q1": {"use_case": "BUG", "difficulty": "easy", "source_mix": ("doc",)},
    "t2-combo-q1": {
        "use_case": "COMBO",
        "difficulty": "adversarial",
        "source_mix": ("chat", "pr"),
        "dimensions": ("BUG", "TIME"),
    },
    "t2-pref-q1": {"use_case": "PREF", "difficulty": "easy", "source_mix": ("chat",)},
}


@pytest.fixture
def full(tmp_path):
    rows = full_rows()
    run_dir = write_run_with_goldens(tmp_path, rows, goldens_for(rows, **TIER2_META))
    return rows, parse(render_run_report(load_run(run_dir)))


def card(doc: Node, qid: str) -> tuple[Node, dict[str, str]]:
    node = doc.find("div", cls="q", id=f"q-{qid}")
    kv = {tr.find("th").text(): tr.find("td").text() for tr in node.find("table").find_all("tr")}
    return node, kv


def section(doc: Node, tag: str, title: str) -> list[Node]:
    """The elements after the heading `title`, up to the next heading of the same level."""
    head = next(h for h in doc.find_all(tag) if h.text() == title)
    out = []
    level = int(tag[1])
    for node in head.next_siblings():
        if re.fullmatch(r"h[1-6]", node.tag) and int(node.tag[1]) <= level:
            break
        if node.attrs.get("id") == "questions":  # the anchor before the questions' heading
            break
        out.append(node)
    return out


def charts(doc: Node) -> dict[str, Node]:
    return {svg.attrs["aria-label"]: svg for svg in doc.find_all("svg")}


def assert_no_empty_chart(doc: Node) -> None:
    for label, svg in charts(doc).items():
        legend = {"width": "10", "height": "10"}
        bars = [r for r in svg.find_all("rect") if {**r.attrs, **legend} != r.attrs]
        assert bars, f"chart without data: {label}"


def assert_dashes_say_why(doc: Node) -> None:
    for td in doc.find_all("td"):
        if td.text().startswith("–"):
            assert re.fullmatch(r"– \([^()]+\)", td.text()), td.text()


def test_tier2_panels_each_with_a_chart_and_a_table(full, tmp_path):
    _, doc = full
    assert any(h.text() == "Tier-2 panels" for h in doc.find_all("h3"))
    expected = {
        "use case": ["BUG", "COMBO", "PREF"],
        "difficulty": ["adversarial", "easy"],
        "source mix": ["chat", "chat+pr", "doc"],
        "COMBO dimension": ["BUG", "TIME"],
    }
    for title, keys in expected.items():
        nodes = section(doc, "h4", f"Per {title}")
        svg = next(n for n in nodes if n.tag == "svg")
        assert svg.attrs["aria-label"] == f"Tier 2: coverage per {title} (higher is better)"
        tab = next(n for n in nodes if n.tag == "table")
        assert tab.headers()[0] == title and [r[0] for r in tab.rows()] == keys
    combo = next(n for n in section(doc, "h4", "Per use case") if n.tag == "table")
    bug, combo_row = combo.rows()[0], combo.rows()[1]
    assert bug[5:8] == ["100.0%", "50.0%", "100.0%"]  # coverage, citation precision, recall
    assert combo_row[5] == "0.0%" and bug[8] == "unscored"  # a judge pin: no "(no judge)"
    # Tier 1 only: no panels. Tier 2 without COMBO: one line instead of an empty panel.
    t1 = outcomes("q", [True, False])
    doc1 = parse(render_run_report(load_run(write_run_with_goldens(tmp_path, t1, goldens_for(t1)))))
    assert "Tier-2 panels" not in doc1.text()
    t2 = [with_citations(row("t2-bug-q1", True, tier=2, qtype="tier2-bug"), 1.0, 1.0)]
    run = write_run_with_goldens(tmp_path, t2, goldens_for(t2, **TIER2_META))
    doc2 = parse(render_run_report(load_run(run)))
    lines = [p.text() for p in section(doc2, "h4", "Per COMBO dimension")]
    assert lines == ["No COMBO dimension panel: no COMBO scenario in this run."]
    assert not any("COMBO dimension" in label for label in charts(doc2))


def test_each_question_shows_text_expected_hypothesis_context_and_why(full):
    rows, doc = full
    for r in rows:
        node, kv = card(doc, r["question_id"])
        assert node.find(cls="text").text() == text_of(r["question_id"])
        assert kv["expected answer"] == r["expected_output"]
        assert kv["hypothesis"] == (
            r["answer"] if r["answer"] is not None else "no answer produced"
        )
        if r["retrieval_context"]:
            details = node.find("details")
            assert "open" not in details.attrs  # collapsed until asked for
            assert details.find("summary").text() == (
                f"retrieved context: {len(r['retrieval_context'])} item(s)"
            )
            assert [li.text() for li in details.find_all("li")] == r["retrieval_context"]
        else:
            assert not node.find_all("details") and "nothing retrieved" in node.text()
    _, miss = card(doc, "m2")
    assert miss["why not covered"] == (
        "evidence_recall failed: turn recall_all@10 over all evidence turns = 0 "
        "(score 0, needs ≥ 1)also failed: answer_judge"
    )
    _, hit = card(doc, "m0")
    assert hit["outcome"].startswith("passed every gate") and "why not covered" not in hit
    # The index names every question with its text and outcome, failures first.
    index = next(t for t in section(doc, "h2", "Questions") if t.tag == "table")
    by_id = {r[0]: r for r in index.rows()}
    assert set(by_id) == {r["question_id"] for r in rows}
    assert by_id["m2"][1:] == [
        text_of("m2"),
        "1",
        "multi-session",
        "",
        "not covered",
        "",  # failed at: these synthetic rows carry no stage
        "evidence_recall",
        "300",
    ]
    assert [r[5] for r in index.rows()][:2] == ["not covered", "not covered"]


def test_an_unscored_question_reads_as_unscored_with_its_cause(full):
    _, doc = full
    node, kv = card(doc, "g0")
    assert "q-unscored" in node.classes and node.find(cls="badge").text() == "unscored"
    assert "why not covered" not in kv and "not covered" not in node.text()
    assert kv["why unscored"] == (
        "unscored, not a failure: infrastructure failure, not the system's: retrieval failed "
        "(graph_server): ServiceUnavailable: graph server stopped answering"
    )
    assert kv["hypothesis"] == "no answer produced" and "not measured" in kv["cost"]
    _, judged = card(doc, "j0")
    assert "judge failed (judge): HTTP 500 from judge" in judged["why unscored"]
    # Listed under "Unscored", never under "Not covered".
    unscored = {n.attrs.get("id") for n in section(doc, "h3", "Unscored (3)")}
    missed = {n.attrs.get("id") for n in section(doc, "h3", "Not covered (2)")}
    assert {"q-g0", "q-j0", "q-x1"} == unscored and not unscored & missed
    index = next(t for t in section(doc, "h2", "Questions") if t.tag == "table")
    g0 = next(r for r in index.rows() if r[0] == "g0")
    assert g0[5:] == [
        "unscored",
        "",  # never a failure stage
        "unscored — infrastructure failure: graph_server",
        "not measured",
    ]
    # Its type's coverage: unscored with the cause, never 0%.
    tab = next(n for n in section(doc, "h3", "Coverage per question type") if n.tag == "table")
    temporal = next(r for r in tab.rows() if r[0] == "temporal-reasoning")
    assert temporal[1] == "unscored — infrastructure failure: graph_server (1)"
    assert temporal[2] == "– (nothing scored)" and "0.0%" not in "".join(temporal)


def test_abstention_questions_are_apart(full):
    _, doc = full
    nodes = section(
        doc, "h3", "Abstention questions (apart: the system should say it cannot answer)"
    )
    tab = next(n for n in nodes if n.tag == "table")
    assert tab.rows() == [
        ["100.0%", "– (n = 1)", "1", "1", "unscored — infrastructure failure: judge (1)"]
    ]
    node, kv = card(doc, "x0")
    assert "abstention (apart)" in node.find("div").text() and kv["outcome"]
    coverage = next(n for n in section(doc, "h3", "Coverage (answerable questions)"))
    assert coverage.rows()[0][2] == "6"  # m0-2, s0, a0-1: abstention and unscored left out


def test_the_run_status_comes_first(full, tmp_path):
    _, doc = full
    banner = doc.find("div", cls="banner")
    assert "INCOMPLETE" in banner.classes
    assert banner.text().startswith(
        "INCOMPLETE: 3 question(s) unscored by infrastructure failures — judge (2), "
        "graph_server (1)"
    )
    assert "by stage: judge (2), retrieval (1)" in banner.text()
    counts = doc.find("table").rows()[0]  # tier 1 counts
    assert counts == ["10", "2", "5", "1", "2", "3"]
    ok = outcomes("q", [True, False])
    good = parse(render_run_report(load_run(write_run_with_goldens(tmp_path, ok, goldens_for(ok)))))
    assert "COMPLETE" in good.find("div", cls="banner").classes
    assert good.find("div", cls="banner").text().startswith("Complete: every question was measured")


def test_a_run_without_a_judge(tmp_path):
    rows = [
        no_judge_row("q0", True, tokens=200),
        no_judge_row("q1", False, tokens=50),
        no_judge_row("x0", True, abstention=True),
        with_citations(no_judge_row("t2-bug-q1", True, tier=2, qtype="tier2-bug"), 1.0, 1.0),
    ]
    run = write_run_with_goldens(tmp_path, rows, goldens_for(rows, **TIER2_META), pins=OFFLINE)
    doc = parse(render_run_report(load_run(run)))
    config = next(p for p in doc.find_all("p") if p.text().startswith("reconciler"))
    assert "judge none (no judge: judged metrics" in config.text()
    metrics = next(n for n in section(doc, "h3", "Metrics and weakest links") if n.tag == "table")
    judge = next(r for r in metrics.rows() if r[0] == "answer_judge")
    assert judge[1] == "higher is better" and judge[2] == "unscored" and judge[6] == "no judge (2)"
    _, kv = card(doc, "x0")
    assert kv["why unscored"] == (
        "unscored, not a failure: no judge in this run "
        "(abstention questions are decided by the judge)"
    )
    panel = next(n for n in section(doc, "h4", "Per use case") if n.tag == "table")
    assert panel.rows()[0][8] == "unscored (no judge)"
    assert doc.find("div", cls="banner").text().startswith("Complete")
    assert_no_empty_chart(doc)


def test_no_empty_charts_each_replaced_by_a_line_saying_why(full, tmp_path):
    _, doc = full
    assert_no_empty_chart(doc)
    # A judge that failed on every question: no coverage chart, the cause instead.
    rows = [infra_row(f"j{i}", "judge", stage="judge", error="HTTP 500") for i in range(3)]
    rows.append(no_judge_row("x0", True, abstention=True))
    m = {"stages": {"scored_run": {"seconds": None, "run_id": None}}}
    out = parse(render_run_report(load_run(write_run_with_goldens(tmp_path, rows, None, **m))))
    assert_no_empty_chart(out)
    lines = [p.text() for p in out.find_all("p", cls="nochart")]
    assert (
        "Tier 1: coverage per question type, 95% CI (higher is better): no chart, "
        "unscored — infrastructure failure: judge (3)." in lines
    )
    assert "Seconds per stage (lower is better): no chart, no stage recorded its duration." in lines
    assert not any("coverage per question type" in label for label in charts(out))
    assert any("payload tokens" in label for label in charts(out))  # payloads were measured
    # Nothing retrieved at all: no payload chart either.
    gone = [infra_row(f"g{i}", "graph_server") for i in range(2)]
    none = parse(render_run_report(load_run(write_run(tmp_path, gone))))
    assert_no_empty_chart(none)
    lines = [p.text() for p in none.find_all("p", cls="nochart")]
    assert any(line.endswith("no chart, no payload was measured.") for line in lines)
    assert any(
        "every question is unscored: infrastructure failure (graph_server)" in x for x in lines
    )


def test_every_metric_says_which_direction_is_good(full):
    _, doc = full
    directions = {}
    for th in doc.find_all("th"):
        span = th.find_all("span", cls="dir")
        if span:
            directions.setdefault(th.text().removesuffix(span[0].text()), set()).add(span[0].text())
    for label in ("coverage", "task-averaged", "abstention coverage", "recall_any@5"):
        assert directions[label] == {"higher is better"}, label
    for label in ("citation precision", "citation recall", "criteria score", "mean"):
        assert directions[label] == {"higher is better"}, label
    for label in (
        "payload tokens",
        "median payload tokens, covered only (comparable)",
        "median retrieval latency (ms)",
        "median reader latency (ms)",
        "must-not-cite hits (questions)",
        "seconds",
    ):
        assert directions[label] == {"lower is better"}, label
    for tab in doc.find_all("table"):
        if tab.headers()[:2] == ["metric", "good direction"]:
            for r in tab.rows():
                assert r[1] == (
                    "lower is better" if r[0] == "must_not_cite_hits" else "higher is better"
                )
    for label in charts(doc):
        assert label.endswith("is better)") or "is better" in label, label


def test_every_dash_for_an_interval_says_why(full):
    _, doc = full
    assert_dashes_say_why(doc)
    cells = {td.text() for td in doc.find_all("td")}
    for reason in (
        "n = 1",
        "nothing scored",
        "all outcomes equal: interval is the point",
        "graded score: no interval",
    ):
        assert f"– ({reason})" in cells, reason
    tab = next(n for n in section(doc, "h3", "Coverage per question type") if n.tag == "table")
    ci = {r[0]: r[2] for r in tab.rows()}
    assert ci["single-session-user"] == "– (n = 1)"
    assert ci["single-session-assistant"] == "– (all outcomes equal: interval is the point)"
    assert re.fullmatch(r"\d+\.\d% – \d+\.\d%", ci["multi-session"])  # a real interval


def test_every_bundle_string_is_escaped(tmp_path):
    qid = 'q"<1>&'
    qtype = 'multi<session> "x" | ü'
    rows = [
        row(qid, False, qtype=qtype),
        infra_row("g0", "graph_server", error=NASTY, qtype=qtype),
        with_citations(row("t2-pref-q1", True, tier=2, qtype="tier2-pref"), 1.0, 1.0),
    ]
    rows[0].update(answer=NASTY, expected_output=NASTY, retrieval_context=[NASTY, "plain"])
    meta = {"t2-pref-q1": {"use_case": "PREF", "source_mix": ("doc|<chat>",)}}
    pins = set_pin(BASE_PINS, "code_version", NASTY)
    run = write_run_with_goldens(tmp_path, rows, goldens_for(rows, {qid: NASTY}, **meta), pins=pins)
    html = render_run_report(load_run(run))
    doc = parse(html)
    assert not doc.find_all("script") and not doc.find_all("session")
    assert not [b for b in doc.find_all("b") if b.text() == "bold"]
    node, kv = card(doc, qid)  # the id attribute holds the id as it is
    assert node.find(cls="text").text() == NASTY
    assert kv["expected answer"] == kv["hypothesis"] == NASTY
    assert [li.text() for li in node.find_all("li")] == [NASTY, "plain"]
    assert NASTY in card(doc, "g0")[1]["why unscored"]
    assert doc.find("a", href=f"#q-{qid}").text() == qid
    svg_text = {t.text() for svg in doc.find_all("svg") for t in svg.find_all("text")}
    assert qtype in svg_text
    panel = next(n for n in section(doc, "h4", "Per source mix") if n.tag == "table")
    assert panel.rows()[0][0] == "doc|<chat>"
    pin = next(r for t in doc.find_all("table") for r in t.rows() if r and r[0] == "code_version")
    assert pin == ["code_version", NASTY]
    assert "<script>" not in html and "東京" in html  # non-ASCII kept as it is (utf-8)


def test_question_text_falls_back_to_the_id_with_a_note(tmp_path):
    rows = outcomes("q", [True, False])
    # No goldens artifact in the manifest.
    doc = parse(render_run_report(load_run(write_run(tmp_path, rows))))
    warn = next(p for p in doc.find_all("p", cls="warn") if "Question text" in p.text())
    assert "the manifest names no goldens artifact" in warn.text()
    node, _ = card(doc, "q1")
    assert node.find(cls="text").text() == "q1 (question text unavailable)"
    # The goldens file changed since the run: not trusted.
    run = write_run_with_goldens(tmp_path, rows, goldens_for(rows))
    artifact = load_run(run).manifest["stages"]["goldens"]["artifact"]
    path = f"{artifact}/goldens.jsonl"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("\n")
    doc = parse(render_run_report(load_run(run)))
    assert any("sha256 differs" in p.text() for p in doc.find_all("p", cls="warn"))
    assert card(doc, "q0")[0].find(cls="text").text() == "q0 (question text unavailable)"
    # Pruned.
    import os

    os.remove(path)
    doc = parse(render_run_report(load_run(run)))
    assert any("is gone" in p.text() for p in doc.find_all("p", cls="warn"))


def test_comparison_report_for_people(tmp_path):
    base_rows = outcomes("q", [True] * 6)
    cand_rows = [*outcomes("q", [False, False, True, True, True]), infra_row("q5")]
    goldens = goldens_for(base_rows, {"q0": NASTY})
    base = write_run_with_goldens(tmp_path, base_rows, goldens, label="base")
    cand = write_run_with_goldens(tmp_path, cand_rows, goldens, label="cand")
    doc = parse(render_comparison_report(compare(base, cand)))
    runs = doc.find("table").rows()
    assert runs[0][2] == "complete"
    assert runs[1][2] == "INCOMPLETE: 1 unscored by infrastructure (graph_server (1))"
    assert any("incomplete run is part of this comparison" in p.text() for p in doc.find_all("p"))
    headers = [t.headers() for t in doc.find_all("table")]
    assert ["scope", "base coveragehigher is better", "candidate coveragehigher is better"] == (
        headers[2][:3]
    )
    assert "deltapositive is better" in headers[2]
    eff = next(h for h in headers if h[0] == "tier" and "covered in both" in h)
    assert "deltanegative is better" in eff and "base median tokenslower is better" in eff
    lost = next(t for t in doc.find_all("table") if t.headers()[:2] == ["question", "text"])
    assert lost.rows()[0][:2] == ["q0", NASTY] and not doc.find_all("script")
    assert_no_empty_chart(doc)
    assert_dashes_say_why(doc)
    # Nothing scored in both runs: no delta chart, a line; efficiency dashes say why.
    down = write_run_with_goldens(tmp_path, [infra_row(f"q{i}") for i in range(6)], goldens)
    doc = parse(render_comparison_report(compare(base, down)))
    assert not doc.find_all("svg")
    assert [p.text() for p in doc.find_all("p", cls="nochart")] == [
        "Coverage delta, candidate − base, positive is better (grey band: noise floor): no "
        "chart, no question was scored in both runs."
    ]
    eff = next(t for t in doc.find_all("table") if "covered in both" in t.headers())
    assert eff.rows()[0][2:] == ["– (nothing covered in both)"] * 4
    assert_dashes_say_why(doc)
