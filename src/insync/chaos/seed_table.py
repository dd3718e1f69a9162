"""The sim-vs-real table of seed runs: one row of figures per run (removals with their reasons and waits in lags,
ISR changes, the time under-replicated, under min ISR and offline, refused produces, losses) and the claims'
verdict, as text or markdown.
"""

from __future__ import annotations

from insync.chaos.seed_model import SeedRun

REMOVALS_LISTED = 8  # the bursty count rule's flapping; isr-propagation's tens are summed up
COLUMNS = ("scenario", "side", "lag s", "removed (reason: waited / lag)", "shrinks", "expands", "URP s",
           "under min ISR s", "offline s", "NOT_ENOUGH_REPLICAS", "lost / acked", "claims")


def figures(name: str, run: SeedRun, failures: list[str]) -> dict[str, str]:
    """One row of the table: `run`'s figures, with the claims' verdict."""
    removed = _removed_text(run)
    values = (name, run.side, f"{run.lag_ms / 1000:g}", removed or "-", str(len(run.of("isr_shrink"))),
              str(len(run.of("isr_expand"))), f"{run.urp_s:.1f}", f"{run.under_min_isr_s:.1f}",
              f"{run.offline_s:.1f}", str(run.not_enough_replicas), f"{run.lost} / {run.acked}",
              "ok" if not failures else "FAILED: " + "; ".join(failures))
    return dict(zip(COLUMNS, values, strict=True))


def _removed_text(run: SeedRun) -> str:
    """Each removal's reason and wait in lags; beyond `REMOVALS_LISTED`, each reason's count and range."""
    pairs = [(r["reason"], w) for r, w in zip(run.removals(), run.waited_lags(), strict=False)]
    if len(pairs) <= REMOVALS_LISTED:
        return ", ".join(f"{reason}: {w:g}" for reason, w in pairs)
    reasons = sorted({reason for reason, _ in pairs})
    spans = {reason: [w for r, w in pairs if r == reason] for reason in reasons}
    return ", ".join(f"{reason} x{len(w)}: {min(w):g}" + (f"-{max(w):g}" if max(w) > min(w) else "")
                     for reason, w in spans.items())


def render(rows: list[dict[str, str]], markdown: bool = False) -> str:
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        return "\n".join([*lines, *("| " + " | ".join(row[c] for c in COLUMNS) + " |" for row in rows)])
    widths = {c: max(len(c), *(len(row[c]) for row in rows)) for c in COLUMNS}
    return "\n".join("  ".join(row[c].ljust(widths[c]) for c in COLUMNS).rstrip()
                     for row in [dict(zip(COLUMNS, COLUMNS, strict=True)), *rows])
