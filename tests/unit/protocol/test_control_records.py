"""Transaction markers as control batches, read back."""

from insync.protocol.control_records import ABORT, COMMIT, marker_batch, marker_info, marker_type
from insync.protocol.records import parse_header


def test_markers_are_control_batches_read_back_as_commit_or_abort() -> None:
    commit, abort = marker_batch(7, 2, 5, True, 1), marker_batch(7, 2, 5, False, 1)
    header = parse_header(commit)
    assert header.is_control and header.is_transactional and header.producer_epoch == 2
    assert header.base_sequence == -1 and header.record_count == 1
    assert (marker_type(commit), marker_type(abort)) == (COMMIT, ABORT)
    assert (marker_info(commit), marker_info(abort)) == ((COMMIT, 5), (ABORT, 5))
