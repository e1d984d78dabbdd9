"""A tier's scores with and without its suspect questions (dataset errata, docs/errata.md).

Rows carry `errata` (`{status, source, what}` or None). The tier's own coverage counts every
question; here it is recomputed over the answerable questions whose gold is not `suspect`
(a `note` or `corrected` question stays in: its gold is not in doubt), by the same bootstrap,
so the two figures differ only by the suspect questions.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from statistics import fmean
from typing import Any

from eval_pipeline.score.stats import bootstrap_ci


def _suspect(row: dict[str, Any]) -> bool:
    return (row.get("errata") or {}).get("status") == "suspect"


def errata_summary(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """`{flagged, by_status, suspect_ids, coverage_without_suspect,
    coverage_task_averaged_without_suspect}`; None when no row is flagged."""
    flagged = [r for r in rows if r.get("errata")]
    if not flagged:
        return None
    kept = [r for r in rows if not r["abstention"] and not _suspect(r)]
    coverage = bootstrap_ci([r["covered"] for r in kept])
    by_type: dict[str, list] = defaultdict(list)
    for r in kept:
        by_type[r["question_type"]].append(r["covered"])
    rates = [est.rate for v in by_type.values() if (est := bootstrap_ci(v)) is not None]
    return {
        "flagged": len(flagged),
        "by_status": dict(sorted(Counter(r["errata"]["status"] for r in flagged).items())),
        "suspect_ids": [r["question_id"] for r in rows if _suspect(r)],
        "coverage_without_suspect": None if coverage is None else coverage.as_dict(),
        "coverage_task_averaged_without_suspect": fmean(rates) if rates else None,
    }
