"""Self-contained HTML reports: one per run (`report.html` in the run directory) and one per
comparison (`comparison.html` + `comparison.json` in a comparisons directory).

Self-contained means one file: inline CSS, inline SVG charts (`eval_pipeline.runs.svg`), no
script, no CDN, no link to another file, so a report can be mailed or archived as it is.

Written for a person reading it:
- whether the run is complete is said first (status, counts by cause);
- every metric says which direction is good; a "–" for an interval says why;
- a chart with nothing to draw is replaced by one line saying why;
- a rate that was not scored is printed "unscored" (with its cause), never 0, and an
  unscored question reads as unscored, never as a failure;
- each question shows its text, the expected answer, the hypothesis, the retrieved context
  (collapsed) and why it was not covered (its weakest link) or why it is unscored. Result
  rows carry the question text and date; for a bundle written before they did, the text is
  read from the goldens the manifest names (checked against the run's goldens sha256), else
  the question id stands in, with a note;
- tier 2 gets its panels (use case, difficulty, source mix, COMBO dimension).
Every string from a bundle is escaped.

A run bundle is otherwise immutable: the run report is the one file added to a run
directory, written to a temporary file and renamed into place, and it can never take the
name of a bundle file. The report reads nothing outside the bundle directory except, for an
old bundle whose rows lack the question text, that goldens file; so a report is never
replaced by one showing fewer question texts (`PoorerReport`: the existing one is kept).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path
from typing import Any

from eval_pipeline.atomic import staged_files, write_text
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.corpus.upstream import file_sha256
from eval_pipeline.runs.bundle import BUNDLE_FILES
from eval_pipeline.runs.compare import Comparison, Efficiency, PairedDelta, PanelComparison
from eval_pipeline.runs.load import BundleError, ResultRow, RunBundle, load_run
from eval_pipeline.runs.recall_delta import RecallDelta, left_out_text
from eval_pipeline.runs.svg import (
    DeltaBar,
    RateBar,
    delta_bars,
    has_rates,
    has_values,
    histogram,
    rate_bars,
    value_bars,
)
from eval_pipeline.score import protocol
from eval_pipeline.score.attribution import ceiling_missed
from eval_pipeline.score.coverage_meaning import coverage_meaning
from eval_pipeline.score.stats import bootstrap_ci

RUN_REPORT = "report.html"
COMPARISON_JSON = "comparison.json"
COMPARISON_HTML = "comparison.html"
COMPARISONS_DIR = "comparisons"
GOLDENS_FILE = "goldens.jsonl"
TEXT_UNAVAILABLE = "(question text unavailable)"  # a card's stand-in, counted by write_run_report
# Per question type: the upstream headline metric and the coverage gate's own metric.
TYPE_RECALLS = (("turn", "upstream", "recall_any@5"), ("turn", "all", "recall_all@10"))
HIGHER = "higher is better"
LOWER = "lower is better"
HIGHER_METRICS = {
    "coverage",
    "evidence_recall",
    "contextual_recall",
    "answer_judge",
    "answer_coverage",
    "proxy_containment",
    "proxy_token_f1",
    "citation_precision",
    "citation_recall",
    "criteria_score",
    "invariant_score",
    "recall_any",
    "recall_all",
    "ndcg",
}
LOWER_METRICS = {"must_not_cite_hits", "payload_tokens", "latency_ms", "seconds"}
# Metrics only a judge model takes: with no judge they are unscored for that reason alone.
JUDGED_METRICS = {
    "contextual_recall",
    "answer_judge",
    "answer_coverage",
    "criteria_score",
    "invariant_score",
}
PANELS = {
    "by_use_case": "use case",
    "by_difficulty": "difficulty",
    "by_source_mix": "source mix",
    "by_dimension": "COMBO dimension",
}
OUTCOMES = (  # (covered value, label, css class), in the order questions are listed
    (False, "not covered", "q-miss"),
    (None, "unscored", "q-unscored"),
    (True, "covered", "q-hit"),
)

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
h4{margin:1.2em 0 .3em}table{border-collapse:collapse;margin:.6em 0 1em}
td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right}.dir{font-weight:normal;font-size:.8em;color:#555}
.unscored{color:#777;font-style:italic}.muted{color:#666}.banner{padding:.8em 1em;
border-radius:4px;font-size:1.2em;font-weight:bold;margin:1em 0}.REGRESSED,.INCOMPLETE{
background:#fdecea;color:#b71c1c}.IMPROVED,.COMPLETE{background:#e8f5e9;color:#1b5e20}
.INCONCLUSIVE{background:#fff8e1;color:#8d6e00}.banner small{font-weight:normal;display:block;
font-size:.75em;margin-top:.3em}.warn{background:#fff3e0;border-left:4px solid #ef6c00;
padding:.5em 1em}.real{font-weight:bold}code{background:#f4f4f4;padding:0 .2em}
svg{display:block;margin:.5em 0}.nochart{color:#666;font-style:italic;margin:.4em 0 .8em}
.q{border:1px solid #ddd;border-left:5px solid #9e9e9e;border-radius:3px;padding:.4em .8em;
margin:.6em 0}.q-miss{border-left-color:#c62828}.q-hit{border-left-color:#2e7d32}
.q .text{font-size:1.05em;font-weight:600;margin:.3em 0}.q table{margin:.3em 0;width:100%}
.q th{width:9em;background:#fafafa;font-weight:normal;color:#555}.badge{font-weight:bold}
.q-miss .badge{color:#b71c1c}.q-hit .badge{color:#1b5e20}.q-unscored .badge{color:#616161}
pre{white-space:pre-wrap;margin:0;font:inherit}details{margin:.3em 0}summary{cursor:pointer;
color:#1a4f8b}details ol{margin:.3em 0;padding-left:1.6em}details li{margin:.25em 0}
"""


# --- formatting ---------------------------------------------------------------------------


def _e(value: Any) -> str:
    return escape(str(value))


def pct(value: float | None, missing: str = "unscored") -> str:
    if value is None:
        return f'<span class="unscored">{_e(missing)}</span>'
    return f"{100 * value:.1f}%"


def dash(reason: str) -> str:
    """A value that is not there, with why."""
    return f'<span class="muted">– ({_e(reason)})</span>'


def ci(
    low: float | None,
    high: float | None,
    n: int | None,
    rate: float | None = None,
    nothing: str = "nothing scored",
) -> str:
    """A 95% interval, or "–" with the reason there is none (or none worth a range)."""
    if not n:
        return dash(nothing)
    if low is None or high is None:
        return dash("graded score: no interval")
    if low == high:
        if n == 1:
            return dash("n = 1")
        if rate in (0.0, 1.0):
            return dash("all outcomes equal: interval is the point")
        return dash("interval of zero width")
    return f"{100 * low:.1f}% – {100 * high:.1f}%"


def num(value: Any, missing: str = "n/a") -> str:
    if value is None:
        return f'<span class="muted">{_e(missing)}</span>'
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return _e(value)


def better(metric: str) -> str:
    """Which direction of `metric` is good, in words."""
    name = metric.split("@")[0]
    if name in LOWER_METRICS:
        return LOWER
    return HIGHER if name in HIGHER_METRICS else "direction not recorded"


Header = str | tuple[str, str]  # a label, or (label, its good direction)


def _th(h: Header) -> str:
    if isinstance(h, tuple):
        return f'<th>{_e(h[0])}<br><span class="dir">{_e(h[1])}</span></th>'
    return f"<th>{_e(h)}</th>"


def table(headers: Sequence[Header], rows: Iterable[Sequence[str]], numeric: Iterable[int] = ()):
    """Cells are HTML already (escaped by the caller); `numeric` columns align right."""
    numeric = set(numeric)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    if not body:
        body.append(f'<tr><td colspan="{len(headers)}" class="muted">none</td></tr>')
    head = "".join(_th(h) for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def no_chart(title: str, why: str) -> str:
    return f'<p class="nochart">{_e(title)}: no chart, {_e(why)}.</p>'


def page(title: str, sections: Sequence[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
        + "\n".join(sections)
        + "</body></html>\n"
    )


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        out = []
        for key, inner in value.items():
            out += _flatten(inner, f"{prefix}.{key}" if prefix else str(key))
        return out
    return [(prefix, value)]


def _json_cell(value: Any) -> str:
    if value is None:
        return '<span class="muted">none</span>'
    if isinstance(value, dict | list):
        return f"<code>{_e(json.dumps(value, sort_keys=True, ensure_ascii=False))}</code>"
    return _e(value)


def _counts(counter: Counter[str] | dict[str, int]) -> str:
    return ", ".join(f"{k} ({v})" for k, v in sorted(counter.items(), key=lambda kv: -kv[1]))


# --- what a row says ----------------------------------------------------------------------


def _x(r: ResultRow, key: str, default: Any = None) -> Any:
    """A field of results.jsonl the loader keeps as it is (context, answer, failures...)."""
    value = (r.model_extra or {}).get(key)
    return default if value is None else value


def no_judge(run: RunBundle) -> bool:
    judge = run.pins.get("judge")
    model = judge.get("model") if isinstance(judge, dict) else judge
    return isinstance(model, str) and model in ("offline", "none", "")


def unscored_cause(r: ResultRow, judgeless: bool) -> tuple[str, str]:
    """(short cause, for counting; the full sentence) of a question whose coverage is None."""
    infra = [f for f in _x(r, "infra_failures", []) if isinstance(f, dict)]
    if infra:
        causes = sorted({str(f.get("cause") or "unknown") for f in infra})
        text = "; ".join(
            f"{f.get('stage') or '?'} failed ({f.get('cause') or 'unknown'}): "
            f"{f.get('error') or 'no error text'}"
            for f in infra
        )
        return (
            "infrastructure failure: " + ", ".join(causes),
            f"infrastructure failure, not the system's: {text}",
        )
    pending = {n: m for n, m in r.metrics.items() if m.gating and m.passed is None}
    if judgeless and set(pending) <= JUDGED_METRICS:
        what = "abstention questions are decided by the judge" if r.abstention else "a judged gate"
        return "no judge", f"no judge in this run ({what})"
    if pending:
        return ", ".join(f"{n} not taken" for n in pending), "; ".join(
            f"{n} not taken: {m.reason or 'no reason recorded'}"
            + (f" (error: {m.error})" if m.error else "")
            for n, m in pending.items()
        )
    return "no gate", "no gating metric applies to this question"


def miss_reason(r: ResultRow) -> str:
    """Why a question was not covered: its weakest link (the earliest failed gate), as HTML."""
    wl = r.weakest_link
    if wl is None:
        return '<span class="muted">no weakest link recorded</span>'
    if wl == "empty_payload":
        out = "<b>empty_payload</b>: nothing was retrieved, so it cannot be covered"
    else:
        m = r.metrics.get(wl)
        out = f"<b>{_e(wl)}</b> failed"
        if m is not None:
            out += f": {_e(m.reason)}" if m.reason else ""
            if m.score is not None and m.threshold is not None:
                out += f' <span class="muted">(score {m.score:g}, needs ≥ {m.threshold:g})</span>'
    others = [n for n, m in r.metrics.items() if m.gating and m.passed is False and n != wl]
    if others:
        out += f'<br><span class="muted">also failed: {_e(", ".join(others))}</span>'
    return out


def why(r: ResultRow, judgeless: bool) -> tuple[str, str]:
    """(short text for the index, HTML for the question's card)."""
    if r.covered is None:
        short, text = unscored_cause(r, judgeless)
        html = f'<span class="unscored">unscored, not a failure</span>: {_e(text)}'
        if r.weakest_link:
            html += f'<br><span class="muted">a gate already failed: {_e(r.weakest_link)}</span>'
        return f"unscored — {short}", html
    if r.covered is False:
        return r.weakest_link or "not recorded", miss_reason(r)
    gates = [n for n, m in r.metrics.items() if m.gating]
    return "", "passed every gate" + (f" ({_e(', '.join(gates))})" if gates else "")


def question_texts(run: RunBundle) -> tuple[dict[str, str], str | None]:
    """Question id → question text, and a note when some or all are not available.

    A row carrying its text (`question` or `input`) is used as it is; otherwise the text is
    read from the goldens artifact the manifest names, and only if that file is still the
    one the run used (its sha256 equals the `corpus.goldens_sha256` pin, when pinned)."""
    texts = {}
    for r in run.rows:
        text = _x(r, "question") or _x(r, "input")
        if isinstance(text, str):
            texts[r.question_id] = text
    if len(texts) == len(run.rows):
        return texts, None
    stage = (run.manifest.get("stages") or {}).get("goldens") or {}
    artifact = stage.get("artifact") if isinstance(stage, dict) else None
    if not artifact:
        return texts, "the manifest names no goldens artifact"
    path = Path(artifact).expanduser() / GOLDENS_FILE
    pinned = (run.pins.get("corpus") or {}).get("goldens_sha256")
    try:
        if pinned and file_sha256(path) != pinned:
            return texts, f"{path} is not the goldens file this run used (sha256 differs)"
        for g in read_jsonl(path):
            if isinstance(g, dict) and isinstance(g.get("input"), str):
                texts.setdefault(str(g.get("name")), g["input"])
    except FileNotFoundError:
        return texts, f"{path} is gone (artifacts of older runs are pruned)"
    except (OSError, ValueError) as exc:
        return texts, f"{path} is unreadable: {exc}"
    missing = sum(1 for r in run.rows if r.question_id not in texts)
    return texts, (f"{missing} question(s) are not in {path}" if missing else None)


def _clip(text: str | None, width: int = 80) -> str:
    if not text:
        return ""
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _median(values: Iterable[Any]) -> float | None:
    kept = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return statistics.median(kept) if kept else None


# --- run report ---------------------------------------------------------------------------


def recall_by_type(rows: Sequence[ResultRow], level: str, variant: str, name: str) -> list[RateBar]:
    """Per question type: mean of a per-question recall with a bootstrap CI (binary values).
    A type with no value says why (the reason its questions were excluded)."""
    by_type: dict[str, list[float]] = defaultdict(list)
    excluded: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        value = ((r.retrieval_metrics.get(level) or {}).get(variant) or {}).get(name)
        if value is None:
            reason = (r.retrieval_metrics.get("excluded") or {}).get(variant)
            excluded[r.question_type][str(reason or "unscored")] += 1
        else:
            by_type[r.question_type].append(float(value))
    bars = []
    for qtype in sorted({r.question_type for r in rows}):
        values = by_type.get(qtype, [])
        if not values:
            reason = excluded[qtype].most_common(1)[0][0] if excluded[qtype] else "unscored"
            note = reason if reason.startswith("unscored") else f"excluded: {reason}"
            bars.append(RateBar(qtype, None, note=note[:70]))
        elif all(v in (0.0, 1.0) for v in values):
            est = bootstrap_ci([int(v) for v in values])
            assert est is not None
            bars.append(RateBar(qtype, est.rate, est.low, est.high, est.n_scored))
        else:
            bars.append(RateBar(qtype, sum(values) / len(values), None, None, len(values)))
    return bars


def _rate_chart(title: str, bars: Sequence[RateBar], why_empty: str) -> str:
    return rate_bars(title, bars) if has_rates(bars) else no_chart(title, why_empty)


def _nothing(note: str | None) -> str:
    return "excluded" if (note or "").startswith("excluded") else "nothing scored"


def _rate_table(bars: Sequence[RateBar], metric: str, unscored: dict[str, int] | None = None):
    return table(
        ["question type", (metric, better(metric)), "95% CI", "n scored"]
        + (["unscored"] if unscored is not None else []),
        (
            [_e(b.label), pct(b.rate, b.note or "unscored")]
            + [ci(b.low, b.high, b.n, b.rate, _nothing(b.note))]
            + [str(b.n)]
            + ([str(unscored.get(b.label, 0))] if unscored is not None else [])
            for b in bars
        ),
        numeric=(1, 3, 4),
    )


def _pass_rate(m: dict[str, Any]) -> str:
    if m.get("pass_rate") is not None:
        return pct(m["pass_rate"])
    # Scored but never passed/failed: a non-gating metric without a threshold.
    return '<span class="muted">no threshold</span>' if m.get("n_scored") else pct(None)


def _unscored_note(rows: Sequence[ResultRow], judgeless: bool) -> str:
    causes = Counter(unscored_cause(r, judgeless)[0] for r in rows if r.covered is None)
    return f"unscored — {_counts(causes)}" if causes else "nothing scored"


def _metric_why(rows: Sequence[ResultRow], name: str, judgeless: bool) -> str:
    reasons: Counter[str] = Counter()
    for r in rows:
        m = r.metrics.get(name)
        if m is not None and m.score is None:
            no_judge_here = judgeless and name in JUDGED_METRICS
            reasons["no judge" if no_judge_here else (m.reason or "no reason recorded")] += 1
    return _e("; ".join(f"{k} ({v})" for k, v in reasons.most_common(2)))


def _tier_section(tier: str, s: dict[str, Any], rows: Sequence[ResultRow], judgeless: bool):
    c = s.get("counts", {})
    cov = s.get("coverage")
    answerable = [r for r in rows if not r.abstention]
    abstaining = [r for r in rows if r.abstention]
    out = [f"<h2>Tier {_e(tier)}</h2>"]
    keys = ("questions", "abstention", "covered", "not_covered", "unscored")
    out.append(
        table(
            [
                "questions",
                "abstention (apart)",
                "covered",
                "not covered",
                "unscored",
                "unscored by infrastructure",
            ],
            [[num(c.get(k)) for k in (*keys, "unscored_infrastructure")]],
            numeric=range(6),
        )
    )
    out.append("<h3>Coverage (answerable questions)</h3>")
    out.append(
        table(
            [("coverage", HIGHER), "95% CI", "n scored", "n unscored", ("task-averaged", HIGHER)],
            [
                [
                    pct(cov["rate"] if cov else None),
                    ci(cov["low"], cov["high"], cov["n_scored"], cov["rate"])
                    if cov
                    else ci(None, None, 0),
                    num(cov["n_scored"] if cov else 0),
                    num(cov["n_unscored"] if cov else c.get("unscored")),
                    pct(s.get("coverage_task_averaged")),
                ]
            ],
            numeric=range(5),
        )
    )
    if any(r.covered is None for r in answerable):
        out.append(
            f'<p class="muted">Left out of the rate, never counted as misses: '
            f"{_e(_unscored_note(answerable, judgeless))}.</p>"
        )
    out.append(_errata_coverage(s))
    abst = (s.get("abstention") or {}).get("coverage")
    if abstaining:
        out.append("<h3>Abstention questions (apart: the system should say it cannot answer)</h3>")
        out.append(
            table(
                [("abstention coverage", HIGHER), "95% CI", "n scored", "n unscored", "why"],
                [
                    [
                        pct(abst["rate"] if abst else None),
                        ci(abst["low"], abst["high"], abst["n_scored"], abst["rate"])
                        if abst
                        else ci(None, None, 0),
                        num(abst["n_scored"] if abst else 0),
                        num(sum(1 for r in abstaining if r.covered is None)),
                        _e(_unscored_note(abstaining, judgeless))
                        if any(r.covered is None for r in abstaining)
                        else "",
                    ]
                ],
                numeric=range(4),
            )
        )
    unscored_by_type: dict[str, int] = Counter(
        r.question_type for r in answerable if r.covered is None
    )
    cov_bars = []
    for t, e in (s.get("coverage_by_type") or {}).items():
        if e:
            cov_bars.append(RateBar(t, e["rate"], e["low"], e["high"], e["n_scored"]))
        else:
            of_type = [r for r in answerable if r.question_type == t]
            cov_bars.append(RateBar(t, None, note=_unscored_note(of_type, judgeless)[:70]))
    title = f"Tier {tier}: coverage per question type, 95% CI ({HIGHER})"
    out.append("<h3>Coverage per question type</h3>")
    none = "no answerable question in this tier (abstention questions are apart)"
    out.append(
        _rate_chart(title, cov_bars, _unscored_note(answerable, judgeless) if answerable else none)
    )
    out.append(_rate_table(cov_bars, "coverage", unscored_by_type))
    out.append(_funnel_section(s.get("funnel")))
    out.append("<h3>Evidence recall per question type</h3>")
    for level, variant, name in TYPE_RECALLS:
        bars = recall_by_type(answerable, level, variant, name)
        title = f"Tier {tier}: {level}-level {name} ({variant} variant), 95% CI ({HIGHER})"
        notes = sorted({b.note for b in bars if b.note})
        why_empty = "every question is " + (notes[0] if len(notes) == 1 else "excluded")
        why_empty = why_empty if answerable else none
        out.append(_rate_chart(title, bars, why_empty))
        out.append(_rate_table(bars, name))
    out.append(_retrieval_table(s))
    out.append(_efficiency(tier, s, answerable, judgeless))
    out.append("<h3>Metrics and weakest links</h3>")
    out.append(
        table(
            ["metric", "good direction", "mean score", "n scored", "n unscored", "pass rate"]
            + ["why unscored"],
            (
                [
                    _e(name),
                    _e(better(name)),
                    num(m.get("mean"), "unscored"),
                    num(m.get("n_scored")),
                    num(m.get("n_unscored")),
                    _pass_rate(m),
                    _metric_why(answerable, name, judgeless),
                ]
                for name, m in (s.get("metrics") or {}).items()
            ),
            numeric=(2, 3, 4, 5),
        )
    )
    out.append(
        table(
            ["weakest link (the earliest gate that failed)", "questions not covered"],
            ([_e(k), num(v)] for k, v in sorted((s.get("weakest_link") or {}).items())),
            numeric=(1,),
        )
    )
    if tier == "2":
        out.append(_panels_section(s.get("panels"), judgeless))
        out.append(_pass_criteria_section(s.get("pass_criteria"), judgeless))
    return "\n".join(out)


STAGE_TITLES = {
    "gold_suspect": "gold suspect (errata)",
    "formation": "formation (memory never held it)",
    "retrieval": "retrieval (held, not returned)",
    "reader": "reader (answered wrong with the evidence returned or given)",
    "judge_split": "judge split (judges disagree)",
}


def _funnel_section(f: dict[str, Any] | None) -> str:
    """Where the questions that were not covered failed, one stage each, per question type."""
    if not f:
        return (
            '<p class="muted">No failure stages in this bundle (scored before they were kept).</p>'
        )
    stages = list(f.get("stages") or STAGE_TITLES)
    lines = [
        *f["by_type"].items(),
        ("all answerable", f["answerable"]),
        ("abstention", f["abstention"]),
    ]
    out = ["<h3>Where questions failed</h3>"]
    out.append(
        '<p class="muted">Each question that was not covered is put at the first stage it '
        "failed: memory formation, retrieval, the reader, or a judge split; a suspect gold answer "
        "before all. Unscored questions (infrastructure) are never a stage.</p>"
    )
    out.append(
        table(
            ["question type", "questions", *(STAGE_TITLES.get(s, s) for s in stages)]
            + [("covered", HIGHER), "unscored", "undecided"],
            (
                [_e(name), *(num(c.get(k)) for k in ("questions", *stages)), num(c.get("covered"))]
                + [num(c.get("unscored")), num(c.get("undecided"))]
                for name, c in lines
            ),
            numeric=range(1, len(stages) + 5),
        )
    )
    return "\n".join(out)


def _errata_coverage(s: dict[str, Any]) -> str:
    """Coverage with and without the questions dataset errata call suspect."""
    e = s.get("errata")
    if not e:
        return ""
    cov, without = s.get("coverage"), e.get("coverage_without_suspect")
    statuses = ", ".join(f"{k} {v}" for k, v in (e.get("by_status") or {}).items())
    ids = ", ".join(e.get("suspect_ids") or []) or "none"
    return (
        "<h3>Dataset errata</h3>"
        + table(
            ["", ("coverage", HIGHER), "n scored", ("task-averaged", HIGHER)],
            [
                [
                    "with suspect questions",
                    pct(cov["rate"] if cov else None),
                    num(cov["n_scored"] if cov else 0),
                    pct(s.get("coverage_task_averaged")),
                ],
                [
                    "without suspect questions",
                    pct(without["rate"] if without else None),
                    num(without["n_scored"] if without else 0),
                    pct(e.get("coverage_task_averaged_without_suspect")),
                ],
            ],
            numeric=(1, 2, 3),
        )
        + f'<p class="muted">{num(e.get("flagged"))} question(s) flagged ({_e(statuses)}); '
        f"suspect (gold in doubt): {_e(ids)}. See docs/errata.md.</p>"
    )


def _errata_line(m: dict[str, Any]) -> str:
    """What the manifest says the dataset errata did: applied (flag / exclude) or why not."""
    e = (m.get("pins") or {}).get("errata")
    if not e:
        return ""
    if not e.get("applied"):
        return f'<p class="muted">Dataset errata: none applied ({_e(e.get("reason"))}).</p>'
    excluded = e.get("excluded") or []
    left_out = f"; left out of the sample: {', '.join(excluded)}" if excluded else ""
    checked = "" if e.get("verified") else " (not yet verified against the pinned file)"
    return (
        f'<p class="muted">Dataset errata {_e(e.get("file"))} version {_e(e.get("version"))}'
        f"{_e(checked)}, mode {_e(e.get('mode'))}: {num(e.get('flagged'))} question(s) "
        f"flagged{_e(left_out)}.</p>"
    )


def _retrieval_table(s: dict[str, Any]) -> str:
    rows = []
    for level, variants in (s.get("retrieval") or {}).items():
        for variant, metrics in variants.items():
            for key in ("recall_any@5", "recall_all@5", "ndcg@5", "recall_all@10"):
                m = metrics.get(key) or {}
                rows.append(
                    [_e(level), _e(variant), _e(key), pct(m.get("mean"), "excluded")]
                    + [ci(m.get("low"), m.get("high"), m.get("n"), m.get("mean"), "all excluded")]
                    + [num(m.get("n"))]
                )
    out = ["<h3>Evidence recall (answerable questions in the tier)</h3>"]
    out.append(table(["level", "variant", "metric", ("mean", HIGHER), "95% CI", "n"], rows, (3, 5)))
    excluded = s.get("excluded") or {}
    if any(excluded.values()):
        out.append(
            '<p class="muted">Excluded from recall: '
            + "; ".join(f"{_e(v)}: {len(ids)} question(s)" for v, ids in excluded.items())
            + "</p>"
        )
    return "\n".join(out)


def _efficiency(tier: str, s: dict[str, Any], answerable: Sequence[ResultRow], judgeless: bool):
    eff = s.get("efficiency") or {}
    out = ["<h3>Payload tokens, latency and efficiency</h3>"]
    series = {  # a payload never measured (None) is left out, never drawn as 0 tokens
        label: [r.payload_tokens for r in answerable if r.covered is value]
        for value, label in ((True, "covered"), (False, "not covered"), (None, "unscored"))
    }
    series = {k: [v for v in vs if v is not None] for k, vs in series.items()}
    title = f"Tier {tier}: payload tokens per answerable question ({LOWER} among covered)"
    if any(series.values()):
        out.append(histogram(title, series))
    else:
        out.append(no_chart(title, "no payload was measured"))
    latency = {
        stage: _median((_x(r, "latency_ms", {}) or {}).get(stage) for r in answerable)
        for stage in ("retrieval", "reader")
    }
    out.append(
        table(
            [
                ("median payload tokens, covered only (comparable)", LOWER),
                ("median payload tokens, all answerable (not comparable)", LOWER),
                ("median retrieval latency (ms)", LOWER),
                ("median reader latency (ms)", LOWER),
            ],
            [
                [
                    num(eff.get("median_payload_tokens_covered"), "– (nothing covered)"),
                    num(eff.get("median_payload_tokens_all"), "– (no payload measured)"),
                    num(latency["retrieval"], "– (not recorded)"),
                    num(latency["reader"], "– (not recorded)"),
                ]
            ],
            numeric=range(4),
        )
    )
    return "\n".join(out)


def _panel_note(cell: dict[str, Any]) -> str:
    if cell.get("questions", 0) == cell.get("abstention", 0):
        return "abstention questions only (apart)"
    return f"unscored ({cell.get('unscored', 0)})"


def _panels_section(panels: dict[str, Any] | None, judgeless: bool) -> str:
    out = ["<h3>Tier-2 panels</h3>"]
    if not isinstance(panels, dict):
        return out[0] + '<p class="nochart">summary.json holds no tier-2 panels (older bundle).</p>'
    out.append(
        '<p class="muted">Coverage is over answerable questions; citation scores are against '
        "each scenario's <code>must_cite</code> / <code>must_not_cite</code> events; the "
        "criteria score (0–100) needs a judge"
        + (": <b>no judge in this run</b>, so it is unscored" if judgeless else "")
        + ".</p>"
    )
    criteria_missing = "unscored (no judge)" if judgeless else "unscored"
    for key, title in PANELS.items():
        cells = panels.get(key) or {}
        out.append(f"<h4>Per {_e(title)}</h4>")
        if not cells:
            why = "no COMBO scenario in this run" if key == "by_dimension" else "no question"
            out.append(f'<p class="nochart">No {_e(title)} panel: {why}.</p>')
            continue
        bars = [
            RateBar(k, v.get("coverage_rate"), n=v.get("covered", 0) + v.get("not_covered", 0))
            if v.get("coverage_rate") is not None
            else RateBar(k, None, note=_panel_note(v))
            for k, v in cells.items()
        ]
        chart = f"Tier 2: coverage per {title} ({HIGHER})"
        out.append(_rate_chart(chart, bars, "no answerable question was scored"))

        def mean(v: dict[str, Any], name: str, missing: str = "unscored") -> str:
            m = (v.get(name) or {}).get("mean")
            if name in ("criteria_score", "invariant_score"):
                return num(round(m, 1) if m is not None else None, missing)
            return pct(m, missing)

        out.append(
            table(
                [title, "questions", "covered", "not covered", "unscored", ("coverage", HIGHER)]
                + [("citation precision", HIGHER), ("citation recall", HIGHER)]
                + [("criteria score", HIGHER), ("invariant score", HIGHER)]
                + [("must-not-cite hits (questions)", LOWER)],
                (
                    [_e(k)]
                    + [num(v.get(n)) for n in ("questions", "covered", "not_covered", "unscored")]
                    + [pct(v.get("coverage_rate"), _panel_note(v))]
                    + [mean(v, "citation_precision"), mean(v, "citation_recall")]
                    + [mean(v, "criteria_score", criteria_missing)]
                    + [mean(v, "invariant_score", criteria_missing)]
                    + [num(v.get("must_not_cite_hit_questions"))]
                    for k, v in cells.items()
                ),
                numeric=range(1, 11),
            )
        )
    return "\n".join(out)


def _pass_criteria_section(report: dict[str, Any] | None, judgeless: bool) -> str:
    """Tier 2's three axes and pass criteria (`tier2.pass_criteria`): pass rate per use-case
    bucket, and the ingestion curve per difficulty and per source mix."""
    out = ["<h3>Tier-2 pass criteria (ingestion, retrieval, agent use)</h3>"]
    if not isinstance(report, dict):
        return out[0] + '<p class="nochart">summary.json holds no pass criteria (older bundle).</p>'
    limits = ", ".join(f"{a} ≥ {t:g}" for a, t in report["thresholds"].items())
    out.append(
        f'<p class="muted">A scenario passes when each axis meets its threshold ({_e(limits)}) '
        f"and its weighted score meets its pass_score (default {report['default_pass_score']:g}"
        f"); a COMBO scenario scores ≥ {report['combo_dimension_min']:g} on each dimension; a "
        f"bucket passes at {100 * report['bucket_pass_rate']:.0f} % of its scored scenarios. "
        "An axis not taken leaves the scenario unscored"
        + (
            ": <b>no judge in this run</b>, so agent use and every verdict are unscored"
            if judgeless
            else ""
        )
        + f". Ingestion: {_e(report.get('ingestion_reason') or 'read from the graph')}.</p>"
    )
    order = {d: i for i, d in enumerate(("easy", "medium", "hard", "adversarial"))}
    for key, title in (
        ("by_use_case", "use case"),
        ("by_difficulty", "difficulty"),
        ("by_source_mix", "source mix"),
    ):
        cells = sorted((report.get(key) or {}).items(), key=lambda kv: (order.get(kv[0], 9), kv[0]))
        out.append(f"<h4>Per {_e(title)}</h4>")
        if key != "by_use_case":
            bars = [
                RateBar(k, v["ingestion_mean"] / 100, n=v["scenarios"])
                if v.get("ingestion_mean") is not None
                else RateBar(k, None, note="ingestion not taken")
                for k, v in cells
            ]
            chart = f"Tier 2: ingestion score per {title} ({HIGHER})"
            out.append(_rate_chart(chart, bars, "no ingestion score was taken"))
        out.append(
            table(
                [title, "scenarios", "scored", "passed", ("pass rate", HIGHER), "bucket passes"]
                + [(f"{a.replace('_', ' ')} (mean)", HIGHER) for a in ("ingestion", "retrieval")]
                + [("agent use (mean)", HIGHER), ("weighted (mean)", HIGHER)],
                (
                    [_e(k), num(v["scenarios"]), num(v["scored"]), num(v["passed"])]
                    + [pct(v["pass_rate"])]
                    + [{True: "yes", False: "no", None: "unscored"}[v["bucket_passed"]]]
                    + [
                        num(round(m, 1) if m is not None else None, "unscored")
                        for m in (
                            v["ingestion_mean"],
                            v["retrieval_mean"],
                            v["agent_use_mean"],
                            v["weighted_mean"],
                        )
                    ]
                    for k, v in cells
                ),
                numeric=range(1, 10),
            )
        )
    return "\n".join(out)


def _stage_section(manifest: dict[str, Any]) -> str:
    stages = manifest.get("stages") or {}
    items = [(name, (v or {}).get("seconds")) for name, v in stages.items()]
    out = ["<h2>Stage timings</h2>"]
    if not items:
        return out[0] + '<p class="nochart">No stage timings recorded.</p>'
    title = f"Seconds per stage ({LOWER})"
    if has_values(items):
        out.append(value_bars(title, items, "s"))
    else:
        out.append(no_chart(title, "no stage recorded its duration"))
    total = sum(v for _, v in items if v is not None)
    out.append(
        table(
            ["stage", ("seconds", LOWER), "Dagster run"],
            [
                *(
                    [_e(n), num(v, "not recorded"), _e((stages[n] or {}).get("run_id") or "")]
                    for n, v in items
                ),
                ["<b>total recorded</b>", num(round(total, 3)), ""],
            ],
            numeric=(1,),
        )
    )
    return "\n".join(out)


ROLE_COLUMNS = (
    "calls",
    "cache_hits",
    "provider_requests",
    "retries",
    "failures",
    "input_tokens",
    "output_tokens",
    "cost_usd",
)


def _llm_section(manifest: dict[str, Any]) -> str:
    usage = manifest.get("llm_usage") or {}
    out = ["<h2>LLM accounting</h2>"]
    offline = [stage for stage, snapshot in usage.items() if not snapshot]
    if offline:
        out.append(f"<p>No LLM calls recorded (offline): {_e(', '.join(offline))}.</p>")
    rows = []
    other = []
    for stage, snapshot in usage.items():
        if not snapshot:
            continue
        roles = snapshot.get("roles") if isinstance(snapshot, dict) else None
        if not isinstance(roles, dict):
            other.append((stage, snapshot))
            continue
        for role, u in roles.items():
            # A snapshot lists every role of the layer; only the ones used are news.
            if not isinstance(u, dict) or not (u.get("calls") or u.get("provider_requests")):
                continue
            model = f"{u.get('provider', '')}:{u.get('model') or ''}".strip(":")
            cells = [num(u.get(k), "unknown" if k == "cost_usd" else "n/a") for k in ROLE_COLUMNS]
            rows.append([f"{_e(stage)} / {_e(role)}", _e(model), *cells])
    if rows or not offline:
        headers = ["stage / role", "model", *ROLE_COLUMNS]
        out.append(table(headers, rows, numeric=range(2, 2 + len(ROLE_COLUMNS))))
    for stage, snapshot in other:
        out.append(f"<p>{_e(stage)}:</p><pre>{_e(json.dumps(snapshot, indent=2))}</pre>")
    totals = [
        (stage, snap.get("total_cost_usd"))
        for stage, snap in usage.items()
        if isinstance(snap, dict) and "total_cost_usd" in snap
    ]
    if totals:
        out.append(
            "<p>Total cost per stage: "
            + ", ".join(f"{_e(s)} {num(v, 'unknown')} USD" for s, v in totals)
            + ' <span class="muted">(unknown is not zero)</span></p>'
        )
    return "\n".join(out)


def _status_banner(run: RunBundle) -> str:
    status = run.summary.get("status") or run.manifest.get("status")
    info = run.summary.get("incomplete") or run.manifest.get("incomplete") or {}
    if status == "incomplete":
        causes = _counts(info.get("by_cause") or {}) or "cause not recorded"
        stages = _counts(info.get("by_stage") or {}) or "not recorded"
        return (
            f'<div class="banner INCOMPLETE">INCOMPLETE: {num(info.get("questions"))} '
            f"question(s) unscored by infrastructure failures — {_e(causes)}"
            f"<small>by stage: {_e(stages)}. Every rate below leaves them out; they are not "
            "misses. Nothing compares or calibrates an incomplete run: fix the cause and run "
            "again.</small></div>"
        )
    if status == "complete":
        return (
            '<div class="banner COMPLETE">Complete: every question was measured'
            "<small>no infrastructure failure left a question unscored.</small></div>"
        )
    return '<p class="warn">This bundle records no status (complete or incomplete).</p>'


def _protocol_section(run: RunBundle) -> str:
    """The protocol checks (`score.protocol`): a line of counts, then each check that did
    not pass, with its status, what a failure does and why."""
    raw = run.manifest.get("protocol")
    head = protocol.summary_line(raw)
    if head is None:
        return '<p class="muted">This bundle records no protocol checks.</p>'
    rows = [
        [_e(name), _e(s.status), _e(s.effect.replace("_", " ")), _e(s.detail)]
        for name, s in protocol.read_map(raw).items()
        if not s.ok
    ]
    refused = any(s.refuses for s in protocol.read_map(raw).values())
    cls = "warn" if refused or rows else "muted"
    note = " No comparison of this run is made." if refused else ""
    body = table(["check", "status", "if failed", "detail"], rows) if rows else ""
    return f'<p class="{cls}">{_e(head)}.{note}</p>{body}'


def _canaries_section(run: RunBundle) -> str:
    """The planted canaries (`score.canaries`), apart from every tier: one line, and a row per
    canary when the bundle kept them."""
    from eval_pipeline.runs.bundle import CANARIES_FILE
    from eval_pipeline.score.canaries import canary_verdict

    verdict, line = canary_verdict(run.summary.get("canaries"))
    if verdict == "off":
        return ""
    path = run.path / CANARIES_FILE
    text = path.read_text("utf-8") if path.is_file() else ""
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    cells = (
        [
            _e(r["key"]),
            _e(r["status"]),
            num(r.get("evidence_rank"), "not in the list"),
            {True: "yes", False: "no", None: "not judged"}[r.get("answered")],
            _e(_clip(r.get("answer"))),
        ]
        for r in rows
    )
    cls = "warn" if verdict == "broken" else "muted"
    return f'<h2>Canaries</h2><p class="{cls}">{_e(line)}</p>' + table(
        ["canary", "status", "evidence rank", "answered", "answer"], cells, numeric=[2]
    )


def _config_line(run: RunBundle, judgeless: bool) -> str:
    p = run.pins
    judge = p.get("judge")
    model = judge.get("model") if isinstance(judge, dict) else judge
    parts = [
        ("reconciler", (p.get("reconciler") or {}).get("name")),
        ("retriever", (p.get("retriever") or {}).get("retriever")),
        ("top k", p.get("top_k")),
        ("reader", p.get("reader")),
        ("judge", "none" if judgeless else model),
        # Which verdict method decided, asked for or the judge's default (score.verdict_choice).
        (
            "verdict",
            ((judge.get("verdict") or {}).get("text") if isinstance(judge, dict) else None),
        ),
    ]
    text = ", ".join(f"{k} <b>{_e(v)}</b>" for k, v in parts if v is not None)
    if judgeless:
        text += (
            ' <span class="muted">(no judge: judged metrics and abstention questions are '
            "unscored, never 0)</span>"
        )
    meaning = coverage_meaning(p)
    if meaning:
        text += f'<br><span class="muted">{_e(meaning)}.</span>'
    return f"<p>{text}</p>"


def _agreement_cell(pin: Any) -> str:
    """One judge prompt's stored check, as the manifest recorded it."""
    if not isinstance(pin, dict) or pin.get("status") != "checked":
        return '<span class="warn">no agreement check for this judge and prompt</span>'

    def ci(low: Any, high: Any) -> str:
        return f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""

    k = pin.get("kappa")
    acc = pin.get("accuracy")
    kappa = (
        "undefined" if k is None else f"{k:.2f}{ci(pin.get('kappa_low'), pin.get('kappa_high'))}"
    )
    accuracy = (
        "–" if acc is None else f"{acc:.2f}{ci(pin.get('accuracy_low'), pin.get('accuracy_high'))}"
    )
    method = f"verdict method {_e(pin['method'])}: " if pin.get("method") else ""
    biases = "".join(
        f'<br><span class="warn">judge bias: {_e(b)}</span>' for b in pin.get("biased_probes") or []
    )
    return (
        f"{method}kappa <b>{_e(kappa)}</b>, accuracy {_e(accuracy)}; {num(pin.get('n_judged'))} "
        f"judged, {num(pin.get('n_unscored'))} unscored of {num(pin.get('n_items'))} "
        f'<span class="muted">(measured {_e(pin.get("measured_at") or "?")})</span>{biases}'
    )


def _judge_agreement_section(run: RunBundle, judgeless: bool) -> str:
    """How far the run's judge agrees with the labelled set (`eval-pipeline judge-check`),
    shown before the judged scores it qualifies, with compare's warnings."""
    if judgeless:
        return ""
    judge = run.pins.get("judge") if isinstance(run.pins.get("judge"), dict) else {}
    if "agreement" not in judge:
        return (
            '<p class="warn">Judge agreement: not recorded (this bundle predates judge '
            "checks); run <code>eval-pipeline judge-check --judge MODEL</code>.</p>"
        )
    rows = [["answer judge (answer_judge, gates coverage)", _agreement_cell(judge["agreement"])]]
    if any(r.tier == "2" for r in run.rows):
        rows.append(
            [
                "invariant judge (invariant_score, tier 2)",
                _agreement_cell(judge.get("invariant_agreement")),
            ]
        )
    warnings = [
        w
        for pin in (
            judge.get("agreement"),
            judge.get("invariant_agreement") if len(rows) > 1 else None,
        )
        if isinstance(pin, dict)
        for w in pin.get("warnings") or []
    ]
    out = [
        "<h2>Judge agreement</h2>",
        '<p class="muted">The judged scores below are only as good as the judge: its agreement '
        "with the labelled set (<code>corpus/judge/</code>), stored by "
        "<code>eval-pipeline judge-check</code> for this judge model and prompt hash. Kappa "
        "below 0.8 means judged scores should be read with care.</p>",
        table(["judge prompt", "agreement with the labelled set"], rows),
    ]
    if warnings:
        out.append(
            '<p class="warn">'
            + "<br>".join(f"warning: {_e(w)}" for w in dict.fromkeys(warnings))
            + "</p>"
        )
    return "\n".join(out)


def _arm_cells(arms: dict[str, Any]) -> str:
    """A question's arms: each arm's outcome and answer."""
    out = []
    for arm, a in arms.items():
        a = a if isinstance(a, dict) else a.model_dump()
        outcome = {True: "covered", False: "not covered", None: "unscored"}[a.get("covered")]
        answer = a.get("answer")
        shown = _e(_clip(answer)) if answer is not None else "no answer"
        out.append(f"<b>{_e(arm)}</b> {_e(outcome)}: {shown}")
    return "<br>".join(out)


def _question_card(r: ResultRow, text: str | None, judgeless: bool) -> str:
    label, klass = next((lab, k) for v, lab, k in OUTCOMES if v is r.covered)
    head = f'<span class="badge">{_e(label)}</span> · <code>{_e(r.question_id)}</code>'
    head += f" · tier {_e(r.tier)} · {_e(r.question_type)}"
    if r.abstention:
        head += " · abstention (apart)"
    if asked := _x(r, "question_date"):
        head += f" · asked {_e(asked)}"
    shown = (
        f'<div class="text">{_e(text)}</div>'
        if text is not None
        else f'<div class="text muted">{_e(r.question_id)} {TEXT_UNAVAILABLE}</div>'
    )
    answer = _x(r, "answer")
    latency = _x(r, "latency_ms", {}) or {}
    payload = "payload not measured" if r.payload_tokens is None else None
    cost = (payload or f"{num(r.payload_tokens)} payload tokens") + "".join(
        f" · {_e(k)} {num(v)} ms" for k, v in latency.items() if v is not None
    )
    rows = [
        ("expected answer", _e(_x(r, "expected_output", "")) or '<span class="muted">none</span>'),
        (
            "hypothesis",
            _e(answer) if answer is not None else '<span class="muted">no answer produced</span>',
        ),
        ("outcome" if r.covered else "why " + label, why(r, judgeless)[1]),
        ("cost", f'{cost} <span class="dir">({LOWER})</span>'),
    ]
    stage = _x(r, "failure_stage")
    if stage:
        rows.insert(3, ("failed at", _e(STAGE_TITLES.get(stage, stage)) + _memory_note(r)))
    arms = _x(r, "arms") or {}
    if arms:
        rows.append(("reference arms", _arm_cells(arms)))
    if flag := _x(r, "errata"):
        flag = flag if isinstance(flag, dict) else flag.model_dump()
        links = ", ".join(_e(u) for u in flag.get("source") or [])
        rows.append(
            ("dataset errata", f"{_e(flag.get('status'))}: {_e(flag.get('what'))} ({links})")
        )
    for key, title in (("errors", "system errors (a miss)"), ("notes", "notes")):
        if _x(r, key):
            rows.append((title, "<br>".join(_e(v) for v in _x(r, key))))
    context = [str(c) for c in _x(r, "retrieval_context", [])]
    if context:
        items = "".join(f"<li><pre>{_e(c)}</pre></li>" for c in context)
        ctx = f"<details><summary>retrieved context: {len(context)} item(s)</summary>"
        ctx += f"<ol>{items}</ol></details>"
    else:
        ctx = '<p class="muted">retrieved context: nothing retrieved</p>'
    kv = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return (
        f'<div class="q {klass}" id="q-{_e(r.question_id)}"><div>{head}</div>{shown}'
        f"<table>{kv}</table>{ctx}</div>"
    )


def _memory_note(r: ResultRow) -> str:
    held = (_x(r, "evidence_memory") or {}).get("held") or {}
    out = ""
    ceiling = (_x(r, "arms") or {}).get("ceiling")
    ceiling = ceiling.model_dump() if hasattr(ceiling, "model_dump") else ceiling
    if _x(r, "failure_stage") == "reader" and ceiling_missed({"arms": {"ceiling": ceiling}}):
        out += (
            '<br><span class="muted">the reader missed it given the evidence sessions too '
            "(ceiling arm)</span>"
        )
    if held:
        parts = ", ".join(f"{_e(u)} {_e(v)}" for u, v in held.items())
        out += f'<br><span class="muted">evidence in memory: {parts}</span>'
    return out


def _questions_section(run: RunBundle, judgeless: bool) -> str:
    texts, note = question_texts(run)
    out = ["<h2>Questions</h2>"]
    if note:
        out.append(
            f'<p class="warn">Question text unavailable for some questions ({_e(note)}): '
            "their id stands in.</p>"
        )
    ordered = [r for value, _, _ in OUTCOMES for r in run.rows if r.covered is value]
    out.append(
        table(
            ["question", "text", "tier", "type", "abstention", "outcome", "failed at", "why"]
            + [("payload tokens", LOWER)],
            (
                [
                    f'<a href="#q-{_e(r.question_id)}">{_e(r.question_id)}</a>',
                    _e(_clip(texts.get(r.question_id))) or '<span class="muted">unavailable</span>',
                    _e(r.tier),
                    _e(r.question_type),
                    "yes" if r.abstention else "",
                    _e(next(lab for v, lab, _ in OUTCOMES if v is r.covered)),
                    _e(_x(r, "failure_stage") or ""),
                    _e(why(r, judgeless)[0]),
                    num(r.payload_tokens, "not measured"),
                ]
                for r in ordered
            ),
            numeric=(8,),
        )
    )
    for value, label, _ in OUTCOMES:
        group = [r for r in ordered if r.covered is value]
        if group:
            out.append(f"<h3>{_e(label.capitalize())} ({len(group)})</h3>")
            out += [_question_card(r, texts.get(r.question_id), judgeless) for r in group]
    return "\n".join(out)


def _run_panel_section(run: RunBundle) -> str:
    """The judge panel a run was scored under: each member's coverage per tier beside the
    main judge's, and the questions the members split on."""
    panel = run.summary.get("judge_panel")
    if not panel:
        return ""
    pins = {
        p.get("member"): p
        for p in ((run.pins.get("judge") or {}).get("panel") or [])
        if isinstance(p, dict)
    }
    out = [
        "<h2>Judge panel</h2>",
        '<p class="muted">The same answers judged by each member (<code>--judge-panel</code>); '
        "coverage decided by the gate with that member's verdict in place of the main "
        "judge's. <code>compare</code> calls a delta real only if every member agrees.</p>",
    ]
    for tier, s in (run.summary.get("tiers") or {}).items():
        tp = s.get("judge_panel")
        if not tp:
            continue
        main = s.get("coverage")
        rows = [["main judge", pct(main["rate"] if main else None), "", ""]]
        for key, m in tp["members"].items():
            cov = m.get("coverage")
            rows.append(
                [
                    _e(key),
                    pct(cov["rate"] if cov else None),
                    num(m.get("unjudged")),
                    _e(str((pins.get(key) or {}).get("method_hash", ""))[:12]),
                ]
            )
        out.append(f"<h3>Tier {_e(tier)}</h3>")
        out.append(
            table(
                ["judge", ("coverage", HIGHER), "unjudged", "method hash"],
                rows,
                numeric=(1, 2),
            )
        )
        split = tp.get("split") or {}
        ids = split.get("question_ids") or []
        out.append(
            f"<p>The panel splits on {len(ids)} question(s)"
            + (": " + ", ".join(f"<code>{_e(i)}</code>" for i in ids) if ids else "")
            + ".</p>"
        )
    return "\n".join(out)


def _arm_rate(tier_arms: dict[str, Any], arm: str, key: str, qtype: str | None = None) -> str:
    s = (tier_arms.get("arms") or {}).get(arm)
    if s is None:
        return dash("not run")
    est = s.get(key) if qtype is None else (s.get(key) or {}).get(qtype)
    return pct(est["rate"] if est else None)


def _run_arms_section(run: RunBundle) -> str:
    """The reference arms (`--arms`): per tier and question type, the floor's and the
    ceiling's coverage beside the system's, and where the system sits between them."""
    record = run.manifest.get("arms")
    tiers = {t: s["arms"] for t, s in (run.summary.get("tiers") or {}).items() if s.get("arms")}
    if not tiers:
        return ""
    context = (record or {}).get("context") or {}
    out = [
        "<h2>Reference arms</h2>",
        '<p class="muted">The run\'s reader on the same questions with no memory (floor) and '
        "with the evidence sessions (ceiling), judged by the run's answer judge on the answer "
        "alone. "
        + " ".join(f"<b>{_e(a)}</b>: {_e(c)}." for a, c in context.items())
        + " A system outside the two is noted, not an error.</p>",
    ]
    for tier, ta in tiers.items():
        s = run.summary["tiers"][tier]
        pos = ta.get("position") or {}
        out.append(f"<h3>Tier {_e(tier)}: {_e(pos.get('overall', ''))}</h3>")
        system = s.get("coverage")
        rows = [
            [
                "answerable",
                _arm_rate(ta, "floor", "coverage"),
                pct(system["rate"] if system else None),
                _arm_rate(ta, "ceiling", "coverage"),
            ]
        ]
        for qtype, est in (s.get("coverage_by_type") or {}).items():
            rows.append(
                [
                    _e(qtype),
                    _arm_rate(ta, "floor", "coverage_by_type", qtype),
                    pct(est["rate"] if est else None),
                    _arm_rate(ta, "ceiling", "coverage_by_type", qtype),
                ]
            )
        abst = (s.get("abstention") or {}).get("coverage")
        rows.append(
            [
                "abstention (apart)",
                _arm_rate(ta, "floor", "abstention_coverage"),
                pct(abst["rate"] if abst else None),
                _arm_rate(ta, "ceiling", "abstention_coverage"),
            ]
        )
        headers = ["questions", ("floor", HIGHER), ("system", HIGHER), ("ceiling", HIGHER)]
        out.append(table(headers, rows, numeric=(1, 2, 3)))
        for line in pos.get("outside") or []:
            out.append(f'<p class="warn">{_e(line)}</p>')
        unscored = {a: m.get("unscored", 0) for a, m in (ta.get("arms") or {}).items()}
        if any(unscored.values()):
            out.append(
                '<p class="muted">Unscored arm questions (left out of the arm\'s rate, never '
                "misses): " + ", ".join(f"{_e(a)} {n}" for a, n in unscored.items()) + ".</p>"
            )
    return "\n".join(out)


def render_run_report(run: RunBundle) -> str:
    m = run.manifest
    judgeless = no_judge(run)
    header = [
        f"<h1>Run {_e(run.name)}</h1>",
        f'<p class="muted">{_e(run.path)}<br>started {_e(m.get("started_at", "?"))}, '
        f"ended {_e(m.get('ended_at', '?'))}; Dagster run {_e(m.get('dagster_run_id', 'n/a'))}</p>",
        _status_banner(run),
        _protocol_section(run),
        _config_line(run, judgeless),
        _judge_agreement_section(run, judgeless),
        _errata_line(m),
    ]
    if m.get("comparable") is False:
        header.append(
            '<p class="warn">This run is subsampled (not comparable with the published '
            "benchmark numbers).</p>"
        )
    if (run.path / "REDACTED").exists():
        header.append('<p class="warn">Secret values were redacted from this bundle.</p>')
    header.append(
        '<p class="muted">Rates are over answerable questions; abstention questions are '
        "reported apart. A question whose gating metric was not taken is <i>unscored</i>, "
        "never a failure; a rate over nothing scored is shown as unscored, not 0%. "
        "Tiers are never blended. Each question, with what it was asked, what came back and "
        'why it failed, is listed at the end (<a href="#questions">questions</a>).</p>'
    )
    by_tier: dict[str, list[ResultRow]] = defaultdict(list)
    for r in run.rows:
        by_tier[r.tier].append(r)
    tiers = [
        _tier_section(tier, s, by_tier.get(tier, []), judgeless)
        for tier, s in (run.summary.get("tiers") or {}).items()
    ]
    pins = table(["pin", "value"], ([_e(k), _json_cell(v)] for k, v in _flatten(run.pins)))
    return page(
        f"Run {run.name}",
        [
            *header,
            *tiers,
            _canaries_section(run),
            _run_panel_section(run),
            _run_arms_section(run),
            '<div id="questions"></div>' + _questions_section(run, judgeless),
            _stage_section(m),
            _llm_section(m),
            "<h2>Pins</h2>" + pins,
        ],
    )


class PoorerReport(FileExistsError):
    """The report a refresh would write shows fewer question texts than the one it would
    replace (an old bundle whose goldens artifact was pruned): the existing one is kept."""


def write_run_report(run_dir: str | Path) -> Path:
    """Write (or refresh) `run_dir/report.html`; the four bundle files are never touched.
    Raises PoorerReport, writing nothing, when the existing report shows question texts the
    new one could not."""
    run = load_run(run_dir)
    target = run.path / RUN_REPORT
    if target.name in BUNDLE_FILES:  # guards a future rename: the bundle is immutable
        raise ValueError(f"refusing to overwrite bundle file {target}")
    text = render_run_report(run)
    if target.is_file():
        old = target.read_text(encoding="utf-8", errors="replace").count(TEXT_UNAVAILABLE)
        new = text.count(TEXT_UNAVAILABLE)
        if new > old:
            _, why = question_texts(run)
            raise PoorerReport(
                f"{target} kept: a new report would lack the text of {new - old} question(s) "
                f"it shows ({why}); this bundle predates question text in results.jsonl"
            )
    write_text(target, text)  # redacted like the bundle it describes
    return target


# --- comparison report --------------------------------------------------------------------


def _delta_rows(deltas: Sequence[PairedDelta]) -> list[list[str]]:
    rows = []
    for d in deltas:
        style = "real" if d.classification == "real" else ""
        klass = f'<span class="{style}">{_e(d.classification)}</span>'
        nothing = "nothing scored in both"
        rows.append(
            [
                _e(d.label),
                pct(d.base_rate, nothing),
                pct(d.candidate_rate, nothing),
                dash(nothing) if d.delta_pp is None else f"{d.delta_pp:+.1f} pp",
                str(d.pairs),
                str(d.excluded_unscored),
                f"b={d.b}, c={d.c}",
                f"{d.p_value:.3g}",
                _e(d.floor_text),
                klass,
            ]
        )
    return rows


DELTA_HEADERS: list[Header] = [
    "scope",
    ("base coverage", HIGHER),
    ("candidate coverage", HIGHER),
    ("delta", "positive is better"),
    "paired",
    "unscored (left out)",
    "discordant",
    "McNemar p",
    "noise floor",
    "classification",
]


def _recall_section(deltas: Sequence[RecallDelta]) -> str:
    """The evidence-recall delta per tier (`runs.recall_delta`), rendered as computed."""
    if not deltas:
        return ""
    nothing = "nothing measured in both"
    verdicts = {True: "significant", False: "not significant", None: nothing}
    rows = (
        [
            _e(f"tier {d.tier}"),
            pct(d.base_rate, nothing),
            pct(d.candidate_rate, nothing),
            dash(nothing) if d.delta_pp is None else f"{d.delta_pp:+.1f} pp",
            str(d.pairs),
            _e(left_out_text(d)),
            f"b={d.b}, c={d.c}",
            f"{d.p_value:.3g}",
            _e(verdicts[d.significant]),
            pct(d.base_recall_any, nothing),
            pct(d.candidate_recall_any, nothing),
        ]
        for d in deltas
    )
    k = deltas[0].k
    return "\n".join(
        [
            f"<h2>Evidence recall per tier (the gate's recall_all@{k}; never decides)</h2>",
            '<p class="muted">Per question: was all its evidence in the top '
            f"{k} (the gate's own recall), paired across the runs with its own exact McNemar "
            "test; questions with no evidence to recall and questions not measured in a run "
            "are left out and counted. Offline, coverage is mostly the reader's: recall is "
            "what separates memories. Reported beside coverage; coverage decides the verdict."
            "</p>",
            table(
                [
                    "scope",
                    ("base: all evidence retrieved", HIGHER),
                    ("candidate: all evidence retrieved", HIGHER),
                    ("delta", "positive is better"),
                    "paired",
                    "left out",
                    "discordant",
                    "McNemar p",
                    "paired test",
                    (f"base mean recall_any@{k}", HIGHER),
                    (f"candidate mean recall_any@{k}", HIGHER),
                ],
                rows,
                numeric=(1, 2, 3, 4, 7, 9, 10),
            ),
        ]
    )


def _run_status(ref_path: str) -> tuple[RunBundle | None, str]:
    """The run behind a comparison side, and a line saying whether it is complete."""
    try:
        run = load_run(ref_path)
    except BundleError as exc:
        return None, f"status unknown: {exc}"
    status = run.summary.get("status") or run.manifest.get("status") or "not recorded"
    info = run.summary.get("incomplete") or {}
    if status == "incomplete":
        causes = _counts(info.get("by_cause") or {}) or "cause not recorded"
        return (
            run,
            f"INCOMPLETE: {info.get('questions', '?')} unscored by infrastructure ({causes})",
        )
    return run, status


def _efficiency_delta_pct(e: Efficiency) -> str:
    if e.delta_pct is not None:
        return f"{e.delta_pct:+.1f}%"
    if not e.covered_in_both:
        return dash("nothing covered in both")
    return dash("base median is 0")


def _pp_cell(value: float | None, missing: str = "nothing scored in both") -> str:
    return dash(missing) if value is None else f"{value:+.1f} pp"


def _comparison_panel_section(p: PanelComparison | None) -> str:
    """The judge panel's sensitivity band per tier, each member's delta, the questions it
    splits on and the flips that depend on the member; or why there is no band."""
    if p is None:
        return ""
    out = [
        "<h2>Judge panel: sensitivity band</h2>",
        f"<p>Members: {', '.join(f'<code>{_e(m)}</code>' for m in p.members)}. A real delta "
        "stays real only if under every member it keeps its sign and is real too.</p>",
    ]
    if not p.band:
        out.append(f'<p class="warn">No band: {_e(p.reason)}.</p>')
    for b in p.tiers:
        robust = {True: "robust", False: "NOT ROBUST", None: "main delta not real"}[b.robust]
        band = (
            dash("nothing scored in both")
            if b.low_pp is None
            else f"{b.low_pp:+.1f} pp .. {b.high_pp:+.1f} pp"
        )
        out.append(
            f"<h3>Tier {_e(b.tier)}: band {band} (main {_pp_cell(b.main_delta_pp)}, "
            f"{_e(b.main_classification)}; {robust})</h3>"
        )
        out.append(
            table(
                [
                    "member",
                    ("base coverage", HIGHER),
                    ("candidate coverage", HIGHER),
                    ("delta", "positive is better"),
                    "paired",
                    "discordant",
                    "McNemar p",
                    "classification",
                    "holds the main delta",
                ],
                (
                    [
                        _e(m.member),
                        pct(m.delta.base_rate, "nothing scored in both"),
                        pct(m.delta.candidate_rate, "nothing scored in both"),
                        _pp_cell(m.delta.delta_pp),
                        str(m.delta.pairs),
                        f"b={m.delta.b}, c={m.delta.c}",
                        f"{m.delta.p_value:.3g}",
                        _e(m.delta.classification),
                        {True: "yes", None: "–"}.get(m.holds, f"no: {_e(m.why)}"),
                    ]
                    for m in b.members
                ),
                numeric=(1, 2, 3, 4, 6),
            )
        )
    for who, ids in (("base", p.split_base), ("candidate", p.split_candidate)):
        out.append(
            f"<p>The panel splits on {len(ids)} question(s) in the {who}"
            + (": " + ", ".join(f"<code>{_e(i)}</code>" for i in ids) if ids else "")
            + ".</p>"
        )
    if p.band:
        out.append(f"<h3>Flips that depend on the member ({len(p.member_dependent_flips)})</h3>")
        out.append(
            table(
                ["question", "tier", *(_e(m) for m in p.members)],
                (
                    [
                        _e(f.question_id),
                        _e(f.tier),
                        *(_e(f.by_member.get(m) or "unscored") for m in p.members),
                    ]
                    for f in p.member_dependent_flips
                ),
            )
        )
    return "\n".join(out)


def render_comparison_report(c: Comparison) -> str:
    out = [
        f"<h1>Comparison: {_e(c.base.name)} → {_e(c.candidate.name)}</h1>",
        f'<div class="banner {c.verdict}">{c.verdict}: {_e(c.verdict_reason)}</div>',
    ]
    if not c.calibrated:
        out.append(
            '<p class="warn"><b>NOT CALIBRATED</b>: no noise floor was given, so every delta is '
            "<i>cannot tell</i>. Calibrate on repeat runs (<code>eval-pipeline calibrate RUN RUN "
            "...</code>) and compare with <code>--noise-floor</code>.</p>"
        )
    else:
        out.append(
            f"<p>Noise floor: {_e(c.noise_floor or 'given in memory')}<br>"
            f'<span class="muted">{_e(c.noise_floor_note or "")}</span></p>'
        )
    base_run, base_status = _run_status(c.base.path)
    cand_run, cand_status = _run_status(c.candidate.path)
    out.append(
        table(
            ["", "run", "status", "path"],
            [
                ["base", _e(c.base.name), _e(base_status), _e(c.base.path)],
                ["candidate", _e(c.candidate.name), _e(cand_status), _e(c.candidate.path)],
            ],
        )
    )
    if "INCOMPLETE" in base_status or "INCOMPLETE" in cand_status:
        out.append(
            '<p class="warn">An incomplete run is part of this comparison: its unscored '
            "questions are left out of every pair, so fewer questions decide.</p>"
        )
    out.append(f'<p class="muted">Rule: {_e(c.rule)}</p>')
    out.append("<h2>What changed</h2>")
    out.append(
        table(
            ["pin (not a comparability pin)", "base", "candidate"],
            (
                [_e(ch["pin"]), _json_cell(ch["base"]), _json_cell(ch["candidate"])]
                for ch in c.changes
            ),
        )
    )
    out.append("<h2>Coverage deltas per tier</h2>")
    bars = [
        DeltaBar(d.label, d.delta_pp, d.floor_pp, d.classification) for d in [*c.tiers, *c.by_type]
    ]
    title = "Coverage delta, candidate − base, positive is better (grey band: noise floor)"
    if any(b.delta_pp is not None for b in bars):
        out.append(delta_bars(title, bars))
    else:
        out.append(no_chart(title, "no question was scored in both runs"))
    out.append(table(DELTA_HEADERS, _delta_rows(c.tiers), numeric=(1, 2, 3, 4, 5, 7, 8)))
    if c.verdict_without_panel is not None:
        out.append(
            f'<p class="warn">Without the judge panel the verdict would be '
            f"{_e(c.verdict_without_panel)}.</p>"
        )
    out.append(_recall_section(c.evidence_recall))
    out.append(_comparison_panel_section(c.judge_panel))
    # Coverage is decided by the judge: how far to trust it, next to the deltas.
    if c.judge_agreement:
        out.append("<h2>Judge agreement</h2>")
        out.append(
            table(
                ["judge prompt", "agreement with the labelled set", "from"],
                (
                    [
                        _e(f"{a.kind} ({a.model}, prompt {str(a.prompt_hash)[:12]})"),
                        _agreement_cell(a.check),
                        _e("the run's manifest" if a.source == "manifest" else "checked after"),
                    ]
                    for a in c.judge_agreement
                ),
            )
        )
        if c.judge_warnings:
            out.append(
                '<p class="warn">'
                + "<br>".join(f"warning: {_e(w)}" for w in c.judge_warnings)
                + "</p>"
            )
    out.append("<h2>Coverage deltas per question type</h2>")
    out.append(table(DELTA_HEADERS, _delta_rows(c.by_type), numeric=(1, 2, 3, 4, 5, 7, 8)))
    out.append("<h2>Abstention (apart; never decides the verdict)</h2>")
    out.append(table(DELTA_HEADERS, _delta_rows(c.abstention), numeric=(1, 2, 3, 4, 5, 7, 8)))
    out.append("<h2>Efficiency (questions covered in both runs only)</h2>")
    out.append(
        table(
            [
                "tier",
                "covered in both",
                ("base median tokens", LOWER),
                ("candidate median tokens", LOWER),
                ("delta", "negative is better"),
                ("delta %", "negative is better"),
            ],
            (
                [
                    _e(e.tier),
                    str(e.covered_in_both),
                    num(e.base_median_tokens, "– (nothing covered in both)"),
                    num(e.candidate_median_tokens, "– (nothing covered in both)"),
                    num(e.delta_tokens, "– (nothing covered in both)"),
                    _efficiency_delta_pct(e),
                ]
                for e in c.efficiency
            ),
            numeric=(1, 2, 3, 4, 5),
        )
    )
    out.append('<p class="muted">Efficiency is reported, never decisive.</p>')
    texts = question_texts(cand_run)[0] if cand_run else {}
    if base_run:
        texts = {**question_texts(base_run)[0], **texts}
    if c.stages:
        out.append("<h2>Where questions failed, base → candidate</h2>")
        out.append(
            table(
                ["tier", *(STAGE_TITLES[s] for s in STAGE_TITLES)],
                (
                    [_e(tier), *(f"{num(b)} → {num(cn)}" for b, cn in moved.values())]
                    for tier, moved in c.stages.items()
                ),
            )
        )
    for title, flips, failing in (
        ("Lost: covered in base, not in candidate", c.lost, "candidate"),
        ("Gained: covered in candidate, not in base", c.gained, "base"),
    ):
        out.append(f"<h2>{_e(title)} ({len(flips)})</h2>")
        out.append(
            table(
                ["question", "text", "tier", "type", "abstention", f"failed at ({failing} run)"]
                + [f"weakest link ({failing} run)", "evidence memory, base → candidate"],
                (
                    [
                        _e(f.question_id),
                        _e(texts[f.question_id])
                        if f.question_id in texts
                        else '<span class="muted">text unavailable</span>',
                        _e(f.tier),
                        _e(f.question_type),
                        "yes" if f.abstention else "",
                        _e(f.failure_stage or "not recorded"),
                        _e(f.weakest_link or "not recorded"),
                        _e(f.memory or ""),
                    ]
                    for f in flips
                ),
            )
        )
    out.append("<h2>Comparability pins (equal in both runs)</h2>")
    out.append(
        table(
            ["pin", "value"],
            (
                [_e(k), f"{len(v)} questions" if k == "question_set" else _json_cell(v)]
                for k, v in c.pins.items()
            ),
        )
    )
    return page(f"Comparison {c.base.name} vs {c.candidate.name}", out)


def default_comparison_dir(c: Comparison) -> Path:
    """`<runs_dir>/comparisons/<base>__vs__<candidate>/`, the runs dir being the candidate's."""
    return (
        Path(c.candidate.path).parent / COMPARISONS_DIR / f"{c.base.name}__vs__{c.candidate.name}"
    )


def write_comparison_report(c: Comparison, out_dir: str | Path | None = None) -> Path:
    """Write comparison.json and comparison.html together (staged, then moved in); returns
    the HTML path. A comparison is derived data: running it again replaces both files."""
    target = Path(out_dir).expanduser().resolve() if out_dir else default_comparison_dir(c)
    with staged_files(target, [COMPARISON_JSON, COMPARISON_HTML]) as stage:
        (stage / COMPARISON_JSON).write_text(c.model_dump_json(indent=2) + "\n", encoding="utf-8")
        (stage / COMPARISON_HTML).write_text(render_comparison_report(c), encoding="utf-8")
    return target / COMPARISON_HTML
