"""Report pieces that need no Spark: time formatting, bucket widths and the inline SVG charts."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from insync.spark.analysis import report, svg

NS = "{http://www.w3.org/2000/svg}"


def test_times_are_printed_in_utc() -> None:
    assert report.utc(1_709_294_400_123) == "2024-03-01 12:00:00.123Z"
    assert report.utc(None) == "-"


def test_bucket_widths_are_round_and_few() -> None:
    assert report._bucket_ms(0, 30_000) == 1_000
    assert report._bucket_ms(0, 3_600_000) == 60_000
    assert report._bucket_ms(0, 40 * 86_400_000) == 86_400_000


def test_stacked_bars_draw_one_rect_per_nonzero_value_and_escape_labels() -> None:
    chart = svg.stacked_bars("churn <per minute>", ["a", "b", "c"], {"shrink": [1, 0, 2], "expand": [0, 3, 1]})
    root = ET.fromstring(chart)  # well-formed XML, so browsers render it inline
    bars = [r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    assert len(bars) == 4
    assert root.find(f"{NS}title").text == "churn <per minute>"  # type: ignore[union-attr]


def test_gantt_and_horizontal_bars_are_well_formed() -> None:
    gantt = svg.gantt("intervals", [("t-0", "under_replicated", 0, 50), ("t-0", "offline", 10, 20),
                                     ("t-1", "under_min_isr", 40, 100)], 0, 100, report.utc)
    assert len([r for r in ET.fromstring(gantt).iter(f"{NS}rect") if r.find(f"{NS}title") is not None]) == 3
    bars = svg.horizontal_bars("brokers", [("broker 1", {"removed": 2, "leader": 0})])
    assert "broker 1" in bars and ET.fromstring(bars) is not None
