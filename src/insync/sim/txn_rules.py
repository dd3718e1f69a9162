"""The all-or-nothing rules of a transaction, shared by the simulator's checker (sim/txn_checker.py, over
partitions) and the real-process campaign's (chaos/txn_checker.py, over record values).

A transaction wrote `written` (partitions, or record values); `present` is the part of it found in the log and
`visible` the part a read_committed read returned. `must` is the outcome its producer's history settles
("committed", "aborted") or None when either is possible (a commit whose answer never came). Jepsen's names:
- `aborted-read`: a transaction that must have aborted is visible, in any part;
- `lost-write`: a committed transaction is not wholly in the log;
- `torn-transaction`: visible in part only, or committed and not wholly visible.
"""

from __future__ import annotations

from collections.abc import Set
from typing import TypeVar

ABORTED_READ, LOST_WRITE, TORN = "aborted-read", "lost-write", "torn-transaction"
MUST = ("committed", "aborted", None)
K = TypeVar("K")


def txn_violations(must: str | None, written: Set[K], present: Set[K], visible: Set[K]) -> tuple[str, ...]:
    """The rules above that the transaction breaks, in the order listed."""
    assert must in MUST, must
    assert visible <= written and present <= written, "only the transaction's own parts are judged"
    found = []
    if must == "aborted" and visible:
        found.append(ABORTED_READ)
    if must == "committed" and present != written:
        found.append(LOST_WRITE)
    elif visible and visible != written or must == "committed" and visible != written:
        found.append(TORN)
    return tuple(found)
