"""Self-contained HTML reports: one per run (`report.html` in the run directory) and one per
comparison (`comparison.html` + `comparison.json` in a comparisons directory).

Self-contained means one file: inline CSS, inline SVG charts (`eval_pipeline.runs.svg`), no
script, no CDN, no link to another file, so a report can be mailed or archived as it is.
A rate that was not scored is printed "unscored", never 0.

A run bundle is otherwise immutable: the run report is the one file added to a run
directory, written to a temporary file and renamed into place, and it can never take the
name of a bundle file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path
from typing import Any

from eval_pipeline.corpus.jsonl import staged_outputs
from eval_pipeline.runs.bundle import BUNDLE_FILES
from eval_pipeline.runs.compare import Comparison, PairedDelta
from eval_pipeline.runs.load import ResultRow, RunBundle, load_run
from eval_pipeline.runs.svg import DeltaBar, RateBar, delta_bars, histogram, rate_bars, value_bars
from eval_pipeline.score.stats import bootstrap_ci

RUN_REPORT = "report.html"
COMPARISON_JSON = "comparison.json"
COMPARISON_HTML = "comparison.html"
COMPARISONS_DIR = "comparisons"
# Per question type: the upstream headline metric and the coverage gate's own metric.
TYPE_RECALLS = (("turn", "upstream", "recall_any@5"), ("turn", "all", "recall_all@10"))

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0 1em}td,th{border:1px solid #ddd;padding:.25em .6em;
text-align:left;vertical-align:top}th{background:#f4f4f4}td.num{text-align:right}
.unscored{color:#777;font-style:italic}.muted{color:#666}.banner{padding:.8em 1em;
border-radius:4px;font-size:1.2em;font-weight:bold;margin:1em 0}.REGRESSED{background:#fdecea;
color:#b71c1c}.IMPROVED{background:#e8f5e9;color:#1b5e20}.INCONCLUSIVE{background:#fff8e1;
color:#8d6e00}.warn{background:#fff3e0;border-left:4px solid #ef6c00;padding:.5em 1em}
.real{font-weight:bold}code{background:#f4f4f4;padding:0 .2em}svg{display:block;margin:.5em 0}
"""


# --- formatting ---------------------------------------------------------------------------


def _e(value: Any) -> str:
    return escape(str(value))


def pct(value: float | None) -> str:
    return '<span class="unscored">unscored</span>' if value is None else f"{100 * value:.1f}%"


def ci(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return '<span class="muted">–</span>'
    return f"{100 * low:.1f}% – {100 * high:.1f}%"


def num(value: Any, missing: str = "n/a") -> str:
    if value is None:
        return f'<span class="muted">{_e(missing)}</span>'
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return _e(value)


def table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = ()
) -> str:
    """Cells are HTML already (escaped by the caller); `numeric` columns align right."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    if not body:
        body.append(f'<tr><td colspan="{len(headers)}" class="muted">none</td></tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


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
        return f"<code>{_e(json.dumps(value, sort_keys=True))}</code>"
    return _e(value)


# --- run report ---------------------------------------------------------------------------


def _covered_text(covered: bool | None) -> str:
    if covered is None:
        return '<span class="unscored">unscored</span>'
    return "covered" if covered else "not covered"


def recall_by_type(rows: Sequence[ResultRow], level: str, variant: str, name: str) -> list[RateBar]:
    """Per question type: mean of a per-question recall with a bootstrap CI (binary values)."""
    by_type: dict[str, list[float]] = defaultdict(list)
    unscored: dict[str, int] = defaultdict(int)
    for r in rows:
        value = ((r.retrieval_metrics.get(level) or {}).get(variant) or {}).get(name)
        if value is None:
            unscored[r.question_type] += 1
        else:
            by_type[r.question_type].append(float(value))
    bars = []
    for qtype in sorted({r.question_type for r in rows}):
        values = by_type.get(qtype, [])
        if not values:
            bars.append(RateBar(qtype, None))
        elif all(v in (0.0, 1.0) for v in values):
            est = bootstrap_ci([int(v) for v in values])
            assert est is not None
            bars.append(RateBar(qtype, est.rate, est.low, est.high, est.n_scored))
        else:
            bars.append(RateBar(qtype, sum(values) / len(values), None, None, len(values)))
    return bars


def _rate_table(bars: Sequence[RateBar], unscored: dict[str, int] | None = None) -> str:
    return table(
        ["question type", "rate", "95% CI", "n scored"]
        + (["unscored"] if unscored is not None else []),
        (
            [_e(b.label), pct(b.rate), ci(b.low, b.high), str(b.n)]
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


def _tier_section(tier: str, s: dict[str, Any], rows: Sequence[ResultRow]) -> str:
    c = s.get("counts", {})
    cov = s.get("coverage")
    abst = (s.get("abstention") or {}).get("coverage")
    eff = s.get("efficiency") or {}
    out = [f"<h2>Tier {_e(tier)}</h2>"]
    out.append(
        table(
            ["questions", "abstention (apart)", "covered", "not covered", "unscored"],
            [
                [
                    num(c.get(k))
                    for k in ("questions", "abstention", "covered", "not_covered", "unscored")
                ]
            ],
            numeric=range(5),
        )
    )
    out.append("<h3>Coverage (answerable questions)</h3>")
    out.append(
        table(
            [
                "coverage",
                "95% CI",
                "n scored",
                "n unscored",
                "task-averaged",
                "abstention coverage",
            ],
            [
                [
                    pct(cov["rate"] if cov else None),
                    ci(cov["low"], cov["high"]) if cov else ci(None, None),
                    num(cov["n_scored"] if cov else 0),
                    num(cov["n_unscored"] if cov else c.get("unscored")),
                    pct(s.get("coverage_task_averaged")),
                    pct(abst["rate"] if abst else None),
                ]
            ],
            numeric=range(6),
        )
    )
    answerable = [r for r in rows if not r.abstention]
    unscored_by_type: dict[str, int] = defaultdict(int)
    for r in answerable:
        if r.covered is None:
            unscored_by_type[r.question_type] += 1
    cov_bars = [
        RateBar(t, e["rate"], e["low"], e["high"], e["n_scored"]) if e else RateBar(t, None)
        for t, e in (s.get("coverage_by_type") or {}).items()
    ]
    out.append("<h3>Coverage per question type</h3>")
    out.append(rate_bars(f"Tier {tier}: coverage per question type (95% CI)", cov_bars))
    out.append(_rate_table(cov_bars, unscored_by_type))
    out.append("<h3>Evidence recall per question type</h3>")
    for level, variant, name in TYPE_RECALLS:
        bars = recall_by_type(rows, level, variant, name)
        title = f"Tier {tier}: {level}-level {name} ({variant} variant), 95% CI"
        # A recall variant leaves some questions out by protocol (no user-side evidence):
        # that is "excluded", still never 0.
        out.append(rate_bars(title, bars, missing="unscored (excluded)"))
        out.append(_rate_table(bars))
    out.append("<h3>Evidence recall (all questions in the tier)</h3>")
    retrieval_rows = []
    for level, variants in (s.get("retrieval") or {}).items():
        for variant, metrics in variants.items():
            for key in ("recall_any@5", "recall_all@5", "ndcg@5", "recall_all@10"):
                m = metrics.get(key) or {}
                retrieval_rows.append(
                    [
                        _e(level),
                        _e(variant),
                        _e(key),
                        pct(m.get("mean")),
                        ci(m.get("low"), m.get("high")),
                        num(m.get("n")),
                    ]
                )
    out.append(table(["level", "variant", "metric", "mean", "95% CI", "n"], retrieval_rows, (3, 5)))
    excluded = s.get("excluded") or {}
    if any(excluded.values()):
        out.append(
            '<p class="muted">Excluded from recall: '
            + "; ".join(f"{_e(v)}: {len(ids)} question(s)" for v, ids in excluded.items())
            + "</p>"
        )
    out.append("<h3>Payload tokens and efficiency</h3>")
    series = {
        "covered": [r.payload_tokens or 0 for r in answerable if r.covered is True],
        "not covered": [r.payload_tokens or 0 for r in answerable if r.covered is False],
        "unscored": [r.payload_tokens or 0 for r in answerable if r.covered is None],
    }
    out.append(histogram(f"Tier {tier}: payload tokens per answerable question", series))
    out.append(
        table(
            [
                "median payload tokens (covered only, comparable)",
                "median (all answerable, not comparable)",
            ],
            [
                [
                    num(eff.get("median_payload_tokens_covered")),
                    num(eff.get("median_payload_tokens_all")),
                ]
            ],
            numeric=(0, 1),
        )
    )
    out.append("<h3>Metrics and weakest links</h3>")
    out.append(
        table(
            ["metric", "mean score", "n scored", "n unscored", "pass rate"],
            (
                [
                    _e(name),
                    num(m.get("mean"), "unscored"),
                    num(m.get("n_scored")),
                    num(m.get("n_unscored")),
                    _pass_rate(m),
                ]
                for name, m in (s.get("metrics") or {}).items()
            ),
            numeric=(1, 2, 3, 4),
        )
    )
    out.append(
        table(
            ["weakest link", "questions"],
            ([_e(k), num(v)] for k, v in sorted((s.get("weakest_link") or {}).items())),
            numeric=(1,),
        )
    )
    return "\n".join(out)


def _stage_section(manifest: dict[str, Any]) -> str:
    stages = manifest.get("stages") or {}
    items = [(name, (v or {}).get("seconds")) for name, v in stages.items()]
    out = ["<h2>Stage timings</h2>"]
    if not items:
        return out[0] + '<p class="muted">no stage timings recorded</p>'
    out.append(value_bars("Seconds per stage", items, "s"))
    total = sum(v for _, v in items if v is not None)
    out.append(
        table(
            ["stage", "seconds", "Dagster run"],
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


def _questions_section(rows: Sequence[ResultRow]) -> str:
    return "<h2>Questions</h2>" + table(
        ["question", "tier", "type", "abstention", "covered", "weakest link", "payload tokens"],
        (
            [
                _e(r.question_id),
                _e(r.tier),
                _e(r.question_type),
                "yes" if r.abstention else "",
                _covered_text(r.covered),
                _e(r.weakest_link or ""),
                num(r.payload_tokens),
            ]
            for r in rows
        ),
        numeric=(6,),
    )


def render_run_report(run: RunBundle) -> str:
    m = run.manifest
    header = [
        f"<h1>Run {_e(run.name)}</h1>",
        f'<p class="muted">{_e(run.path)}<br>started {_e(m.get("started_at", "?"))}, '
        f"ended {_e(m.get('ended_at', '?'))}; Dagster run {_e(m.get('dagster_run_id', 'n/a'))}</p>",
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
        "never a failure; a rate over nothing scored is shown as unscored, not 0%.</p>"
    )
    by_tier: dict[str, list[ResultRow]] = defaultdict(list)
    for r in run.rows:
        by_tier[r.tier].append(r)
    tiers = [
        _tier_section(tier, s, by_tier.get(tier, []))
        for tier, s in (run.summary.get("tiers") or {}).items()
    ]
    pins = table(
        ["pin", "value"],
        ([_e(k), _json_cell(v)] for k, v in _flatten(run.pins)),
    )
    return page(
        f"Run {run.name}",
        [
            *header,
            *tiers,
            _stage_section(m),
            _llm_section(m),
            "<h2>Pins</h2>" + pins,
            _questions_section(run.rows),
        ],
    )


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_run_report(run_dir: str | Path) -> Path:
    """Write (or refresh) `run_dir/report.html`; the four bundle files are never touched."""
    run = load_run(run_dir)
    target = run.path / RUN_REPORT
    if target.name in BUNDLE_FILES:  # guards a future rename: the bundle is immutable
        raise ValueError(f"refusing to overwrite bundle file {target}")
    _atomic_write(target, render_run_report(run))
    return target


# --- comparison report --------------------------------------------------------------------


def _delta_rows(deltas: Sequence[PairedDelta]) -> list[list[str]]:
    rows = []
    for d in deltas:
        style = "real" if d.classification == "real" else ""
        klass = f'<span class="{style}">{_e(d.classification)}</span>'
        rows.append(
            [
                _e(d.label),
                pct(d.base_rate),
                pct(d.candidate_rate),
                '<span class="unscored">unscored</span>'
                if d.delta_pp is None
                else f"{d.delta_pp:+.1f} pp",
                str(d.pairs),
                str(d.excluded_unscored),
                f"b={d.b}, c={d.c}",
                f"{d.p_value:.3g}",
                _e(d.floor_text),
                klass,
            ]
        )
    return rows


DELTA_HEADERS = [
    "scope",
    "base",
    "candidate",
    "delta",
    "paired",
    "unscored (left out)",
    "discordant",
    "McNemar p",
    "noise floor",
    "classification",
]


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
    out.append(
        table(
            ["", "run", "path"],
            [
                ["base", _e(c.base.name), _e(c.base.path)],
                ["candidate", _e(c.candidate.name), _e(c.candidate.path)],
            ],
        )
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
    out.append(delta_bars("Coverage delta, candidate − base (grey band: noise floor)", bars))
    out.append(table(DELTA_HEADERS, _delta_rows(c.tiers), numeric=(1, 2, 3, 4, 5, 7, 8)))
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
                "base median tokens",
                "candidate median tokens",
                "delta",
                "delta %",
            ],
            (
                [
                    _e(e.tier),
                    str(e.covered_in_both),
                    num(e.base_median_tokens),
                    num(e.candidate_median_tokens),
                    num(e.delta_tokens),
                    "n/a" if e.delta_pct is None else f"{e.delta_pct:+.1f}%",
                ]
                for e in c.efficiency
            ),
            numeric=(1, 2, 3, 4, 5),
        )
    )
    out.append('<p class="muted">Efficiency is reported, never decisive.</p>')
    for title, flips, failing in (
        ("Lost: covered in base, not in candidate", c.lost, "candidate"),
        ("Gained: covered in candidate, not in base", c.gained, "base"),
    ):
        out.append(f"<h2>{_e(title)} ({len(flips)})</h2>")
        out.append(
            table(
                ["question", "tier", "type", "abstention", f"weakest link ({failing} run)"],
                (
                    [
                        _e(f.question_id),
                        _e(f.tier),
                        _e(f.question_type),
                        "yes" if f.abstention else "",
                        _e(f.weakest_link or "not recorded"),
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
    with staged_outputs(target, [COMPARISON_JSON, COMPARISON_HTML]) as stage:
        (stage / COMPARISON_JSON).write_text(c.model_dump_json(indent=2) + "\n", encoding="utf-8")
        (stage / COMPARISON_HTML).write_text(render_comparison_report(c), encoding="utf-8")
    return target / COMPARISON_HTML
