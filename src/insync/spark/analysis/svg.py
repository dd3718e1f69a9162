"""Small inline SVG charts for the self-contained HTML report (no plotting dependency, no scripts).

Each function takes plain Python data (already aggregated by Spark) and returns one `<svg>` element as text.
Coordinates are computed here; colours come from one palette so the report reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

WIDTH = 900
PALETTE = {"shrink": "#d9534f", "expand": "#5cb85c", "under_replicated": "#f0ad4e", "under_min_isr": "#d9534f",
           "offline": "#333333", "bar": "#337ab7"}
BARS_MAX = 400  # buckets or rows drawn in one chart
Formatter = Callable[[float], str]


def _frame(height: int, body: list[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">'
            f'<title>{escape(title)}</title>' + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, anchor: str = "start", size: int = 11) -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'font-family="sans-serif">{escape(text)}</text>')


def stacked_bars(title: str, labels: Sequence[str], series: dict[str, Sequence[int]], height: int = 220) -> str:
    """Vertical bars, one per label, each stacking the series (e.g. shrinks and expands per time bucket)."""
    n = min(len(labels), BARS_MAX)
    assert all(len(values) >= n for values in series.values())
    left, bottom, top = 50, 30, 20
    plot_w, plot_h = WIDTH - left - 10, height - bottom - top
    totals = [sum(values[i] for values in series.values()) for i in range(n)]
    peak = max(totals, default=0) or 1
    step = plot_w / max(n, 1)
    body = [_text(5, top + 4, str(peak)), _text(5, top + plot_h, "0"),
            f'<line x1="{left}" y1="{top + plot_h}" x2="{WIDTH - 10}" y2="{top + plot_h}" stroke="#999"/>']
    for i in range(n):
        y = float(top + plot_h)
        for name, values in series.items():
            h = plot_h * values[i] / peak
            if h > 0:
                y -= h
                body.append(f'<rect x="{left + i * step:.1f}" y="{y:.1f}" width="{max(step - 1, 1):.1f}" '
                            f'height="{h:.1f}" fill="{PALETTE.get(name, PALETTE["bar"])}">'
                            f'<title>{escape(labels[i])}: {escape(name)} {values[i]}</title></rect>')
    for i in sorted({0, n // 2, n - 1}) if n else []:
        anchor = "start" if i == 0 else "end" if i == n - 1 else "middle"
        body.append(_text(left + (i + 1) * step if anchor == "end" else left + i * step, height - 8, labels[i],
                          anchor, 10))
    legend_x = left + 10
    for name in series:
        body.append(f'<rect x="{legend_x}" y="4" width="10" height="10" fill="{PALETTE.get(name, PALETTE["bar"])}"/>')
        body.append(_text(legend_x + 14, 13, name))
        legend_x += 120
    return _frame(height, body, title)


def gantt(title: str, rows: Sequence[tuple[str, str, float, float]], start: float, end: float,
          label_of: Formatter) -> str:
    """One lane per label; bars (label, kind, start, end) on a shared time axis from `start` to `end`."""
    lanes = list(dict.fromkeys(label for label, _, _, _ in rows))[:BARS_MAX]
    lane_h, left, top = 16, 160, 24
    height = top + lane_h * len(lanes) + 30
    span = (end - start) or 1.0
    plot_w = WIDTH - left - 10

    def x(t: float) -> float:
        return left + plot_w * (min(max(t, start), end) - start) / span

    body = [_text(left, 14, label_of(start)), _text(WIDTH - 10, 14, label_of(end), "end")]
    for i, lane in enumerate(lanes):
        body.append(_text(4, top + i * lane_h + 12, lane, size=10))
    index = {lane: i for i, lane in enumerate(lanes)}
    for label, kind, s, e in rows:
        if label not in index:
            continue
        y = top + index[label] * lane_h + (2 if kind == "under_replicated" else 6)
        h = lane_h - (4 if kind == "under_replicated" else 12)
        body.append(f'<rect x="{x(s):.1f}" y="{y}" width="{max(x(e) - x(s), 1.5):.1f}" height="{h}" '
                    f'fill="{PALETTE.get(kind, PALETTE["bar"])}"><title>{escape(label)} {escape(kind)}: '
                    f'{escape(label_of(s))} to {escape(label_of(e))}</title></rect>')
    legend_x = left
    for kind in ("under_replicated", "under_min_isr", "offline"):
        body.append(f'<rect x="{legend_x}" y="{height - 16}" width="10" height="10" fill="{PALETTE[kind]}"/>')
        body.append(_text(legend_x + 14, height - 7, kind))
        legend_x += 150
    return _frame(height, body, title)


def horizontal_bars(title: str, rows: Sequence[tuple[str, dict[str, int]]]) -> str:
    """One row per label with one bar per named count (e.g. per broker: removed, leader of removals)."""
    rows = rows[:BARS_MAX]
    names = list(dict.fromkeys(name for _, counts in rows for name in counts))
    bar_h, left, top = 12, 90, 24
    group_h = bar_h * max(len(names), 1) + 8
    height = top + group_h * len(rows) + 10
    peak = max((v for _, counts in rows for v in counts.values()), default=0) or 1
    colours = ["#337ab7", "#d9534f", "#f0ad4e", "#5cb85c", "#777777"]
    body = []
    for j, name in enumerate(names):
        body.append(f'<rect x="{left + j * 200}" y="4" width="10" height="10" fill="{colours[j % len(colours)]}"/>')
        body.append(_text(left + j * 200 + 14, 13, name))
    for i, (label, counts) in enumerate(rows):
        y0 = top + i * group_h
        body.append(_text(4, y0 + group_h / 2, label))
        for j, name in enumerate(names):
            value = counts.get(name, 0)
            w = (WIDTH - left - 60) * value / peak
            y = y0 + j * bar_h
            body.append(f'<rect x="{left}" y="{y}" width="{max(w, 0.5):.1f}" height="{bar_h - 2}" '
                        f'fill="{colours[j % len(colours)]}"/>')
            body.append(_text(left + w + 4, y + bar_h - 3, str(value), size=10))
    return _frame(height, body, title)
