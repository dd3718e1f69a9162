from broker_harness import TP, Harness

from insync.broker.messages import ProduceRequest
from insync.protocol.records import build_batch


def test_an_open_transaction_bounds_the_cleaning_of_a_compacted_log() -> None:
    h = Harness(None)
    h.run(3_000)
    h.controller.create_topic(TP.topic, 1, 2, {"cleanup.policy": "compact"}, h.clock.now)
    h.run(1_000)
    core = h.leader()
    plain = build_batch([(b"k", b"v")] * 3)
    opened = build_batch([(b"k", b"open")], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
    for correlation, batch in ((1, plain), (2, opened), (3, plain)):
        h.queue.append(("client", core.broker_id, ProduceRequest(correlation, -1, 30_000, ((TP, batch),))))
        h.run(600)
    assert core.partitions[TP].high_watermark == 7
    assert core.partitions.stable_offsets_of_compacted(core.log_manager) == {TP: 3}  # the transaction's start
