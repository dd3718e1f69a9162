"""KIP-890's verification guards of one partition, sans-IO: Kafka's VerificationStateEntry.

A transactional batch that would open its producer's transaction on a partition is appended only once the
transaction coordinator says the partition is in that transaction. The answer takes a round trip, during which
the transaction may end: its marker appended here, a stale "yes" would then open a transaction nobody ends (the
ABA race Kafka's guard closes). So the leader `start`s a guard before asking; any transactional batch or marker of
that producer appended meanwhile clears it, and the batch is appended only if its guard `holds` then (or its
transaction is open by then: another request's batch opened it). A marker of
transactions v2 in the epoch being verified is the previous transaction's end, bumped to that epoch: it leaves
the guard, as the next transaction is the one verified. A guard keeps the lowest sequence verified in its epoch: a
batch above it, or (transactions v2) a first batch past sequence 0, is OUT_OF_ORDER_SEQUENCE_NUMBER, so a batch
that overtook an earlier one still being verified is retried after it (`refusal`, Kafka's `checkSequence`). One
guard per producer, at most `GUARDS_MAX`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

GUARDS_MAX = 10_000  # Kafka bounds them by its producer count; the oldest guard goes first past this


@dataclass(frozen=True, slots=True)
class _Guard:
    token: int
    producer_epoch: int
    bumps_epoch: bool  # transactions v2: the coordinator adds the partition, each EndTxn bumps the epoch
    lowest_sequence: int  # the lowest base sequence verified in `producer_epoch` (Kafka's VerificationStateEntry)


class VerificationGuards:
    def __init__(self) -> None:
        self._guards: dict[int, _Guard] = {}  # producer id -> its guard, in the order they started
        self._tokens = itertools.count(1)

    def __len__(self) -> int:
        return len(self._guards)

    def start(self, producer_id: int, producer_epoch: int, bumps_epoch: bool, base_sequence: int = 0) -> int:
        """The producer's guard, its token: the one being verified already (another request of the producer in
        flight, Kafka's `maybeCreateVerificationStateEntry`), at the newer of the two epochs and with the lowest
        sequence of that epoch (`maybeUpdateLowestSequenceAndEpoch`), or a new one."""
        assert producer_id >= 0 and producer_epoch >= 0, (producer_id, producer_epoch)
        guard = self._guards.get(producer_id)
        if guard is not None:
            if producer_epoch > guard.producer_epoch:
                lowest = base_sequence
            elif producer_epoch == guard.producer_epoch:
                lowest = min(guard.lowest_sequence, base_sequence)
            else:
                lowest = guard.lowest_sequence
            self._guards[producer_id] = _Guard(guard.token, max(guard.producer_epoch, producer_epoch),
                                               guard.bumps_epoch, lowest)
            return guard.token
        if len(self._guards) >= GUARDS_MAX:
            del self._guards[next(iter(self._guards))]
        token = next(self._tokens)
        self._guards[producer_id] = _Guard(token, producer_epoch, bumps_epoch, base_sequence)
        return token

    def refusal(self, producer_id: int, base_sequence: int, has_state: bool) -> str | None:
        """Why a transactional batch of the producer is out of order while its guard stands (None: it is not), in
        Kafka's words: transactions v2 with no state for the producer must start at 0, and no batch may start
        above the lowest sequence being verified."""
        guard = self._guards.get(producer_id)
        if guard is None:
            return None
        if guard.bumps_epoch and base_sequence != 0 and not has_state:
            return (f"Invalid sequence number for producer {producer_id}: {base_sequence} (incoming seq. number). "
                    "Expected sequence 0 for transactions v2 idempotent producer with no existing state.")
        if base_sequence > guard.lowest_sequence:
            return (f"Out of order sequence number for producer {producer_id}: {base_sequence} (incoming seq. "
                    f"number), {guard.lowest_sequence} (earliest seen sequence)")
        return None

    def holds(self, producer_id: int, token: int) -> bool:
        guard = self._guards.get(producer_id)
        return guard is not None and guard.token == token

    def on_batch(self, producer_id: int, producer_epoch: int, is_control: bool) -> None:
        """A transactional batch or marker of the producer appended: its guard is spent or void (Kafka's
        `updateProducers`), unless a marker of transactions v2 in the very epoch the guard verifies."""
        guard = self._guards.get(producer_id)
        if guard is None:
            return
        if is_control and guard.bumps_epoch and producer_epoch == guard.producer_epoch:
            return
        del self._guards[producer_id]
