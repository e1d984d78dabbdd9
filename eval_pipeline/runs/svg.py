"""Inline SVG charts for the HTML reports: no JavaScript, no external files, no libraries.

Each function returns one `<svg>` element as text. Labels are escaped here; a value that was
not scored is drawn as the word "unscored" (or the bar's own note saying why), never as an
empty (zero) bar. A chart with nothing to draw at all is the caller's to replace by a line of
text (`has_rates`, `has_values`): these functions always draw what they are given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

LABEL_W = 210
BAR_W = 360
ROW_H = 22
FONT = 'font-family="system-ui, sans-serif" font-size="12"'
COLORS = {"covered": "#2e7d32", "not covered": "#c62828", "unscored": "#9e9e9e"}
CLASS_COLORS = {"real": "#c62828", "not real": "#9e9e9e", "cannot tell": "#f9a825"}


@dataclass(frozen=True)
class RateBar:
    label: str
    rate: float | None  # 0..1; None: unscored
    low: float | None = None
    high: float | None = None
    n: int = 0
    note: str | None = None  # drawn instead of a bar when rate is None: why it is missing


def has_rates(bars: Sequence[RateBar]) -> bool:
    return any(b.rate is not None for b in bars)


def has_values(items: Sequence[tuple[str, float | None]]) -> bool:
    return any(v is not None for _, v in items)


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    return (
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" {FONT}><title>{escape(title)}</title>'
        + "".join(body)
        + "</svg>"
    )


def rate_bars(title: str, bars: Sequence[RateBar], missing: str = "unscored") -> str:
    """Horizontal bars 0–100% with a whisker for the confidence interval."""
    top = 24
    height = top + ROW_H * max(len(bars), 1) + 24
    width = LABEL_W + BAR_W + 110
    body = [f'<text x="0" y="14" font-weight="bold">{escape(title)}</text>']
    for tick in (0, 25, 50, 75, 100):
        x = LABEL_W + BAR_W * tick / 100
        body.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 20}" stroke="#ddd"/>'
            f'<text x="{x:.1f}" y="{height - 6}" text-anchor="middle" fill="#666">{tick}%</text>'
        )
    for i, bar in enumerate(bars):
        y = top + i * ROW_H
        mid = y + ROW_H / 2
        body.append(
            f'<text x="{LABEL_W - 6}" y="{mid + 4:.1f}" text-anchor="end">'
            f"{escape(bar.label)}</text>"
        )
        if bar.rate is None:
            body.append(
                f'<text x="{LABEL_W + 4}" y="{mid + 4:.1f}" fill="{COLORS["unscored"]}" '
                f'font-style="italic">{escape(bar.note or missing)}</text>'
            )
            continue
        w = BAR_W * bar.rate
        body.append(
            f'<rect x="{LABEL_W}" y="{y + 4}" width="{w:.1f}" height="{ROW_H - 8}" fill="#5c8fd6"/>'
        )
        if bar.low is not None and bar.high is not None and bar.high > bar.low:
            x1, x2 = LABEL_W + BAR_W * bar.low, LABEL_W + BAR_W * bar.high
            body.append(
                f'<line x1="{x1:.1f}" y1="{mid:.1f}" x2="{x2:.1f}" y2="{mid:.1f}" '
                f'stroke="#222" stroke-width="1.5"/>'
                f'<line x1="{x1:.1f}" y1="{mid - 5:.1f}" x2="{x1:.1f}" y2="{mid + 5:.1f}" '
                f'stroke="#222"/>'
                f'<line x1="{x2:.1f}" y1="{mid - 5:.1f}" x2="{x2:.1f}" y2="{mid + 5:.1f}" '
                f'stroke="#222"/>'
            )
        body.append(
            f'<text x="{LABEL_W + BAR_W + 8}" y="{mid + 4:.1f}">'
            f"{100 * bar.rate:.1f}% (n={bar.n})</text>"
        )
    return _svg(width, height, title, body)


def _bins(values: Sequence[int], count: int) -> list[tuple[float, float]]:
    lo, hi = min(values), max(values)
    if hi == lo:
        return [(lo, lo + 1)]
    step = max(1, math.ceil((hi - lo + 1) / count))
    return [(lo + i * step, lo + (i + 1) * step) for i in range(math.ceil((hi - lo + 1) / step))]


def histogram(title: str, series: dict[str, Sequence[int]], bins: int = 12) -> str:
    """Stacked histogram of integer values (payload tokens), one colour per series."""
    every = [v for values in series.values() for v in values]
    width, height, left, bottom, top = 560, 230, 40, 40, 44
    body = [f'<text x="0" y="14" font-weight="bold">{escape(title)}</text>']
    if not every:
        body.append('<text x="0" y="40" fill="#666">no values</text>')
        return _svg(width, 60, title, body)
    edges = _bins(every, bins)
    counts = [[0] * len(edges) for _ in series]
    for s, values in enumerate(series.values()):
        for v in values:
            i = next((k for k, (a, b) in enumerate(edges) if a <= v < b), len(edges) - 1)
            counts[s][i] += 1
    peak = max(sum(c[i] for c in counts) for i in range(len(edges))) or 1
    plot_w, plot_h = width - left - 10, height - top - bottom
    bar_w = plot_w / len(edges)
    for i, (a, _) in enumerate(edges):
        x = left + i * bar_w
        base = top + plot_h
        for s, name in enumerate(series):
            h = plot_h * counts[s][i] / peak
            if h:
                base -= h
                body.append(
                    f'<rect x="{x + 1:.1f}" y="{base:.1f}" width="{bar_w - 2:.1f}" '
                    f'height="{h:.1f}" fill="{COLORS.get(name, "#5c8fd6")}">'
                    f"<title>{escape(name)}: {counts[s][i]}</title></rect>"
                )
        if i % max(1, len(edges) // 6) == 0:
            body.append(f'<text x="{x:.1f}" y="{top + plot_h + 14}" fill="#666">{a:g}</text>')
    body.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        f'stroke="#444"/><text x="{left - 6}" y="{top + 4}" text-anchor="end" '
        f'fill="#666">{peak}</text>'
        f'<text x="{left}" y="{height - 8}" fill="#666">payload tokens (bin start)</text>'
    )
    for s, name in enumerate(series):
        x = s * 140
        body.append(
            f'<rect x="{x}" y="22" width="10" height="10" fill="{COLORS.get(name, "#5c8fd6")}"/>'
            f'<text x="{x + 14}" y="31">{escape(name)} ({len(series[name])})</text>'
        )
    return _svg(width, height, title, body)


def value_bars(title: str, items: Sequence[tuple[str, float | None]], unit: str) -> str:
    """Horizontal bars for non-negative values (stage seconds); None drawn as 'not recorded'."""
    top = 24
    height = top + ROW_H * max(len(items), 1) + 8
    width = LABEL_W + BAR_W + 110
    peak = max((v for _, v in items if v), default=0) or 1
    body = [f'<text x="0" y="14" font-weight="bold">{escape(title)}</text>']
    for i, (label, value) in enumerate(items):
        y = top + i * ROW_H
        mid = y + ROW_H / 2
        body.append(
            f'<text x="{LABEL_W - 6}" y="{mid + 4:.1f}" text-anchor="end">{escape(label)}</text>'
        )
        if value is None:
            body.append(
                f'<text x="{LABEL_W + 4}" y="{mid + 4:.1f}" fill="#666" font-style="italic">'
                "not recorded</text>"
            )
            continue
        w = BAR_W * value / peak
        body.append(
            f'<rect x="{LABEL_W}" y="{y + 4}" width="{w:.1f}" height="{ROW_H - 8}" '
            f'fill="#7e57c2"/><text x="{LABEL_W + w + 6:.1f}" y="{mid + 4:.1f}">'
            f"{value:g} {escape(unit)}</text>"
        )
    return _svg(width, height, title, body)


@dataclass(frozen=True)
class DeltaBar:
    label: str
    delta_pp: float | None
    floor_pp: float | None
    classification: str


def delta_bars(title: str, bars: Sequence[DeltaBar]) -> str:
    """Diverging bars around 0 pp with the noise floor as a grey band (±floor)."""
    top = 24
    height = top + ROW_H * max(len(bars), 1) + 24
    width = LABEL_W + BAR_W + 130
    span = max([10.0, *(abs(b.delta_pp) for b in bars if b.delta_pp is not None)])
    span = max(span, *(b.floor_pp for b in bars if b.floor_pp is not None), 0.0)
    zero = LABEL_W + BAR_W / 2

    def x_of(pp: float) -> float:
        return zero + (BAR_W / 2) * pp / span

    body = [f'<text x="0" y="14" font-weight="bold">{escape(title)}</text>']
    body.append(
        f'<line x1="{zero}" y1="{top - 4}" x2="{zero}" y2="{height - 20}" stroke="#444"/>'
        f'<text x="{LABEL_W}" y="{height - 6}" fill="#666">−{span:.0f} pp</text>'
        f'<text x="{zero}" y="{height - 6}" text-anchor="middle" fill="#666">0</text>'
        f'<text x="{LABEL_W + BAR_W}" y="{height - 6}" text-anchor="end" fill="#666">'
        f"+{span:.0f} pp</text>"
    )
    for i, bar in enumerate(bars):
        y = top + i * ROW_H
        mid = y + ROW_H / 2
        label = escape(bar.label)
        body.append(f'<text x="{LABEL_W - 6}" y="{mid + 4:.1f}" text-anchor="end">{label}</text>')
        if bar.floor_pp is not None and bar.floor_pp > 0:
            x1, x2 = x_of(-bar.floor_pp), x_of(bar.floor_pp)
            body.append(
                f'<rect x="{x1:.1f}" y="{y + 1}" width="{x2 - x1:.1f}" height="{ROW_H - 2}" '
                f'fill="#e0e0e0"><title>noise floor ±{bar.floor_pp:.1f} pp</title></rect>'
            )
        if bar.delta_pp is None:
            body.append(
                f'<text x="{zero + 4}" y="{mid + 4:.1f}" fill="#666" font-style="italic">'
                "unscored</text>"
            )
            continue
        x1, x2 = sorted((zero, x_of(bar.delta_pp)))
        color = CLASS_COLORS.get(bar.classification, "#5c8fd6")
        if bar.classification == "real" and bar.delta_pp > 0:
            color = "#2e7d32"
        body.append(
            f'<rect x="{x1:.1f}" y="{y + 5}" width="{max(x2 - x1, 1):.1f}" '
            f'height="{ROW_H - 10}" fill="{color}"/>'
            f'<text x="{LABEL_W + BAR_W + 8}" y="{mid + 4:.1f}">{bar.delta_pp:+.1f} pp, '
            f"{escape(bar.classification)}</text>"
        )
    return _svg(width, height, title, body)
