"""`wait_until`: the predicate's first truthy answer, or WaitTimeout naming what was waited for, never later than
the timeout; and no other module polls with a hand-written deadline loop unless it is listed here with a reason."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from insync import waiting
from insync.waiting import WaitTimeout, wait_until

ROOT = Path(__file__).resolve().parents[2]


class FakeTime:
    """`time` as waiting.py uses it: monotonic() moves only when sleep() is called."""

    def __init__(self) -> None:
        self.now_s = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now_s += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(waiting, "time", fake)
    return fake


def next_answer(script: list[object]) -> object:
    """A predicate's script: each call takes the next value (an exception is raised), the last one repeats."""
    value = script.pop(0) if len(script) > 1 else script[0]
    if isinstance(value, Exception):
        raise value
    return value


def test_the_first_truthy_answer_is_returned(clock: FakeTime) -> None:
    script: list[object] = [None, 0, [], {"leader": 2}]
    assert wait_until(lambda: next_answer(script), 5, "a leader", interval_s=0.5) == {"leader": 2}
    assert clock.slept == [0.5, 0.5, 0.5]


def test_a_timeout_names_what_was_waited_for_and_the_last_answer(clock: FakeTime) -> None:
    with pytest.raises(WaitTimeout) as timed_out:
        wait_until(lambda: [], 2, "the ISR of t-0 full", interval_s=0.5)
    assert isinstance(timed_out.value, TimeoutError)
    assert str(timed_out.value) == "not within 2 s: the ISR of t-0 full; last seen []"
    assert (timed_out.value.what, timed_out.value.timeout_s, timed_out.value.last) == ("the ISR of t-0 full", 2, [])
    assert clock.slept == [0.5, 0.5, 0.5, 0.5]  # asked at 0, 0.5, 1, 1.5 and at the deadline: never later


def test_a_bare_false_is_not_repeated_in_the_message(clock: FakeTime) -> None:
    with pytest.raises(WaitTimeout, match=r"^not within 1 s: broker 2 registered$"):
        wait_until(lambda: False, 1, "broker 2 registered")


def test_the_last_step_is_cut_to_the_deadline(clock: FakeTime) -> None:
    with pytest.raises(WaitTimeout):
        wait_until(lambda: False, 1, "never", interval_s=0.375)
    assert clock.slept == [0.375, 0.375, 0.25]


def test_a_zero_timeout_asks_once(clock: FakeTime) -> None:
    calls = []
    with pytest.raises(WaitTimeout):
        wait_until(lambda: calls.append(1), 0, "anything")
    assert (calls, clock.slept) == ([1], [])


def test_errors_retried_count_as_not_yet_and_the_last_is_named(clock: FakeTime) -> None:
    script: list[object] = [ConnectionRefusedError("refused"), None, OSError("reset"), "up"]
    assert wait_until(lambda: next_answer(script), 5, "the port", retry_on=(OSError,)) == "up"
    with pytest.raises(WaitTimeout, match=r"^not within 1 s: the port; last error OSError\('reset'\)$") as timed_out:
        wait_until(lambda: next_answer([OSError("reset")]), 1, "the port", retry_on=(OSError,))
    assert isinstance(timed_out.value.error, OSError)


def test_other_errors_fail_at_once(clock: FakeTime) -> None:
    script: list[object] = [None, RuntimeError("node 1 exited before listening"), "never reached"]
    with pytest.raises(RuntimeError, match="node 1 exited"):
        wait_until(lambda: next_answer(script), 30, "node 1 listening", retry_on=(OSError,))
    assert clock.slept == [waiting.INTERVAL_S]


def test_a_callable_what_is_asked_at_the_timeout_only(clock: FakeTime) -> None:
    seen: list[int] = []

    def registered() -> bool:
        seen.append(len(seen))
        return False

    with pytest.raises(WaitTimeout, match=r"brokers registered \(seen 3 times\)"):
        wait_until(registered, 0.4, lambda: f"brokers registered (seen {len(seen)} times)")


def test_a_real_wait_ends_by_its_timeout() -> None:
    with pytest.raises(WaitTimeout, match="not within 0.05 s: nothing"):
        wait_until(lambda: None, 0.05, "nothing", interval_s=0.01)


# A polling loop with a deadline of its own; `idle_deadline` and the like too.
HAND_LOOP = re.compile(r"deadline\s*=\s*time\.monotonic\(\)\s*\+")
# The loops that keep their own deadline: path -> (how many, why). Each does more than poll a predicate, or is
# not a wait at all; anything else waits through `wait_until`.
KEPT: dict[str, tuple[int, str]] = {
    "src/insync/waiting.py": (1, "the helper itself"),
    "src/insync/bench/latency_workers.py": (1, "a consumer's run: each turn measures the records it reads, and "
                                               "the bound shrinks to a drain time once the producer stops"),
    "src/insync/chaos/history.py": (3, "read_back's idle timeout restarts with each record (2); _end_offset "
                                       "retries some error codes of one exception and re-raises the last one"),
    "src/insync/chaos/workload.py": (2, "the final read's idle timeout restarts with each record"),
    "src/insync/chaos/nfqueue.py": (2, "bind answers the kernel's datagrams as they come (select on the socket); "
                                       "serve is the daemon's lifetime, not a wait"),
    "src/insync/chaos/nfqueue_bench.py": (1, "the source of a sender another interpreter runs: a flood's length"),
    "src/insync/cli/console_cmd.py": (2, "the console consumer's idle timeout, restarted by each record"),
    "src/insync/cli/monitor_cmd.py": (1, "the monitor's run length (--duration), not a wait"),
    "src/insync/demo/run.py": (2, "the demo's view: redrawn for a time (_watch), or every 0.5 s while the events "
                                  "are polled every 50 ms until a state shows (_until), which then gives up quietly"),
    "src/insync/server/event_topic.py": (1, "an async close on the node's event loop, serving the producer's "
                                            "delivery reports as it waits: server/ never blocks its loop"),
    "src/insync/spark/monitor/alert_log.py": (1, "one bound over a recovery read that consumes each turn"),
    "src/insync/spark/source/bench.py": (1, "produce() retried on BufferError, serving delivery reports between "
                                            "tries to make room; the last BufferError raised"),
    "src/insync/spark/source/sink_io.py": (1, "produce() retried on BufferError, serving delivery reports "
                                              "between tries to make room; the last BufferError raised"),
    "src/insync/spark/source/driver_reader.py": (1, "one bound shared by several Event.wait calls, not a poll"),
    "tests/integration/test_acls.py": (2, "_consume returns the first answer's outcome, TIMEOUT included; listed "
                                          "runs the CLI each turn and returns its last output, '' included"),
    "tests/integration/test_alter_topics.py": (1, "a read: the test asserts on what was read"),
    "tests/integration/test_compaction_transactions.py": (1, "a read that goes on a second past the wanted count "
                                                             "so that extra records would show"),
    "tests/integration/test_connection_limits.py": (1, "a read: recv until a whole frame, or the close the test "
                                                       "expects"),
    "tests/integration/test_transactions.py": (2, "a read that goes on a second past the wanted count so that "
                                                  "extra records would show, and a consume-transform-produce loop "
                                                  "with a transaction per batch read"),
    "tests/integration/test_groups.py": (3, "reads from several consumers (drain, and its repetition across a "
                                            "coordinator's crash) and one gathering the errors a consumer reports: "
                                            "the test asserts on what was gathered"),
    "tests/integration/test_sasl_clients.py": (1, "a read: the test asserts on what was read"),
    "tests/integration/test_scram_clients.py": (1, "a read: the test asserts on what was read"),
    "tests/integration/test_tls.py": (1, "a read: the test asserts on what was read"),
    "tests/integration/test_zookeeper.py": (1, "a read: the test asserts on what was read"),
    "tests/kafka_ref/test_kafka_engine.py": (1, "a read: the test asserts on what was read"),
    "tests/kafka_ref/test_spark_kafka_connector.py": (1, "a read that asserts on each record as it comes"),
    "tests/kafka_ref/traffic_workloads.py": (2, "a recorded workload's consumers count the records each poll reads "
                                                "until all came or the deadline passed"),
    "tests/spark/test_fetch_client.py": (2, "fetch_ok returns the last answer, a retriable error included, for "
                                            "the caller to assert on; read_all asserts on each fetch"),
    "tests/unit/server/test_zk_store.py": (1, "not a loop: the give-up callable handed to the store's campaign"),
}


def test_no_hand_written_wait_loop_outside_the_helper_and_the_kept_ones() -> None:
    found = Counter({str(path.relative_to(ROOT)): len(HAND_LOOP.findall(path.read_text(encoding="utf-8")))
                     for top in ("src", "tests") for path in sorted((ROOT / top).rglob("*.py"))})
    found = +found  # files without one dropped
    assert found, "no loop found at all: the pattern or the paths are wrong"
    assert dict(found) == {path: count for path, (count, _) in KEPT.items()}, (
        "poll with insync.waiting.wait_until; a loop that must keep its own deadline goes into KEPT with its reason")
