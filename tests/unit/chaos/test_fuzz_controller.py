"""The controller's share of the fuzz: which indexes and workers it takes, cases that name no real broker in
a registration or heartbeat, and the fencing read from the controller's events."""

from __future__ import annotations

import json
from pathlib import Path

from insync.chaos import fuzz_controller
from insync.chaos.fuzz_cases import FOREIGN_BROKER_IDS, KIND_VALID, fuzz_case, names_a_broker
from insync.chaos.fuzz_controller import (
    CONTROLLER_EVERY,
    controller_target,
    fenced,
    goes_to_controller,
    workers,
)
from insync.protocol.codec import decode_request
from insync.wire.versions import BROKER_HEARTBEAT, BROKER_REGISTRATION, CONTROLLER_API_VERSIONS

BROKERS = (1, 2, 3)
CASES = 4000


def test_a_share_of_indexes_and_workers_goes_to_the_controller() -> None:
    indexes = [i for i in range(100) if goes_to_controller(i)]
    assert len(indexes) == 100 // CONTROLLER_EVERY and indexes == sorted(set(indexes))
    assert goes_to_controller(indexes[0]) and not goes_to_controller(indexes[0] + 1)  # by index alone
    assert workers(32) == (24, 8) and workers(1) == (1, 1)


def test_controller_cases_cover_its_table_and_keep_off_real_brokers() -> None:
    target = controller_target(("127.0.0.1", 1), BROKERS)
    assert set(target.table) == set(CONTROLLER_API_VERSIONS) and target.brokers == frozenset(BROKERS)
    cases = [fuzz_case(7, i, target.pairs, target.broker_ids) for i in range(CASES)]
    assert {c.api_key for c in cases} == set(CONTROLLER_API_VERSIONS)
    named = set()
    for case in cases:
        if case.kind == KIND_VALID and case.api_key in (BROKER_REGISTRATION, BROKER_HEARTBEAT):
            named.add(int(decode_request(case.frame[4:], CONTROLLER_API_VERSIONS).body.broker_id))
    assert named == set(FOREIGN_BROKER_IDS)
    skipped = [c.index for c in cases if names_a_broker(c.frame, target.table, target.brokers)]
    assert len(skipped) < CASES // 100, skipped  # the guard is a last resort, not the rule


def test_fencing_of_the_given_brokers_after_the_start_counts(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    line = {"v": 1, "ts_ms": 1, "broker": 0, "type": "broker_fenced", "broker_id": 2}
    before = json.dumps({**line, "broker_id": 1}) + "\n"
    events.write_text(before + json.dumps(line) + "\n" + json.dumps({**line, "broker_id": 900}) + "\n"
                      + json.dumps({**line, "type": "broker_unfenced"}) + "\n" + '{"v": 1, "ty')
    assert fenced({events: len(before)}, BROKERS) == {"2": 1}
    assert fenced({events: 0}, BROKERS) == {"1": 1, "2": 1}
    assert fuzz_controller.AFTER_TOPIC_PREFIX.startswith("fuzz-")
