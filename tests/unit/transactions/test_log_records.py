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


def test_a_transactions_v2_state_is_written_as_the_flexible_value_v1() -> None:
    txn = TxnMetadata("tx-2", 42, 7, 60_000, TxnState.PREPARE_COMMIT, frozenset({TopicPartition("a", 0)}), 10, 20,
                      client_version=2, next_producer_id=99)
    value = encode_value(txn)
    assert value[:2] == b"\x00\x01"
    # Kafka's TransactionLogValue v1: tagged fields NextProducerId (tag 1) and ClientTransactionVersion (tag 2)
    assert value.endswith(b"\x02\x01\x08" + (99).to_bytes(8, "big") + b"\x02\x02\x00\x02")
    assert decode_value("tx-2", value) == txn
    v0 = TxnMetadata("tx-2", 42, 7, 60_000, TxnState.EMPTY)
    assert encode_value(v0)[:2] == b"\x00\x00" and decode_value("tx-2", encode_value(v0)) == v0
