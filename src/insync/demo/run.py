"""`insync demo`: the seeds' faults, live, on real processes, with a verdict at the end.

Two short-lived 3-broker clusters (RF 3, min ISR 2, an idempotent acks=all producer and a consumer throughout):
- KIP-501 off and ELR off (Kafka 3.x's election, so the symptoms show as Kafka users meet them): a follower
  pauses (the ISR shrinks with reason `stuck` and expands on resume: seed 003); the leader's reads of one
  partition turn slow (followers drop out though they fetch: seed 000), then the leader dies and the partition
  goes offline until it returns.
- KIP-501 on with insync's other defaults (ELR on): the same slow leader keeps its followers in the ISR, so when
  it dies a follower takes over at once; a partition's appends fail on one follower, which marks it failed and
  keeps replicating the others (seed 002); a leader is killed under load.
Each act is announced with one sentence of what to watch. The result is a table per act (ISR changes, URP and
offline partition-seconds, acknowledged writes) and each workload's verdict (lost, duplicated, reordered: all
must be 0), saved as `summary.json` in the demo directory with the event logs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Group

from insync import command_config
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster, history, script
from insync.chaos.script import Step
from insync.demo.monitor import DemoMonitor
from insync.demo.observe import ActSummary, ClusterObserver, render, summarise
from insync.security_config import STANDARD_AUTHORIZER
from insync.spark.monitor.rules import Thresholds

TOPIC = "demo"
MIN_ISR = 2
MONITOR_START_MAX_S = 120.0
MONITOR_DRAIN_MAX_S = 30.0
MONITOR_ALERT_MAX_S = 15.0
ISR_WHOLE_MAX_S = 60.0
KEPT_WAIT_DROPS = 4  # KIP-501 on: wait at most this many drop_s for the leader to keep a follower by its read


@dataclass(frozen=True, slots=True)
class Timing:
    lag_ms: int
    session_ms: int
    heartbeat_ms: int
    pause_s: float
    slow_read_ms: int  # KIP-501 on: under the lag, where its pending reads count
    stall_read_ms: int  # KIP-501 off: beyond the lag, so the followers stay out until the kill
    settle_s: float
    rate: int

    def overrides(self, kip501: bool) -> list[str]:
        return [f"replica.lag.time.max.ms={self.lag_ms}", f"broker.session.timeout.ms={self.session_ms}",
                f"broker.heartbeat.interval.ms={self.heartbeat_ms}", "replica.fetch.backoff.ms=200",
                "isr.change.propagation.check.interval.ms=250", "isr.change.propagation.blackout.ms=500",
                "fault.injection.enable=true", f"follower.fetch.pending.reads.insync.enable={str(kip501).lower()}",
                f"eligible.leader.replicas.enable={str(kip501).lower()}"]

    @property
    def drop_s(self) -> float:
        """Long enough for the isr-expiration task to remove a replica (up to 1.5 x the lag time) and tell."""
        return 1.5 * self.lag_ms / 1000 + 1.5

    @property
    def failover_s(self) -> float:
        return self.session_ms / 1000 + 2.0

    @property
    def thresholds(self) -> Thresholds:
        """The monitor's: an URP alerts once it outlasts the lag time."""
        return Thresholds(urp_ms=self.lag_ms, min_isr_ms=self.lag_ms // 2, offline_ms=self.lag_ms // 2,
                          risk_ms=self.lag_ms // 2)


# With KIP-501 the slow reads last 0.75 of the lag: its pending reads count only while younger than the lag, so they
# keep the followers in. Without it the reads outlast the lag (as seed 000's slow leader does): reads under the lag
# only make the followers flap (out at a check, back when a read completes), and whether the leader then dies while
# alone in its ISR is a matter of luck; reads beyond it keep them out until the kill.
NORMAL = Timing(lag_ms=4000, session_ms=8000, heartbeat_ms=1000, pause_s=9, slow_read_ms=3000, stall_read_ms=25000,
                settle_s=6, rate=200)
FAST = Timing(lag_ms=1500, session_ms=3000, heartbeat_ms=500, pause_s=3.5, slow_read_ms=1100, stall_read_ms=8000,
              settle_s=2.5, rate=100)


@dataclass(frozen=True, slots=True)
class Segment:
    name: str
    kip501: bool
    acts: tuple[str, ...]
    verdict: dict[str, Any]


class Demo:
    def __init__(self, directory: Path, timing: Timing, show: Callable[[Any], None], say: Callable[[str], None],
                 security: str = "plaintext", monitor: DemoMonitor | None = None) -> None:
        self.monitor = monitor  # `insync monitor` beside each cluster, when given (PLAINTEXT clusters only)
        assert monitor is None or security == "plaintext", "the monitor's source reads over PLAINTEXT only"
        self.directory = directory
        self.timing = timing
        self.security = security  # `cluster up --security`: the clients use each cluster's client.properties
        self.show = show
        self.say = say
        self.acts: list[ActSummary] = []
        self.segments: list[Segment] = []

    def run(self) -> dict[str, Any]:
        try:
            self._segment("kip501-off", False, [self._act_pause_follower, self._act_slow_leader])
            self._segment("kip501-on", True, [self._act_slow_leader, self._act_failing_partition,
                                              self._act_kill_leader])
        finally:
            if self.monitor is not None:
                self.monitor.close()
        monitor = {} if self.monitor is None else {"monitor_alerts": self.monitor.alerts,
                                                   "monitor_errors": self.monitor.errors}
        return {**monitor, "acts": [asdict(a) for a in self.acts], "segments": [asdict(s) for s in self.segments],
                "event_logs": sorted(str(p) for p in self.directory.glob("*/node-*/data/events.jsonl"))}

    # One cluster ------------------------------------------------------------------------------------------

    def _segment(self, name: str, kip501: bool, acts: list[Callable[[], str]]) -> None:
        self.say(f"Starting a 3-broker cluster with KIP-501 {'on' if kip501 else 'off'}"
                 f"{' (and ELR on, insync defaults)' if kip501 else ' and ELR off (Kafka 3.x election)'} ...")
        acls = [f"authorizer.class.name={STANDARD_AUTHORIZER}"] if self.security != "plaintext" else []
        self.spec = cluster.up(str(self.directory / name), 3, 0, [*self.timing.overrides(kip501), *acls],
                               security=self.security)
        names: list[str] = []
        try:
            command_config.use(self.spec.client_settings())
            ensure_topic(self.spec.bootstrap, TOPIC, 3, 3, {"min.insync.replicas": str(MIN_ISR)})
            self.observer = ClusterObserver(self.spec, TOPIC, MIN_ISR)
            self.workload = history.ProduceWorkload(self.spec.bootstrap, TOPIC, self.timing.rate, name)
            self.consumed = _CountingConsumer(self.spec.bootstrap, TOPIC)
            self.workload.start()
            self.consumed.start()
            if self.monitor is not None:
                self.say("Starting insync monitor (Spark Structured Streaming over __insync_events) ...")
                self.monitor.start(self.spec, self.timing.thresholds)
                self._until_monitoring()
            self._watch(self.timing.settle_s, "warming up")
            for act in acts:
                names.append(act())
            if self.monitor is not None:
                self.say("insync monitor reads the last events ...")
                self.monitor.drain(MONITOR_DRAIN_MAX_S)
            produced = self.workload.stop()
            self.consumed.stop()
            verdict = history.verdict(produced, history.read_back(self.spec.bootstrap, TOPIC, name))
            self.segments.append(Segment(name, kip501, tuple(names), {
                "sent": verdict.sent, "acked": verdict.acked, "lost": verdict.lost,
                "duplicated": verdict.duplicated, "reordered": verdict.reordered, "failed": verdict.failed}))
            self.observer.close()
        finally:
            command_config.use({})
            if self.monitor is not None:
                self.monitor.stop()
            cluster.down(cluster.ClusterSpec.load(self.spec.directory), 10.0)

    def _until_monitoring(self) -> None:
        """Hold the acts until the monitor has run its first micro-batch (a cold Spark takes tens of seconds to
        plan and start its Python workers), or MONITOR_START_MAX_S."""
        monitor = self.monitor
        assert monitor is not None
        self._until("waiting for insync monitor's first micro-batch", MONITOR_START_MAX_S,
                    lambda: monitor.view.batches > 0)

    def _watch(self, seconds: float, title: str) -> None:
        deadline = time.monotonic() + seconds
        while True:
            self.observer.poll()
            view = render(self.observer, title, self._counters())
            self.show(view if self.monitor is None else Group(view, self.monitor.view.render("insync monitor")))
            if time.monotonic() >= deadline:
                return
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def _counters(self) -> dict[str, int]:
        history_ = self.workload.history
        return {"sent": history_.sent, "acked": len(history_.acked), "failed": sum(history_.failed.values()),
                "consumed": self.consumed.count}

    def _act(self, name: str, broker: int, watch: str, body: Callable[[], None]) -> str:
        self.say(f"[{name}] {watch}")
        start_ms, acked_before = int(time.time() * 1000), len(self.workload.history.acked)
        failed_before = sum(self.workload.history.failed.values())
        body()
        self.observer.poll()
        end_ms = int(time.time() * 1000)
        self.acts.append(summarise(name, self.observer.events, start_ms, end_ms,
                                   len(self.workload.history.acked) - acked_before,
                                   sum(self.workload.history.failed.values()) - failed_before, broker))
        return name

    def _step(self, action: str, broker: int, **fields: Any) -> None:
        self.spec = script.apply(self.spec, Step(0, action, broker, **fields))

    def _roles(self, partition: int) -> tuple[int, list[int]]:
        row = next(r for r in describe_rows(self.spec.bootstrap, [TOPIC]) if r.partition == partition)
        return row.leader, [b for b in row.replicas if b != row.leader]

    # Acts -------------------------------------------------------------------------------------------------

    def _act_pause_follower(self) -> str:
        leader, followers = self._roles(0)
        victim = followers[0]

        def body() -> None:
            self._step("pause", victim)
            self._watch(self.timing.pause_s, f"broker {victim} paused (SIGSTOP): its ISR membership expires")
            self._step("resume", victim)
            self._watch(self.timing.settle_s, f"broker {victim} resumed: it catches up and rejoins")
            self._until_isrs_whole(f"broker {victim} resumed")

        return self._act("pause-follower", victim, f"Broker {victim} freezes like a long GC pause. Watch the ISRs drop it "
                         f"after {self.timing.lag_ms} ms (reason: stuck) and take it back once it has caught up.",
                         body)

    def _act_slow_leader(self) -> str:
        leader, _ = self._roles(0)
        kip501 = "on" if "kip501-on" in self.spec.directory else "off"
        read_ms = self.timing.slow_read_ms if kip501 == "on" else self.timing.stall_read_ms
        expect = ("the followers stay in the ISR (their reads are pending, and younger than the lag), so a follower "
                  "takes over at once" if kip501 == "on" else "the followers drop out though they keep fetching, "
                  f"produce to {TOPIC}-0 is refused (NOT_ENOUGH_REPLICAS), and when the leader dies, alone in its ISR, "
                  "the partition is offline (ELR off, as Kafka 3.x)")

        def body() -> None:
            self._step("slow-reads", leader, topic=TOPIC, partition=0, ms=read_ms)
            title = f"leader {leader} reads {TOPIC}-0 slowly (KIP-501 {kip501})"
            if kip501 == "off":
                self._until(title, 2 * self.timing.drop_s, lambda: self._alone_in_isr(leader))
                self._until_monitor_alerted(title, "leader_side", 0)
            else:
                self._until_kept_by_pending_read(leader, title)
            self._step("kill", leader)
            self._watch(self.timing.failover_s, f"leader {leader} killed (KIP-501 {kip501})")
            self._step("clear", leader)
            self._step("restart", leader)
            self._watch(self.timing.settle_s + 2, f"broker {leader} restarted")
            self._until_isrs_whole(f"broker {leader} restarted")

        return self._act(f"slow-leader-kip501-{kip501}", leader, f"Broker {leader}'s disk reads of {TOPIC}-0 now take "
                         f"{read_ms} ms, then it is killed. With KIP-501 {kip501}: {expect}.", body)

    def _until_monitor_alerted(self, title: str, kind: str, partition: int) -> None:
        """Hold the act until the monitor has raised `kind` about the partition, at most MONITOR_ALERT_MAX_S. The
        evidence comes from the brokers' own records in `__insync_events` (acks=1, sent from a queue): a leader
        killed the moment its shrink is committed takes that record with it, and the monitor never sees why."""
        monitor = self.monitor
        if monitor is not None:
            self._until(f"{title}: waiting for insync monitor's {kind} alert", MONITOR_ALERT_MAX_S,
                        lambda: monitor.alerted(kind, TOPIC, partition))

    def _until(self, title: str, timeout_s: float, done: Callable[[], bool]) -> None:
        """Watch until `done()` holds or `timeout_s` passed: the events polled every 50 ms (the state can be
        short-lived), the view redrawn every 0.5 s."""
        deadline = time.monotonic() + timeout_s
        shown = 0.0
        while time.monotonic() < deadline:
            if time.monotonic() - shown >= 0.5:
                self._watch(0, title)
                shown = time.monotonic()
            self.observer.poll_events()
            if done():
                return
            time.sleep(0.05)

    def _until_isrs_whole(self, title: str) -> None:
        """Hold until the restarted broker is back in every ISR, `__consumer_offsets`' too, at most ISR_WHOLE_MAX_S:
        the next act's fault then meets a whole cluster, as an operator's next roll would; a fixed wait does not on
        a loaded machine."""
        self._until(f"{title}: waiting for every ISR to be whole", ISR_WHOLE_MAX_S, self.observer.isrs_whole)

    def _alone_in_isr(self, leader: int) -> bool:
        """The leader's last ISR change of partition 0 left it alone, so the kill shows what Kafka 3.x does then
        (its followers leave one check apart, or together)."""
        changes = [e for e in self.observer.events if e.get("broker") == leader and e.get("partition") == 0
                   and e["type"] in ("isr_shrink", "isr_expand")]
        return bool(changes) and changes[-1]["isr_after"] == [leader]

    def _until_kept_by_pending_read(self, leader: int, title: str) -> None:
        """KIP-501 on: watch at least `drop_s` (long enough for a removal, which does not come), and until the
        leader has reported keeping a follower for its pending read (`isr_kept_pending_read`). The slow reads
        take 0.73 of the lag in the fast demo, so an isr-expiration check finds a follower past the lag only in
        part of each read: waiting for the event, not a time, makes the act show it on a loaded machine too."""
        since_ms = int(time.time() * 1000)
        started = time.monotonic()
        self._until(title, KEPT_WAIT_DROPS * self.timing.drop_s, lambda: any(
            e["type"] == "isr_kept_pending_read" and e["broker"] == leader and e.get("partition") == 0
            and e["ts_ms"] >= since_ms for e in self.observer.events))
        self._watch(max(0.0, self.timing.drop_s - (time.monotonic() - started)), title)

    def _act_failing_partition(self) -> str:
        _, followers = self._roles(1)
        victim = followers[0]

        def body() -> None:
            self._step("fail-partition", victim, topic=TOPIC, partition=1)
            self._watch(self.timing.drop_s, f"broker {victim}: appends to {TOPIC}-1 fail")
            self._step("clear", victim)
            self._step("kill", victim)
            self._step("restart", victim)
            self._watch(self.timing.settle_s + 2, f"broker {victim} restarted: {TOPIC}-1 recovers")
            self._until_isrs_whole(f"broker {victim} restarted")

        return self._act("failing-partition", victim, f"Broker {victim}'s appends to {TOPIC}-1 fail (a bad disk region). "
                         "It marks that one partition failed (FailedPartitionsCount 1) and keeps replicating the "
                         "others; after a restart it rejoins.", body)

    def _act_kill_leader(self) -> str:
        leader, _ = self._roles(2)

        def body() -> None:
            self._step("kill", leader)
            self._watch(self.timing.failover_s, f"leader {leader} killed")
            self._step("restart", leader)
            self._watch(self.timing.settle_s + 2, f"broker {leader} restarted")
            self._until_isrs_whole(f"broker {leader} restarted")

        return self._act("kill-leader", leader, f"Broker {leader}, leader of {TOPIC}-2, is killed under load: a follower "
                         "from the ISR takes over; nothing acknowledged is lost.", body)


class _CountingConsumer:
    """A consumer reading the topic throughout (committed data only), counting what it gets."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic, self.count = bootstrap, topic, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-consumer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(history.client_conf({"bootstrap.servers": self.bootstrap, "group.id": "insync-demo",
                                                 "enable.auto.commit": False}))
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(3)])
        try:
            while not self._stop.is_set():
                self.count += sum(1 for m in consumer.consume(1000, timeout=0.2) if m.error() is None)
        finally:
            consumer.close()


def save(directory: Path, result: dict[str, Any]) -> Path:
    path = directory / "summary.json"
    path.write_text(json.dumps(result, indent=2))
    return path
