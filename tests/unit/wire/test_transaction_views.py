import datetime

from apis_helpers import arrive, client_request, wire

from insync import errors
from insync.transactions.log_records import TxnMetadata, TxnState
from insync.types import TopicPartition
from insync.wire import transaction_views as views
from insync.wire import transactions

OPEN = TxnMetadata("tx", 1000, 2, 60_000, TxnState.ONGOING,
                   frozenset({TopicPartition("a", 1), TopicPartition("a", 0), TopicPartition("b", 0)}), 1_700, 1_800)


def test_list_transactions_reads_every_filter_and_answers_kafkas_state_names() -> None:
    request = client_request(66, 2, state_filters=("Ongoing", "Nope"), producer_id_filters=(1000,),
                             duration_filter=5, transactional_id_pattern="t.*")
    assert views.decode_list(request) == views.ListFilters(("Ongoing", "Nope"), frozenset({1000}), 5, "t.*")
    old = views.decode_list(client_request(66, 0, state_filters=(), producer_id_filters=()))
    assert (old.duration_ms, old.pattern) == (views.NO_DURATION_FILTER, "")
    answer = wire(views.encode_list(request, errors.NONE, ["Nope"], [OPEN]))
    assert answer.unknown_state_filters == ("Nope",)
    (state,) = answer.transaction_states
    assert (state.transactional_id, state.producer_id, state.transaction_state) == ("tx", 1000, "Ongoing")


def test_describe_transactions_answers_each_id_in_order() -> None:
    request = client_request(65, 0, transactional_ids=("tx", "gone"))
    assert views.decode_describe(request) == ["tx", "gone"]
    answer = wire(views.encode_describe(request, [
        ("tx", errors.NONE, OPEN), ("gone", errors.BY_NAME["TRANSACTIONAL_ID_NOT_FOUND"], None)]))
    found, missing = answer.transaction_states
    assert (found.transaction_state, found.producer_id, found.producer_epoch) == ("Ongoing", 1000, 2)
    assert found.transaction_timeout == datetime.timedelta(seconds=60)
    assert found.transaction_start_time == datetime.datetime.fromtimestamp(1.7, datetime.UTC)
    assert [(t.topic, t.partitions) for t in found.topics] == [("a", (0, 1)), ("b", (0,))]
    assert (int(missing.error_code), missing.transactional_id, missing.topics) == (105, "gone", ())


def test_the_batched_add_partitions_to_txn_a_leader_verifies_with() -> None:
    asked = transactions.TxnPartitions("tx", 1000, 2, True, (TopicPartition("a", 0), TopicPartition("a", 1)))
    request = arrive(transactions.verify_request(asked))
    assert transactions.decode_batched(request) == [asked]
    fenced = errors.BY_NAME["PRODUCER_FENCED"]
    answer = wire(transactions.encode_batched(request, [("tx", {TopicPartition("a", 0): errors.NONE,
                                                                TopicPartition("a", 1): fenced})]))
    assert transactions.verify_response_errors(answer) == {TopicPartition("a", 0): errors.NONE,
                                                           TopicPartition("a", 1): fenced}
