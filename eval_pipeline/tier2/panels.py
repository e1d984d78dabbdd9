"""Tier-2 panels: coverage and citation quality per use case, difficulty, source mix and
(for COMBO scenarios) per dimension.

Only rows of tier 2 are read; rows of any other tier are skipped and counted, so a tier-1
number can never leak into a tier-2 panel (and the tier-1 summary never sees these panels).

Layout:

    {"tier": 2, "questions": n, "skipped_other_tiers": n,
     "by_use_case" | "by_difficulty" | "by_source_mix" | "by_dimension":
        {key: {"questions", "abstention", "covered", "not_covered", "unscored",
               "coverage_rate",               # answerable questions, scored ones only
               "abstention_coverage_rate",
               "citation_precision" | "citation_recall" | "criteria_score" |
               "invariant_score":
                   {"mean", "n_scored"},
               "must_not_cite_hit_questions"}}}

A rate or mean over nothing scored is None, never 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from statistics import fmean
from typing import Any

from eval_pipeline.tier2.convert import TIER
from eval_pipeline.tier2.metrics import CRITERIA_METRIC, INVARIANT_METRIC

PANELS = ("by_use_case", "by_difficulty", "by_source_mix", "by_dimension")
_MEANS = ("citation_precision", "citation_recall", CRITERIA_METRIC, INVARIANT_METRIC)


def _rate(values: list[bool | None]) -> float | None:
    scored = [v for v in values if v is not None]
    return sum(scored) / len(scored) if scored else None


def _score(row: Mapping[str, Any], name: str) -> float | None:
    metric = row.get("metrics", {}).get(name)
    if metric is None:
        return None
    return metric.get("score") if isinstance(metric, Mapping) else metric.score


def panel_cell(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in rows if not r.get("abstention")]
    abstaining = [r for r in rows if r.get("abstention")]
    cell: dict[str, Any] = {
        "questions": len(rows),
        "abstention": len(abstaining),
        "covered": sum(1 for r in answerable if r.get("covered") is True),
        "not_covered": sum(1 for r in answerable if r.get("covered") is False),
        "unscored": sum(1 for r in answerable if r.get("covered") is None),
        "coverage_rate": _rate([r.get("covered") for r in answerable]),
        "abstention_coverage_rate": _rate([r.get("covered") for r in abstaining]),
    }
    for name in _MEANS:
        scores = [s for s in (_score(r, name) for r in rows) if s is not None]
        cell[name] = {"mean": fmean(scores) if scores else None, "n_scored": len(scores)}
    cell["must_not_cite_hit_questions"] = sum(
        1 for r in rows if (_score(r, "must_not_cite_hits") or 0) > 0
    )
    return cell


def _golden_index(goldens: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    if isinstance(goldens, Mapping):
        return dict(goldens)
    return {g["name"]: g for g in goldens}


def tier2_panels(
    rows: Iterable[Mapping[str, Any]],
    goldens: Mapping[str, Any] | Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """Panels over scored result rows; `goldens` (by name, or a list of rows) supplies the
    tier-2 metadata the rows do not carry."""
    index = _golden_index(goldens)
    groups: dict[str, dict[str, list]] = {p: defaultdict(list) for p in PANELS}
    skipped = 0
    used = 0
    for row in rows:
        golden = index.get(row["question_id"])
        meta = golden["additional_metadata"] if golden is not None else None
        if row.get("tier") != TIER or meta is None or meta.get("tier") != TIER:
            skipped += 1
            continue
        used += 1
        groups["by_use_case"][meta["use_case"]].append(row)
        groups["by_difficulty"][meta["difficulty"]].append(row)
        groups["by_source_mix"]["+".join(sorted(meta["source_mix"]))].append(row)
        if meta["use_case"] == "COMBO":
            for dim in meta["dimensions"]:
                groups["by_dimension"][dim].append(row)
    out: dict[str, Any] = {"tier": TIER, "questions": used, "skipped_other_tiers": skipped}
    for panel in PANELS:
        out[panel] = {key: panel_cell(rs) for key, rs in sorted(groups[panel].items())}
    return out


def _fmt(value: float | None, pct: bool = True) -> str:
    if value is None:
        return "unscored"
    return f"{100 * value:.1f}%" if pct else f"{value:.1f}"


def tier2_panels_markdown(panels: Mapping[str, Any]) -> str:
    """One table per panel, for Dagster metadata and the CLI."""
    out = [f"### Tier 2 panels ({panels['questions']} questions)"]
    for panel in PANELS:
        cells = panels[panel]
        if not cells:
            continue
        out += [
            "",
            f"| {panel.removeprefix('by_').replace('_', ' ')} | questions | coverage | "
            "citation precision | citation recall | criteria score | invariant score | "
            "must-not-cite hits |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for key, c in cells.items():
            out.append(
                f"| {key} | {c['questions']} | {_fmt(c['coverage_rate'])} | "
                f"{_fmt(c['citation_precision']['mean'])} | "
                f"{_fmt(c['citation_recall']['mean'])} | "
                f"{_fmt(c[CRITERIA_METRIC]['mean'], pct=False)} | "
                f"{_fmt((c.get(INVARIANT_METRIC) or {}).get('mean'), pct=False)} | "
                f"{c['must_not_cite_hit_questions']} |"
            )
    return "\n".join(out)
