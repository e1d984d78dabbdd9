"""`eval-pipeline runs`: the past runs of a runs directory, and a leaderboard of comparable ones.

One `RunEntry` per directory of the runs directory (the `comparisons/` and `noise_floors/`
kept beside the bundles are not runs): its label, start time, whether it measured every
question, the digest of its comparability pins and its configuration key (the noise floor's
file name, `runs.calibrate.floor_key`), per tier the headline numbers of its summary, and how
many other listed runs `compare` would accept beside it. A directory that is not a readable
bundle is an entry too, `readable: false` with the reason in one line.

Comparable means what `compare` checks (`compare.check_comparable`): equal comparability pins,
equal retrieval budgets, no failed protocol check that refuses; so the count and
`--comparable-with` agree with what `compare` would say.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from eval_pipeline.runs.calibrate import NOISE_FLOORS_DIR, floor_key
from eval_pipeline.runs.compare import ComparisonRefused, check_comparable
from eval_pipeline.runs.load import BundleError, RunBundle, load_run
from eval_pipeline.runs.pins import COMPARABILITY_PINS, CONFIGURATION_PINS, pin_values
from eval_pipeline.runs.protocol import budget_of
from eval_pipeline.score.protocol import refusals as protocol_refusals

NOT_RUNS = {"comparisons", NOISE_FLOORS_DIR}  # written beside the bundles, never a run
KEY_DIGITS = 16
SortKey = Literal["time", "coverage", "recall", "tokens", "name"]
SORT_KEYS: tuple[str, ...] = ("time", "coverage", "recall", "tokens", "name")
_NAME = re.compile(r"^(?P<stamp>\d{8}T\d{6}Z)(?:-(?P<label>.+?))?-(?P<suffix>[0-9a-f]{6})$")


class TierHeadline(BaseModel):
    """A tier's numbers as `run` prints them. None: not measured (never 0)."""

    tier: str
    questions: int | None
    covered: int | None
    not_covered: int | None
    unscored: int | None
    coverage: float | None  # over the answerable questions scored; None when none was
    recall_any_at_5: float | None  # turn level; tier 1 the upstream variant, else all
    median_payload_tokens: float | None  # over covered questions


class RunEntry(BaseModel):
    name: str
    path: str
    readable: bool
    error: str | None = None  # why not readable: one line
    label: str | None = None
    started_at: str | None = None
    status: Literal["complete", "incomplete"] | None = None  # None: not recorded
    unscored_infrastructure: int | None = None
    comparability_key: str | None = None  # digest of the comparability pins and budgets
    configuration_key: str | None = None  # floor_key: <runs_dir>/noise_floors/<key>.json
    configuration: dict[str, Any] = {}  # reconciler, retriever, top_k, graph backend
    refused_by_protocol: list[str] = []  # protocol checks that keep it out of any comparison
    comparable_runs: int | None = None  # other listed runs compare would accept beside it
    tiers: list[TierHeadline] = []

    def tier(self, tier: str) -> TierHeadline | None:
        return next((t for t in self.tiers if t.tier == tier), None)


class RunsListing(BaseModel):
    """`eval-pipeline runs --json`: one document."""

    command: Literal["runs"] = "runs"
    output_version: int = 1
    runs_dir: str
    comparable_with: str | None = None  # the reference run's path, when asked
    sort: str
    tier: str
    runs: list[RunEntry]


def _label(run: RunBundle | None, name: str) -> str | None:
    options = (run.manifest.get("options") or {}) if run is not None else {}
    label = (options.get("scoring") or {}).get("label") if isinstance(options, dict) else None
    if label:
        return str(label)
    m = _NAME.match(name)
    return m.group("label") if m else None


def _mean(summary_tier: dict[str, Any], tier: str) -> float | None:
    variant = "upstream" if tier == "1" else "all"
    try:
        value = summary_tier["retrieval"]["turn"][variant]["recall_any@5"]["mean"]
    except (KeyError, TypeError):
        return None
    return value if isinstance(value, int | float) else None


def headlines(run: RunBundle) -> list[TierHeadline]:
    out = []
    for tier, s in (run.summary.get("tiers") or {}).items():
        s = s if isinstance(s, dict) else {}
        counts = s.get("counts") or {}
        coverage = s.get("coverage") or {}
        out.append(
            TierHeadline(
                tier=str(tier),
                questions=counts.get("questions"),
                covered=counts.get("covered"),
                not_covered=counts.get("not_covered"),
                unscored=counts.get("unscored"),
                coverage=coverage.get("rate") if isinstance(coverage, dict) else None,
                recall_any_at_5=_mean(s, str(tier)),
                median_payload_tokens=(s.get("efficiency") or {}).get(
                    "median_payload_tokens_covered"
                ),
            )
        )
    return out


def comparability_key(run: RunBundle) -> str:
    """Short sha256 of the comparability pins and the budgets compare checks: two runs with
    one key are comparable (a context cap only one has is no difference, see
    `runs.protocol`, so compare may accept runs of two keys; the count is exact)."""
    canonical = json.dumps(
        {"pins": pin_values(run, COMPARABILITY_PINS), "budget": budget_of(run)},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:KEY_DIGITS]


def configuration_of(run: RunBundle) -> dict[str, Any]:
    values = pin_values(run, CONFIGURATION_PINS)
    reconciler, retriever = values.get("reconciler"), values.get("retriever")
    return {
        "reconciler": reconciler.get("name") if isinstance(reconciler, dict) else reconciler,
        "retriever": retriever.get("retriever") if isinstance(retriever, dict) else retriever,
        "top_k": values.get("top_k"),
        "graph_backend": values.get("graph.backend"),
    }


def entry_of(run: RunBundle) -> RunEntry:
    status = run.summary.get("status") or run.manifest.get("status")
    info = run.summary.get("incomplete") or {}
    refusals = [f"protocol.{name}" for name, _ in protocol_refusals(run.manifest.get("protocol"))]
    return RunEntry(
        name=run.name,
        path=str(run.path),
        readable=True,
        label=_label(run, run.name),
        started_at=run.manifest.get("started_at"),
        status=status if status in ("complete", "incomplete") else None,
        unscored_infrastructure=int(info.get("questions") or 0) if status else None,
        comparability_key=comparability_key(run),
        configuration_key=floor_key(run),
        configuration=configuration_of(run),
        refused_by_protocol=refusals,
        tiers=headlines(run),
    )


def comparable(a: RunBundle, b: RunBundle) -> bool:
    """What `compare` would accept (without loading a noise floor)."""
    try:
        check_comparable(a, b)
    except ComparisonRefused:
        return False
    return True


def scan(runs_dir: Path) -> list[tuple[RunEntry, RunBundle | None]]:
    """Every directory of `runs_dir` (name order: time order), read or said unreadable."""
    if not runs_dir.is_dir():
        return []
    out: list[tuple[RunEntry, RunBundle | None]] = []
    for path in sorted(p for p in runs_dir.iterdir() if p.is_dir() and p.name not in NOT_RUNS):
        if path.name.startswith("."):
            continue  # a bundle being staged, or a tool's own directory
        try:
            run = load_run(path)
        except (BundleError, OSError, UnicodeDecodeError) as exc:  # bad files or permissions
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
            bad = RunEntry(name=path.name, path=str(path), readable=False, error=reason)
            out.append((bad, None))
            continue
        out.append((entry_of(run), run))
    return out


def list_entries(
    runs_dir: Path,
    *,
    comparable_with: RunBundle | None = None,
    sort: str = "time",
    tier: str = "1",
) -> list[RunEntry]:
    """The entries of `runs_dir`, each with its count of comparable runs; with
    `comparable_with`, only the runs compare would accept beside it (itself included when it
    is in `runs_dir`); sorted by `sort` over `tier`'s numbers, unreadable ones last."""
    scanned = scan(runs_dir)
    bundles = [(e, r) for e, r in scanned if r is not None]
    for entry, run in bundles:
        entry.comparable_runs = sum(
            1 for _, other in bundles if other is not run and comparable(run, other)
        )
    if comparable_with is not None:
        ref = comparable_with.path.resolve()
        scanned = [
            (e, r)
            for e, r in scanned
            if r is not None and (r.path.resolve() == ref or comparable(comparable_with, r))
        ]
    return sort_entries([e for e, _ in scanned], sort, tier)


def _number(entry: RunEntry, tier: str, field: str) -> float | None:
    t = entry.tier(tier)
    value = getattr(t, field) if t is not None else None
    return value if isinstance(value, int | float) else None


def sort_entries(entries: Sequence[RunEntry], sort: str, tier: str) -> list[RunEntry]:
    """time: newest first; name: name order; coverage and recall: highest first; tokens:
    fewest first. A run without the number (not measured) comes after those with one, an
    unreadable directory last; ties go to the newer run."""
    if sort not in SORT_KEYS:
        raise ValueError(f"--sort: unknown key {sort!r}; valid: {', '.join(SORT_KEYS)}")
    readable = [e for e in entries if e.readable]
    unreadable = [e for e in entries if not e.readable]
    newest = sorted(readable, key=lambda e: (e.started_at or "", e.name), reverse=True)
    if sort == "name":
        ordered = sorted(readable, key=lambda e: e.name)
    elif sort == "time":
        ordered = newest
    else:
        field, sign = {
            "coverage": ("coverage", -1),
            "recall": ("recall_any_at_5", -1),
            "tokens": ("median_payload_tokens", 1),
        }[sort]

        def key(e: RunEntry) -> tuple[int, float]:
            value = _number(e, tier, field)
            return (1, 0.0) if value is None else (0, sign * value)

        ordered = sorted(newest, key=key)  # stable: ties stay newest first
    return ordered + sorted(unreadable, key=lambda e: e.name)


# --- output ---------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def table_lines(entries: Sequence[RunEntry], tier: str) -> list[str]:
    """The terminal table: one line per run (the sort tier's numbers), one per unreadable
    directory."""
    rows = [["run", "status", f"t{tier} coverage", "recall@5", "tokens", "configuration",
             "comparability", "comparable"]]  # fmt: skip
    for e in entries:
        if not e.readable:
            continue
        t = e.tier(tier)
        cfg = e.configuration
        coverage = "—"
        if t is not None:  # covered of the answerable questions scored, as the rate is
            scored = (t.covered or 0) + (t.not_covered or 0)
            coverage = f"{_pct(t.coverage)} ({t.covered}/{scored})"
        status = e.status or "?"
        if e.status == "incomplete":
            status = f"INCOMPLETE ({e.unscored_infrastructure} unscored)"
        tokens = t.median_payload_tokens if t is not None else None
        rows.append(
            [
                e.name,
                status,
                coverage,
                _pct(t.recall_any_at_5 if t else None),
                "—" if tokens is None else f"{tokens:g}",
                f"{cfg.get('reconciler')}/{cfg.get('retriever')} k={cfg.get('top_k')}",
                str(e.comparability_key),
                "refused (protocol)" if e.refused_by_protocol else str(e.comparable_runs),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    out += [f"{e.name}  unreadable: {e.error}" for e in entries if not e.readable]
    return out


def _tiers(entries: Sequence[RunEntry]) -> list[str]:
    seen = {t.tier for e in entries for t in e.tiers}
    return sorted(seen, key=lambda t: (0, int(t)) if t.isdigit() else (1, t))  # type: ignore[return-value]


TIER_COLUMNS = (
    "questions",
    "covered",
    "not_covered",
    "unscored",
    "coverage",
    "recall_any_at_5",
    "median_payload_tokens",
)
CSV_COLUMNS = (
    "name",
    "path",
    "readable",
    "error",
    "label",
    "started_at",
    "status",
    "unscored_infrastructure",
    "comparability_key",
    "configuration_key",
    "reconciler",
    "retriever",
    "top_k",
    "graph_backend",
    "refused_by_protocol",
    "comparable_runs",
)


def to_csv(entries: Sequence[RunEntry]) -> str:
    """One row per entry; per tier T the columns `tierT_<field>`. An empty cell is a value
    not measured (or not readable), never 0."""
    tiers = _tiers(entries)
    header = [*CSV_COLUMNS, *(f"tier{t}_{c}" for t in tiers for c in TIER_COLUMNS)]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for e in entries:
        flat = {**e.model_dump(exclude={"configuration", "tiers"}), **e.configuration}
        flat["refused_by_protocol"] = ";".join(e.refused_by_protocol)
        cells = ["" if flat.get(c) is None else str(flat.get(c)) for c in CSV_COLUMNS]
        for t in tiers:
            headline = e.tier(t)
            for c in TIER_COLUMNS:
                value = getattr(headline, c) if headline is not None else None
                cells.append("" if value is None else str(value))
        writer.writerow(cells)
    return buf.getvalue()
