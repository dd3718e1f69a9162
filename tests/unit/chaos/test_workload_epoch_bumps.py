"""An idempotent producer's librdkafka log in the workload: its epoch bumps become history ops the checker reads.
The lines are librdkafka's own (its log callback's arguments, as confluent-kafka passes them to `log`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from insync.chaos.history import CLIENT_LOGGER
from insync.chaos.ops import HistoryWriter, read_history
from insync.chaos.workload import EpochBumps

CAUSE = ("[thrd:127.0.0.1:25342/2]: 127.0.0.1:25342/2: ProduceRequest for chaos-14 [1] with 1 message(s) failed due "
         "to skipped sequence numbers (PID{Id:459831319937536,Epoch:0}, base seq 661 > next seq 658) caused by "
         "previous failed request (_RETRY, actions Retry, base seq 662..663, base msgid 663, 66ms ago): recovering "
         "and retrying")
BUMP = ("[thrd:127.0.0.1:25342/2]: All partitions drained, bumped epoch to PID{Id:459831319937536,Epoch:1}")


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def client_lines() -> Iterator[Lines]:
    logger, lines = logging.getLogger(CLIENT_LOGGER), Lines()
    level = logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    yield lines
    logger.removeHandler(lines)
    logger.setLevel(level)


def test_a_bump_becomes_an_epoch_bump_op_and_the_lines_that_say_why_reach_the_clients_log(
        tmp_path: Path, client_lines: Lines) -> None:
    history = HistoryWriter(tmp_path / "history.jsonl")
    log = EpochBumps("p0", history)
    log.log(logging.DEBUG, "%s [%s] %s", "PRODUCE", "rdkafka#producer-5", "Produce MessageSet with 1 message(s)")
    log.log(logging.DEBUG, "%s [%s] %s", "ERRSEQ", "rdkafka#producer-5", CAUSE)
    log.log(logging.DEBUG, "%s [%s] %s", "DRAIN", "rdkafka#producer-5", BUMP)
    log.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-5", "Connect to ipv4#127.0.0.1:1 failed")
    history.close()

    [op] = read_history(tmp_path / "history.jsonl")
    assert (op.process, op.type, op.f, op.label) == ("p0", "info", "epoch-bump", "PID{Id:459831319937536,Epoch:1}")
    shown = [(r.levelno, r.getMessage().split(" ")[0]) for r in client_lines.records]
    assert shown == [(logging.INFO, "ERRSEQ"), (logging.INFO, "DRAIN"), (logging.ERROR, "FAIL")]  # not the debug
