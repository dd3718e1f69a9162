"""A campaign run's report: `results.json` and `report.html` beside its `history.jsonl`; the campaign's table and
its `index.html`.

The HTML page is self-contained (inline SVG, no script): the verdict by producer label, a timeline with one
lane per fault above acknowledged sends per second and the slowest acknowledgement of each second, anomalies
marked on it, then the anomalies themselves (the first `ANOMALIES_SHOWN`, forbidden ones first) with the faults
active then.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from insync.chaos import checker
from insync.chaos.ops import Op

ANOMALIES_SHOWN = 200
BUCKET_MS = 1000.0
WIDTH, LEFT, LANE = 900, 190, 18
TABLE_KINDS = ("lost-write", "duplicate", "inconsistent-offsets", "nonmonotonic-send", "nonmonotonic-poll",
               "poll-skip", "unseen", "unacknowledged-but-present", "aborted-read", "torn-transaction")
# the terminal table's column heads (the HTML and JSON use the full names)
SHORT = {"lost-write": "lost", "duplicate": "duplicate", "inconsistent-offsets": "inconsistent",
         "nonmonotonic-send": "nm-send", "nonmonotonic-poll": "nm-poll", "poll-skip": "poll-skip", "unseen": "unseen",
         "unacknowledged-but-present": "unacked-read", "aborted-read": "aborted", "torn-transaction": "torn"}
COLUMN = max(map(len, SHORT.values()))
STYLE = ("<style>body{font-family:sans-serif;margin:20px}td,th{border:1px solid #ccc;padding:2px 6px}"
         "table{border-collapse:collapse}</style>")


def series(ops: Sequence[Op]) -> list[dict[str, float]]:
    """Per second of the run: sends acknowledged and the slowest acknowledgement (ms)."""
    buckets: dict[int, list[float]] = defaultdict(list)
    for send in checker.collect_sends(ops).values():
        if send.outcome == "ok" and send.done_ms is not None:
            buckets[int(send.done_ms // BUCKET_MS)].append(send.done_ms - send.invoke_ms)
    last = max(buckets, default=-1)
    return [{"second": s, "acked": len(buckets.get(s, [])), "latency_max_ms": round(max(buckets.get(s, [0.0])), 1)}
            for s in range(last + 1)]


def write(directory: str | Path, data: dict[str, Any]) -> None:
    (Path(directory) / "results.json").write_text(json.dumps(data, indent=1))
    (Path(directory) / "report.html").write_text(html(data))


def html(data: dict[str, Any]) -> str:
    verdict = ("OK" if data["ok"] else f"harness error: {data['error']}" if data["error"]
               else f"{data['forbidden']} forbidden anomalies")
    rows = "".join(f"<tr><td>{escape(label)}</td>" + "".join(f"<td>{kinds.get(k, 0)}</td>" for k in TABLE_KINDS)
                   + "</tr>" for label, kinds in data["anomalies_by_label"].items())
    examples = "".join(
        f"<tr><td>{escape(a['kind'])}{' (forbidden)' if a['forbidden'] else ''}</td><td>{a['partition']}</td><td>{escape(str(list(a['offsets'])))}</td>"
        f"<td>{escape(', '.join(a['values'][:4]))}</td><td>{escape(', '.join(a['labels']))}</td>"
        f"<td>{escape(a['detail'])}</td><td>{escape('; '.join(a['faults']) or '-')}</td></tr>"
        for a in data["examples"])
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>chaos run {data['run']}</title>"
            f"{STYLE}</head><body>"
            f"<h1>Run {data['run']} (seed {data['seed']}): {escape(verdict)}</h1>"
            f"<p>sends {escape(json.dumps(data['sends']))}, records read {data['reads']}, complete reads of "
            f"partitions {data['complete_partitions']}, {data['elapsed_s']} s</p>"
            "<h2>Anomalies by producer</h2><table><tr><th>label</th>"
            + "".join(f"<th>{k}</th>" for k in TABLE_KINDS) + f"</tr>{rows}</table>"
            f"<h2>Timeline</h2>{timeline(data)}"
            "<h2>Anomalies</h2><table><tr><th>kind</th><th>partition</th><th>offsets</th><th>values</th>"
            f"<th>producers</th><th>detail</th><th>faults active</th></tr>{examples}</table></body></html>")


def index(summary: dict[str, Any]) -> str:
    """The campaign's page: its totals, then one row per run linking to the run's report."""
    runs = "".join(
        f"<tr><td><a href='run-{r['run']}/report.html'>{r['run']}</a></td><td>{r['seed']}</td>"
        f"<td>{'ok' if r['ok'] else escape(r['error'] or 'FORBIDDEN')}</td><td>{r['elapsed_s']}</td>"
        + "".join(f"<td>{r['anomalies'].get(k, 0)}</td>" for k in TABLE_KINDS)
        + f"<td>{escape('; '.join(r['faults']))}</td></tr>" for r in summary["per_run"])
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>chaos campaign</title>{STYLE}</head><body>"
            f"<h1>Chaos campaign: {summary['ok_runs']} of {summary['runs']} runs ok</h1>"
            f"<p>{summary['faults']} faults ({summary.get('skipped', 0)} more skipped: not injectable on this "
            f"engine), {summary['acked']} acknowledged sends, {summary['forbidden']} forbidden "
            f"anomalies, {summary['elapsed_s']} s</p><table><tr><th>run</th><th>seed</th><th>verdict</th><th>s</th>"
            + "".join(f"<th>{k}</th>" for k in TABLE_KINDS) + f"<th>faults</th></tr>{runs}</table></body></html>")


def timeline(data: dict[str, Any]) -> str:
    """Fault lanes above acks per second (blue) and the slowest acknowledgement per second (orange); anomalies
    as vertical lines where their window begins, red if forbidden, grey if allowed (acks=1 losses...)."""
    points = data["series"]
    end_ms = float(max([len(points) * BUCKET_MS, data["duration_s"] * 1000.0, *(f["stop_ms"] for f in data["faults"])]))
    lanes = list(dict.fromkeys(f["fault"] for f in data["faults"]))
    chart_top = 20 + LANE * len(lanes)
    height = chart_top + 2 * 110 + 30

    def x(ms: float) -> float:
        return LEFT + (WIDTH - LEFT - 10) * ms / max(end_ms, 1.0)

    body = [_text(LEFT, 12, f"0 s ... {end_ms / 1000:.0f} s")]
    for i, fault in enumerate(data["faults"]):
        y = 20 + LANE * lanes.index(fault["fault"])
        body.append(f'<rect x="{x(fault["start_ms"]):.1f}" y="{y}" width="{max(x(fault["stop_ms"]) - x(fault["start_ms"]), 1):.1f}"'
                    f' height="{LANE - 4}" fill="#f0ad4e"><title>{escape(fault["fault"])}</title></rect>')
        if fault["fault"] not in [f["fault"] for f in data["faults"][:i]]:
            body.append(_text(4, y + 11, fault["fault"][:30]))
    for row, (key, colour, name) in enumerate((("acked", "#337ab7", "acked/s"),
                                               ("latency_max_ms", "#e67e22", "slowest ack ms"))):
        top = chart_top + row * 110
        peak = max((p[key] for p in points), default=0) or 1
        line = " ".join(f"{x(p['second'] * BUCKET_MS):.1f},{top + 100 - 95 * p[key] / peak:.1f}" for p in points)
        body += [_text(4, top + 12, f"{name} (max {peak:g})"), f'<polyline points="{line}" fill="none" '
                 f'stroke="{colour}"/>', f'<line x1="{LEFT}" y1="{top + 100}" x2="{WIDTH - 10}" y2="{top + 100}" '
                 'stroke="#999"/>']
    marks: dict[tuple[int, bool], set[str]] = defaultdict(set)  # one line per pixel and colour
    for anomaly in data["examples"]:
        if anomaly["kind"] not in checker.INFORMATION:
            marks[(round(x(anomaly["window_ms"][0])), anomaly["forbidden"])].add(anomaly["kind"])
    for (at, forbidden), kinds in sorted(marks.items()):
        body.append(f'<line x1="{at}" y1="20" x2="{at}" y2="{height - 20}" stroke="{"#d9534f" if forbidden else "#999"}"'
                    f'><title>{escape(", ".join(sorted(kinds)))}{" (forbidden)" if forbidden else ""}</title></line>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" role="img" '
            f'aria-label="faults, throughput and latency">{"".join(body)}</svg>')


def _text(x: float, y: float, text: str) -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="11">{escape(text)}</text>'


def table(runs: Sequence[tuple[int, int, checker.Check, str | None]]) -> list[str]:
    """One line per (run, seed, check, harness error) and the totals: the counts the checker found (`SHORT` names
    the columns: nm-send and nm-poll are nonmonotonic-send and -poll, unacked-read is unacknowledged-but-present)."""
    header = f"{'run':>4} {'seed':>8} {'faults':>6} {'acked':>7} " + " ".join(f"{SHORT[k]:>{COLUMN}}" for k in TABLE_KINDS)
    lines = [header + "  verdict"]
    totals: dict[str, int] = defaultdict(int)
    for run, seed, check, error in runs:
        for kind, count in check.counts.items():
            totals[kind] += count
        verdict = f"ERROR {error}" if error else "ok" if check.ok else f"{len(check.forbidden)} FORBIDDEN"
        lines.append(f"{run:>4} {seed:>8} {len(check.faults):>6} {check.sends.get('ok', 0):>7} "
                     + " ".join(f"{check.counts[k]:>{COLUMN}}" for k in TABLE_KINDS) + f"  {verdict}")
    failed = sum(1 for _, _, check, error in runs if error or not check.ok)
    lines.append(f"{'all':>4} {'':>8} {sum(len(c.faults) for _, _, c, _ in runs):>6} "
                 f"{sum(c.sends.get('ok', 0) for _, _, c, _ in runs):>7} "
                 + " ".join(f"{totals[k]:>{COLUMN}}" for k in TABLE_KINDS) + f"  {len(runs) - failed} ok, {failed} not")
    return lines
