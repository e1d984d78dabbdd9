"""Tier 2's pass criteria, after potpie's benchmark: three axes per scenario, weighted by use
case, and a pass rule per scenario and per use-case bucket.

Axes (0..100 each, None when not taken):
- ingestion: `tier2.ingestion` (the graph held the expected entities and claims, not the
  forbidden ones);
- retrieval: the mean citation recall of the scenario's answerable questions, × 100;
- agent use: the mean criteria-judge score of its questions (0..100; None without a judge).

A scenario passes when every axis meets its threshold (`AXIS_THRESHOLDS`) and the weighted
score meets its `pass_score` (`DEFAULT_PASS_SCORE` unless the scenario sets one); a COMBO
scenario must also score at least `COMBO_DIMENSION_MIN` on each declared dimension, a
dimension's score being the axes weighted with that dimension's use-case weights. An axis not
taken leaves the verdict None (unscored), never a fail. A bucket (use case) passes when at
least `BUCKET_PASS_RATE` of its scored scenarios pass; None when none was scored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean
from typing import Any

AXES = ("ingestion", "retrieval", "agent_use")
# Per use case: ingestion / retrieval / agent use, in percent.
AXIS_WEIGHTS: dict[str, tuple[int, int, int]] = {
    "PREF": (20, 40, 40),
    "INFRA": (30, 40, 30),
    "TIME": (40, 30, 30),
    "BUG": (25, 35, 40),
    "COMBO": (30, 35, 35),
}
# Each axis's floor: below it a scenario fails whatever its weighted score.
AXIS_THRESHOLDS: dict[str, float] = {"ingestion": 60.0, "retrieval": 50.0, "agent_use": 60.0}
DEFAULT_PASS_SCORE = 70.0  # the weighted score a scenario must reach unless it sets pass_score
BUCKET_PASS_RATE = 0.8
COMBO_DIMENSION_MIN = 60.0

assert all(sum(w) == 100 for w in AXIS_WEIGHTS.values())


def weighted_score(use_case: str, axes: Mapping[str, float | None]) -> float | None:
    """The axes weighted by `use_case`; None when any axis was not taken."""
    if any(axes.get(a) is None for a in AXES):
        return None
    return sum(w * float(axes[a]) for w, a in zip(AXIS_WEIGHTS[use_case], AXES, strict=True)) / 100  # type: ignore[arg-type]


def scenario_verdict(
    use_case: str,
    axes: Mapping[str, float | None],
    *,
    pass_score: float | None = None,
    dimensions: Sequence[str] = (),
    thresholds: Mapping[str, float] = AXIS_THRESHOLDS,
) -> dict[str, Any]:
    """`{"weighted", "pass_score", "dimension_scores", "passed", "failed_because"}`; passed is
    None when an axis was not taken."""
    target = DEFAULT_PASS_SCORE if pass_score is None else float(pass_score)
    weighted = weighted_score(use_case, axes)
    dims = {d: weighted_score(d, axes) for d in dimensions} if use_case == "COMBO" else {}
    out: dict[str, Any] = {
        "axes": {a: axes.get(a) for a in AXES},
        "weighted": weighted,
        "pass_score": target,
        "dimension_scores": dims,
        "passed": None,
        "failed_because": [],
    }
    if weighted is None:
        missing = [a for a in AXES if axes.get(a) is None]
        out["failed_because"] = [f"unscored: {', '.join(missing)} not taken"]
        return out
    why = [
        f"{a} {axes[a]:.1f} < {thresholds[a]:g}"
        for a in AXES
        if float(axes[a]) < thresholds[a]  # type: ignore[arg-type]
    ]
    if weighted < target:
        why.append(f"weighted {weighted:.1f} < pass_score {target:g}")
    why += [
        f"dimension {d} {s:.1f} < {COMBO_DIMENSION_MIN:g}"
        for d, s in dims.items()
        if s is not None and s < COMBO_DIMENSION_MIN
    ]
    out["passed"] = not why
    out["failed_because"] = why
    return out


def bucket_verdict(verdicts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Pass rate of a use-case bucket over its scored scenarios."""
    verdicts = list(verdicts)
    scored = [v for v in verdicts if v["passed"] is not None]
    passed = sum(1 for v in scored if v["passed"])
    rate = passed / len(scored) if scored else None
    return {
        "scenarios": len(verdicts),
        "scored": len(scored),
        "passed": passed,
        "pass_rate": rate,
        "bucket_passed": None if rate is None else rate >= BUCKET_PASS_RATE,
    }


def _mean(values: Iterable[float | None]) -> float | None:
    scored = [v for v in values if v is not None]
    return fmean(scored) if scored else None


def _metric(row: Mapping[str, Any], name: str) -> float | None:
    m = (row.get("metrics") or {}).get(name)
    return m.get("score") if isinstance(m, Mapping) else None


def scenario_axes(
    rows: Sequence[Mapping[str, Any]], ingestion: float | None
) -> dict[str, float | None]:
    """The three axes of one scenario from its scored result rows and its ingestion score."""
    recall = _mean(_metric(r, "citation_recall") for r in rows if not r.get("abstention"))
    return {
        "ingestion": ingestion,
        "retrieval": None if recall is None else 100.0 * recall,
        "agent_use": _mean(_metric(r, "criteria_score") for r in rows),
    }


def tier2_pass_report(
    rows: Iterable[Mapping[str, Any]],
    goldens: Mapping[str, Mapping[str, Any]],
    ingestion: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Per scenario its axes and verdict; per use case (bucket), difficulty and source mix the
    mean axes and pass rate. `ingestion` is `tier2_ingestion`'s result (None: not taken)."""
    by_scenario: dict[str, list[Mapping[str, Any]]] = {}
    meta_of: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        g = goldens.get(r["question_id"])
        meta = g["additional_metadata"] if g is not None else {}
        if r.get("tier") != 2 or meta.get("tier") != 2:
            continue
        by_scenario.setdefault(meta["scenario_id"], []).append(r)
        meta_of[meta["scenario_id"]] = meta
    taken = (ingestion or {}).get("scenarios") or {}
    scenarios: dict[str, Any] = {}
    for sid, srows in sorted(by_scenario.items()):
        meta = meta_of[sid]
        axes = scenario_axes(srows, (taken.get(sid) or {}).get("score"))
        verdict = scenario_verdict(
            meta["use_case"],
            axes,
            pass_score=meta.get("pass_score"),
            dimensions=meta.get("dimensions") or (),
        )
        scenarios[sid] = {
            "use_case": meta["use_case"],
            "difficulty": meta["difficulty"],
            "source_mix": "+".join(sorted(meta["source_mix"])),
            **verdict,
        }

    def group(key: str) -> dict[str, Any]:
        cells: dict[str, list[Mapping[str, Any]]] = {}
        for v in scenarios.values():
            cells.setdefault(v[key], []).append(v)
        return {
            k: {
                **bucket_verdict(vs),
                **{f"{a}_mean": _mean(v["axes"][a] for v in vs) for a in AXES},
                "weighted_mean": _mean(v["weighted"] for v in vs),
            }
            for k, vs in sorted(cells.items())
        }

    return {
        "weights": {k: dict(zip(AXES, w, strict=True)) for k, w in AXIS_WEIGHTS.items()},
        "thresholds": dict(AXIS_THRESHOLDS),
        "default_pass_score": DEFAULT_PASS_SCORE,
        "bucket_pass_rate": BUCKET_PASS_RATE,
        "combo_dimension_min": COMBO_DIMENSION_MIN,
        "ingestion_reason": (ingestion or {}).get("reason", "not taken"),
        "scenarios": scenarios,
        "by_use_case": group("use_case"),
        "by_difficulty": group("difficulty"),
        "by_source_mix": group("source_mix"),
    }


def _cell(value: float | None) -> str:
    return "unscored" if value is None else f"{value:.1f}"


def pass_report_markdown(report: Mapping[str, Any]) -> str:
    """The per-bucket table, for Dagster metadata and the CLI."""
    out = [
        "### Tier 2 pass criteria",
        "",
        "| use case | scenarios | scored | passed | pass rate | bucket passes | ingestion | "
        "retrieval | agent use | weighted |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, v in report["by_use_case"].items():
        rate = "unscored" if v["pass_rate"] is None else f"{100 * v['pass_rate']:.0f}%"
        passes = {True: "yes", False: "no", None: "unscored"}[v["bucket_passed"]]
        means = " | ".join(_cell(v[f"{a}_mean"]) for a in (*AXES, "weighted"))
        out.append(
            f"| {key} | {v['scenarios']} | {v['scored']} | {v['passed']} | {rate} | {passes} | "
            f"{means} |"
        )
    return "\n".join(out)
