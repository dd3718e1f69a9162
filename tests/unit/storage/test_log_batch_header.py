"""`Log.batch_header`: the header of the batch holding an offset, read alone (DescribeProducers' last timestamp)."""

from __future__ import annotations

import pytest
from storage_helpers import DIR, batch, open_log

from insync import errors
from insync.errors import KafkaException
from insync.storage.disk import MemoryDisk


def test_the_header_of_the_batch_holding_an_offset_in_any_segment() -> None:
    disk = MemoryDisk()
    log = open_log(disk)
    log.append_as_leader(batch(3, timestamps=[10, 30, 20]), leader_epoch=0)  # offsets 0-2
    log.roll()
    log.append_as_leader(batch(2, timestamps=[40, 50]), leader_epoch=0)  # offsets 3-4
    found = [(h.base_offset, h.max_timestamp) for h in map(log.batch_header, range(5)) if h is not None]
    assert found == [(0, 30)] * 3 + [(3, 50)] * 2
    assert log.batch_header(5) is None and log.batch_header(-1) is None
    log.delete_records_before(3)
    assert log.batch_header(2) is None
    disk.set_io_error(DIR, on_read=True, on_write=False)
    with pytest.raises(KafkaException) as failed:
        log.batch_header(4)
    assert failed.value.error is errors.KAFKA_STORAGE_ERROR
