"""Exactly-once consume-transform-produce in the simulator: a processor reads its input read_committed and commits
its output with its input position in one transaction, under leader, coordinator and broker faults and takeovers
by new instances of its transactional.id; the checker finds no duplicate and no loss over many seeds, and is shown
to find each kind of violation planted in a view."""

from __future__ import annotations

import pytest

from insync.sim.ctp_checker import CtpView, check_ctp
from insync.sim.ctp_workload import transform
from insync.sim.run import run_scenario
from insync.sim.scenario import load_scenario
from insync.sim.sweep import local_processes, sweep


def test_one_seed_processes_all_its_input_exactly_once_with_zombies_fenced() -> None:
    result = run_scenario(load_scenario("ctp", seed=3))
    assert result.ok, f"seed 3: {result.invariant_violations[:5]} {result.expectation_failures}"
    figures = result.transactions
    assert figures["ctp.position"] > 0 and figures["ctp.zombies_fenced"] >= 1, figures
    assert figures["committed"] > 0 and figures["aborted"] > 0, figures


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ctp_clean_over_eight_seeds() -> None:
    """CI's share of the sweep; `insync sim sweep ctp --seeds 1000` is the full one (docs/benchmarks.md)."""
    summary = sweep("ctp", {}, range(8), local_processes(2))
    assert not summary.failures, summary.table()


# The checker over planted views ------------------------------------------------------------------------------


def _view(output_offsets: list[int], positions: list[int], input_end: int = 9) -> CtpView:
    """Input records at 0-2 and 6-8 (3-5: an aborted transaction and its marker), output as given."""
    inputs = [(offset, b"v%d" % offset) for offset in (0, 1, 2, 6, 7, 8)]
    values = dict(inputs)
    return CtpView(inputs, input_end, [(offset, transform(values.get(offset, b"?"))) for offset in output_offsets],
                   positions)


def test_a_clean_view_has_no_violation() -> None:
    assert check_ctp(_view([0, 1, 2, 6, 7, 8], [3, 9])) == []


def test_an_input_record_processed_twice_is_a_duplicate() -> None:
    # A new instance that resumed from a stale position would commit records 1 and 2 again.
    violations = check_ctp(_view([0, 1, 2, 1, 2, 6, 7, 8], [3, 9]))
    assert "duplicate: input record 1 is in the output 2 times" in violations, violations
    assert any("covers 6 input records, but the output holds 8" in v for v in violations), violations


def test_an_input_record_below_the_position_missing_from_the_output_is_a_loss() -> None:
    # A position committed past records whose output was aborted (or never written) loses them.
    violations = check_ctp(_view([0, 1, 2, 8], [3, 9]))
    assert any(v.startswith("lost: input record 6,") for v in violations), violations
    assert any(v.startswith("lost: input record 7,") for v in violations), violations


def test_output_beyond_the_position_a_position_going_back_and_lagging_are_reported() -> None:
    violations = check_ctp(_view([0, 1, 2, 6], [3, 2]))
    assert "committed position went from 3 to 2" in violations, violations
    assert any(v.startswith("output record for input 6, which is no committed input") for v in violations), violations
    assert any(v.startswith("the processor did not catch up") for v in violations), violations


def test_output_out_of_order_or_not_transformed_is_reported() -> None:
    view = _view([0, 2, 1], [3], input_end=3)
    view.input = view.input[:3]
    view.output[0] = (0, b"v0")
    violations = check_ctp(view)
    assert any("out of input order" in v for v in violations), violations
    assert any("not the transform of" in v for v in violations), violations
