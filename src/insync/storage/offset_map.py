"""The log cleaner's offset map: a key's hash -> the last offset of that key in the section being cleaned.

Kafka's `SkimpyOffsetMap` in a bounded dict: keys are 16-byte BLAKE2b digests (two keys colliding lose the older's
records, a chance of about 2^-64 per pair, as Kafka accepts with its digests), and the map takes at most
`memory_bytes / ENTRY_BYTES * load_factor` entries, `ENTRY_BYTES` being what a CPython dict entry of a 16-byte
key and an int costs. A full map ends the section mapped so far; the cleaner then cleans up to `latest_offset` and
maps the rest in a later pass, as Kafka does.
"""

from __future__ import annotations

import hashlib

# A 16-byte bytes object (49 bytes), an int past the small-int cache (28-32), and the dict's slot and index, with
# the slack of a dict just grown: what tracemalloc sees at the peak of filling a map, rounded up.
ENTRY_BYTES = 176


def key_hash(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).digest()


class OffsetMap:
    def __init__(self, memory_bytes: int, load_factor: float) -> None:
        assert memory_bytes > 0 and 0 < load_factor <= 1, (memory_bytes, load_factor)
        self.slots = memory_bytes // ENTRY_BYTES
        self.max_entries = int(self.slots * load_factor)
        # Kafka's assertion: a map that cannot hold one key never makes progress.
        assert self.max_entries >= 1, "offset map too small for one key: raise log.cleaner.dedupe.buffer.size"
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1  # the last offset mapped (or skipped as keyless) so far

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def put(self, key: bytes, offset: int) -> None:
        assert not self.full, "put into a full offset map: the caller stops mapping first (Kafka's rule)"
        assert offset > self.latest_offset, (offset, self.latest_offset)
        self._offsets[key_hash(key)] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The last offset of `key`, or -1 when it was not mapped."""
        return self._offsets.get(key_hash(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = max(self.latest_offset, offset)

    def utilization(self) -> float:
        return len(self._offsets) / self.slots

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1
