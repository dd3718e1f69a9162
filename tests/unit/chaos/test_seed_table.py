"""The sim-vs-real table of seed runs, in text and markdown."""

from __future__ import annotations

from seed_events import expand, seed_run, shrink

from insync.chaos import seed_table


def test_table_in_text_and_markdown() -> None:
    run = seed_run([shrink(11_300, 3, 10_000), expand(14_000, 3)])
    row = seed_table.figures("stuck-follower", run, [])
    assert row["removed (reason: waited / lag)"] == "stuck: 1.3" and row["claims"] == "ok"
    failed = seed_table.figures("stuck-follower", seed_run([]), ["one removal, reason stuck (seen: [])"])
    assert failed["claims"].startswith("FAILED: one removal")
    text = seed_table.render([row, failed])
    assert text.splitlines()[0].startswith("scenario") and len(text.splitlines()) == 3
    markdown = seed_table.render([row], markdown=True).splitlines()
    assert markdown[0].startswith("| scenario | side |") and markdown[1].startswith("|---|")
    assert markdown[2].startswith("| stuck-follower | real | 1 | stuck: 1.3 |")


def test_many_removals_are_summed_up_by_reason() -> None:
    many = [shrink(11_000 + 100 * i, 3, 10_000) for i in range(9)] + [shrink(12_500, 2, 10_000, "slow")]
    assert seed_table.figures("x", seed_run(many), [])["removed (reason: waited / lag)"] == "slow x1: 2.5, stuck x9: 1-1.8"
