import pytest

from insync.transactions.log_records import (
    TxnMetadata,
    TxnRecordError,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from insync.types import TopicPartition


def test_records_round_trip_in_kafkas_layout() -> None:
    txn = TxnMetadata("tx-1", 42, 3, 60_000, TxnState.ONGOING,
                      frozenset({TopicPartition("a", 1), TopicPartition("a", 0), TopicPartition("b", 2)}), 10, 20)
    key, value = encode_key("tx-1"), encode_value(txn)
    assert key == b"\x00\x00\x00\x04tx-1"
    assert value[:2] == b"\x00\x00" and value[2:10] == (42).to_bytes(8, "big")
    assert decode_value(decode_key(key), value) == txn
    assert TxnState.PREPARE_COMMIT.kafka_name == "PrepareCommit"


def test_garbage_is_refused() -> None:
    with pytest.raises(TxnRecordError):
        decode_value("tx", b"\x00\x00\x00")
    with pytest.raises(TxnRecordError):
        decode_key(b"\x00\x05\x00\x01x")
