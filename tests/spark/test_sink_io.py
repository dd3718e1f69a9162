"""The sink's task writer shuts its producer whether the write succeeds or fails: a failed task's traceback keeps
the producer referenced in the reused Python worker, where librdkafka would otherwise go on reconnecting to a
cluster that is gone and log every attempt."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from insync.chaos.cluster import free_ports
from insync.spark.source import sink_io

pytestmark = pytest.mark.timeout(60)

COLUMNS = sink_io.SinkColumns(has_key=False, has_topic=False, has_partition=False, has_headers=False)


class _Kept(Producer):
    """A producer the test keeps hold of, to look at it after the write."""

    made: list[_Kept] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        super().__init__(conf)
        _Kept.made.append(self)


def test_a_failed_write_shuts_its_producer_and_names_what_was_not_acknowledged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    (closed,) = free_ports(1)  # nothing listens there
    monkeypatch.setattr(sink_io, "Producer", _Kept)
    _Kept.made.clear()
    batch = pa.record_batch({"value": pa.array([b"a", b"b", b"c"])})
    with pytest.raises(RuntimeError, match=r"0 of 3 records failed and 3 were not acknowledged within 0.5 s"):
        sink_io.write_batches(iter([batch]), {"bootstrap.servers": f"127.0.0.1:{closed}", "log_level": "0"},
                              "t", COLUMNS, 0.5)
    (producer,) = _Kept.made
    with pytest.raises(RuntimeError, match="Producer has been closed"):
        producer.produce("t", b"after")


def test_bad_rows_shut_the_producer_too(monkeypatch: pytest.MonkeyPatch) -> None:
    (closed,) = free_ports(1)
    monkeypatch.setattr(sink_io, "Producer", _Kept)
    _Kept.made.clear()
    columns = sink_io.SinkColumns(has_key=False, has_topic=True, has_partition=False, has_headers=False)
    batch = pa.record_batch({"value": pa.array([b"a"]), "topic": pa.array([None], pa.string())})
    with pytest.raises(ValueError, match="a row has a null topic and the sink has no topic option"):
        sink_io.write_batches(iter([batch]), {"bootstrap.servers": f"127.0.0.1:{closed}", "log_level": "0"},
                              None, columns, 0.5)
    (producer,) = _Kept.made
    with pytest.raises(RuntimeError, match="Producer has been closed"):
        producer.produce("t", b"after")
