"""An exactly-once consume-transform-produce processor, as Kafka Streams runs one, at the level of the log.

The topic's partition 0 is the input (written by transactional producers that also abort), 1 the output, 2 the
offsets partition. A `SimCtpProcessor` reads the input with read_committed from its position and, for each chunk,
runs one transaction that writes the transformed records (key: the input offset) to the output and its new
position as a record in the offsets partition. That record is Kafka's TxnOffsetCommit: there the group's offset
goes to `__consumer_offsets` and the transaction's markers commit it with the output; at the log level it is one
more partition of the same transaction. On start, and after an abort or being fenced, an instance resumes from
the last position it reads back read_committed from the offsets partition, once no transaction is pending there
(KIP-447's stable offsets). `SimCtp` starts a new instance of the same transactional.id from time to time, as a
rebalance or a restart would: its InitProducerId fences the old one, a zombie that runs on until its next request
to the coordinator or a leader is refused, and then stops for good. The transactions are recorded in the
`TxnHistory` of `txn_checker`; `ctp_checker` checks the output against the input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from insync import errors
from insync.broker.messages import READ_COMMITTED, ConsumerFetchRequest, ConsumerFetchResponse
from insync.protocol.control_records import AbortedTxn
from insync.protocol.records import Record, build_batch, decode_records, iter_batches
from insync.sim.network import Network
from insync.sim.scheduler import Scheduler
from insync.sim.txn_checker import committed_positions
from insync.sim.txn_workload import SimTxnProducer, TxnAttempt, TxnHistory, TxnSpec
from insync.types import BrokerId, Offset, TopicPartition

INPUT, OUTPUT, OFFSETS = 0, 1, 2  # the partitions of the scenario's topic
PARTITIONS = 3
TRANSACTIONAL_ID = "ctp"
FETCH_BYTES = 1 << 16
INSTANCES_MAX = 10_000
POSITION_KEY = b"position"


def transform(value: bytes) -> bytes:
    """The processor's transformation of an input record's value."""
    return b"t:" + value


@dataclass(frozen=True, slots=True)
class CtpSpec:
    abort_probability: float = 0.2  # of the processor's own transactions
    records_max: int = 10  # input records in one transaction
    takeover_gap_s: tuple[float, float] = (2.0, 6.0)  # between the start of one instance and the next
    poll_ms: int = 100  # a fetch's max wait when the input has nothing new

    def __post_init__(self) -> None:
        assert 0.0 <= self.abort_probability <= 1.0 and self.records_max >= 1 and self.poll_ms >= 0, self
        assert 0 < self.takeover_gap_s[0] <= self.takeover_gap_s[1], self


class SimCtpProcessor(SimTxnProducer):
    """One instance of the processor; see the module docstring."""

    def __init__(self, name: str, topic: str, spec: tuple[TxnSpec, CtpSpec], bootstrap: list[BrokerId],
                 scheduler: Scheduler, network: Network, history: TxnHistory, newest: Callable[[], bool]) -> None:
        txn_spec, self.ctp = spec
        super().__init__(name, topic, PARTITIONS, replace(txn_spec, abort_probability=self.ctp.abort_probability),
                         bootstrap, scheduler, network, history, TRANSACTIONAL_ID)
        self._input, self._output, self._offsets = (TopicPartition(topic, p) for p in (INPUT, OUTPUT, OFFSETS))
        self._newest = newest
        self._position = -1  # the next input offset to read; -1 until read back from the offsets partition
        self._next_position = -1  # the position the open transaction commits
        self.zombie_fenced = False

    @property
    def position(self) -> int:
        return self._position

    # Resuming from the committed position ---------------------------------------------------------------------

    def _started(self) -> None:
        self._position = -1
        self._read_position(0, 0)

    def _read_position(self, offset: int, position: int) -> None:
        """Read the offsets partition from `offset` to its end; `position` is the last one read so far."""
        producer = self._producer_id, self._producer_epoch

        def answer(part: object | None) -> None:
            if (self._producer_id, self._producer_epoch) != producer:
                return  # fenced or aborted meanwhile: the new epoch reads again
            if not isinstance(part, ConsumerFetchResponse) or part.partitions[0].error is not errors.NONE:
                self._refresh_metadata(lambda: self._read_position(0, 0))
                return
            (fetched,) = part.partitions
            if fetched.records:
                values = [r.value for r in self._records(fetched.records, fetched.aborted_transactions or ())]
                last = int(values[-1] or b"0") if values else position
                self._read_position(_next_offset(fetched.records), last)
            elif fetched.last_stable_offset < fetched.high_watermark:  # a transaction pending there: wait for it
                self._later(lambda: self._read_position(0, 0))
            else:
                self._position = position
                self._begin()

        self._fetch(self._offsets, offset, 0, answer)

    # One chunk ------------------------------------------------------------------------------------------------

    def _begin(self) -> None:
        if self._stopped or self._position < 0 or self._attempt is not None:
            return
        producer, position = (self._producer_id, self._producer_epoch), self._position

        def answer(part: object | None) -> None:
            if (self._producer_id, self._producer_epoch) != producer or self._position != position or \
                    self._attempt is not None:
                return
            if not isinstance(part, ConsumerFetchResponse) or part.partitions[0].error is not errors.NONE:
                self._refresh_metadata(self._begin)
                return
            (fetched,) = part.partitions
            if not fetched.records:
                self._later(self._begin)
                return
            # A fetch answers whole batches: as Kafka's consumer, skip the records before the position.
            records = [record for record in self._records(fetched.records, fetched.aborted_transactions or ())
                       if record.offset >= position][:self.ctp.records_max]
            if len(records) == self.ctp.records_max:
                next_position = records[-1].offset + 1
            else:
                next_position = _next_offset(fetched.records)  # past aborted batches and markers too
            if records:
                self._next_position = next_position
                self._process([(r.offset, r.value or b"") for r in records])
            else:
                self._position = next_position
                self._begin()

        self._fetch(self._input, position, self.ctp.poll_ms, answer)

    def _process(self, records: list[tuple[int, bytes]]) -> None:
        pid, epoch, now, committed = self._producer_id, self._producer_epoch, self._scheduler.now_ms, self._next_position

        def build(tp: TopicPartition, sequence: int) -> tuple[bytes, int]:
            specs = [(POSITION_KEY, b"%d" % committed)] if tp == self._offsets else [
                (b"%d" % offset, transform(value)) for offset, value in records]
            return build_batch(specs, base_timestamp=now, producer_id=pid, producer_epoch=epoch,
                               base_sequence=sequence, is_transactional=True), len(specs)

        self._transact((self._output, self._offsets), build)

    def _ended(self, attempt: TxnAttempt, commit: bool) -> None:
        if attempt is self._attempt:
            self._position = self._next_position if commit else -1  # after an abort: read back at the new epoch
        super()._ended(attempt, commit)

    def _fenced(self) -> None:
        if self._newest():
            super()._fenced()
            return
        self.zombie_fenced = True  # a newer instance runs: this one was a zombie, and ends here
        self.stop()
        self._abandon()

    # Reading --------------------------------------------------------------------------------------------------

    def _fetch(self, tp: TopicPartition, offset: int, max_wait_ms: int, answer: Callable[[object | None], None]) -> None:
        leader = self._leaders.get(tp)
        if leader is None:
            self._refresh_metadata(lambda: self._fetch(tp, offset, max_wait_ms, answer))
            return
        request = ConsumerFetchRequest(self._next_correlation(), ((tp, Offset(offset)),), max_wait_ms, FETCH_BYTES,
                                       isolation_level=READ_COMMITTED)
        self._request(leader, request, lambda reply: self._fetched(tp, reply, answer))

    def _fetched(self, tp: TopicPartition, reply: object | None, answer: Callable[[object | None], None]) -> None:
        if not isinstance(reply, ConsumerFetchResponse) or reply.partitions[0].error is not errors.NONE:
            self._leaders.pop(tp, None)  # found again before the next try
        answer(reply)

    @staticmethod
    def _records(records: bytes, aborted: tuple[AbortedTxn, ...]) -> list[Record]:
        """The records a read_committed consumer hands its application from one fetch answer."""
        return [record for position, _ in committed_positions(records, aborted)
                for record in decode_records(records, position)]


def _next_offset(records: bytes) -> int:
    return max(header.last_offset for _, header in iter_batches(records, verify_crc=False)) + 1


class SimCtp:
    """The processor's instances: the first at once, then a new one after each takeover gap until `stop`."""

    def __init__(self, topic: str, spec: tuple[TxnSpec, CtpSpec], bootstrap: list[BrokerId], scheduler: Scheduler,
                 network: Network, history: TxnHistory) -> None:
        self._topic, self._spec, self._bootstrap, self._network, self._history = topic, spec, bootstrap, network, history
        self._scheduler, self._gap_s = scheduler, spec[1].takeover_gap_s
        self._stopped = False
        self.instances: list[SimCtpProcessor] = []
        self._take_over()

    def stop(self) -> None:
        """Start no more instances; the newest runs on."""
        self._stopped = True

    def figures(self) -> dict[str, int]:
        """For the run's result: instances started, zombies fenced, and the newest one's position."""
        return {"ctp.instances": len(self.instances),
                "ctp.zombies_fenced": sum(1 for instance in self.instances if instance.zombie_fenced),
                "ctp.position": self.instances[-1].position}

    def _take_over(self) -> None:
        if self._stopped or len(self.instances) >= INSTANCES_MAX:
            return
        name = f"ctp-{len(self.instances)}"
        self.instances.append(SimCtpProcessor(name, self._topic, self._spec, self._bootstrap, self._scheduler,
                                              self._network, self._history, lambda: self.instances[-1].name == name))
        self._scheduler.after(round(self._scheduler.rng.uniform(*self._gap_s) * 1000), self._take_over)
