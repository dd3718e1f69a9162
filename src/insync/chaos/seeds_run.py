"""Run a `RealSeed` on real processes, and its simulator scenario, into two comparable `SeedRun`s.

A real run: `cluster.up` in a fresh directory with the seed's configs, the topic, the chaos harness's idempotent
acks=all producer at the seed's rate (and the seed's second producer, if any); from the producer's first
acknowledged write, each step fires on time (or once the state it waits for holds, the rest of the plan moving by
as long) against the broker its target names then (the leader or a follower of its partition, from the events)
and is undone `for_s` later; with `watch_metadata`, a thread asks every broker for the topic's ISRs all along
(`metadata-watch.jsonl`); at the end every fault is undone (paused brokers resumed, killed, stopped or crashed ones
restarted, fault files cleared, the network healed), the run waits
(bounded) for every ISR to be full, stops the producer, reads the topic back, and reads every node's
events.jsonl. The cluster is always taken down.
"""

from __future__ import annotations

import heapq
import json
import signal
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from insync import admin_requests
from insync.admin import ensure_topic
from insync.chaos import (
    cluster,
    history,
    kafka_cluster,
    kafka_power,
    network,
    power,
    script,
    seeds_kafka,
    slow_disk,
)
from insync.chaos.script import Step
from insync.chaos.seed_model import RealSeed, SeedRun, SeedStep
from insync.chaos.seeds_kafka import Fired, PartitionState
from insync.controller.propagation import PropagationConfig
from insync.properties import parse_overrides
from insync.sim.result import SimResult
from insync.sim.run import run_scenario
from insync.sim.scenario import load_scenario
from insync.waiting import WaitTimeout, wait_until

NOT_ENOUGH_REPLICAS = ("NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND")
ADMIN_TIMEOUT_S = 5.0
# A leader answers DeleteRecords once its followers in the ISR have moved their log start too: with its reads
# slow (log-start-race), that takes a few of them.
DELETE_RECORDS_TIMEOUT_S = 30.0
POLL_S = 0.25
DOWN_DEADLINE_S = 0.0
EVENTS_FILE = "events.jsonl"
CHECK_INTERVAL, BLACKOUT = "isr.change.propagation.check.interval.ms", "isr.change.propagation.blackout.ms"
WATCH_S = 0.1  # how often the metadata watch asks each broker
WATCH_FILE = "metadata-watch.jsonl"  # in the cluster directory: what the watch saw, for a reader of a failed run
WATCH_TIMEOUT_S = 0.5  # a paused broker's answer is not waited for longer
# Each kind of fault held, and its undoing.
UNDO = {"paused": "resume", "faulted": "clear", "down": "restart", "isolated": "heal", "throttled": "heal",
        "slowed": "heal"}
KIND_OF = {"pause": "paused", "kill": "down", "stop": "down", "crash": "down", "isolate": "isolated",
           "throttle": "throttled", "latency": "slowed"}
NETWORK_KINDS = ("isolated", "throttled", "slowed")  # healing ends every network fault at once


def run_sim(seed: RealSeed) -> SeedRun:
    result = run_scenario(load_scenario(seed.sim, seed.sim_overrides, seed=seed.sim_seed), seed.sim_overrides)
    lag_ms = int(result.config.get("broker", {}).get("replica.lag.time.max.ms", 30_000))
    return sim_seed_run(result, lag_ms)


def sim_seed_run(result: SimResult, lag_ms: int) -> SeedRun:
    topic = result.config.get("topic", {}).get("name", "t")
    events = tuple(e for e in result.events if e.get("topic", topic) == topic)
    return SeedRun("sim", lag_ms, events, result.acked_records, result.lost_acked, result.duplicates,
                   sum(result.produce_errors.get(name, 0) for name in NOT_ENOUGH_REPLICAS),
                   result.urp_ms / 1000, result.under_min_isr_ms / 1000, result.offline_ms / 1000,
                   propagation_ms(result.config.get("broker", {})))


def propagation_ms(broker_config: Mapping[str, object]) -> tuple[int, int]:
    """The ISR propagation check interval and blackout a broker configuration sets (Kafka's hard-coded 2500 and
    5000 where it sets none)."""
    default = PropagationConfig()
    return (int(str(broker_config.get(CHECK_INTERVAL, default.check_interval_ms))),
            int(str(broker_config.get(BLACKOUT, default.blackout_ms))))


class _RealRun:
    """The state of one real run: the cluster as it now is, and what must be undone at the end."""

    def __init__(self, seed: RealSeed, directory: Path, log: Callable[[str], None], engine: str) -> None:
        self.seed, self.log = seed, log
        self.topic = seed.name
        self.kafka = engine != kafka_cluster.ENGINE_INSYNC
        configs = seed.broker_configs()
        if self.kafka:
            configs = seeds_kafka.kafka_configs(configs, kafka_cluster.dist_for(engine).kraft_only)
        # Slow reads on Kafka come from a slow disk under each broker's log.dirs, mounted before it starts.
        self.disks = seeds_kafka.mount_slow_disks(seed, directory) if self.kafka else {}
        try:
            self.spec = cluster.up(str(directory), seed.brokers, 0, configs, namespaces=seed.namespaces,
                                   engine=engine)
        except BaseException:
            seeds_kafka.unmount_slow_disks(self.disks)
            raise
        self.watch = _MetadataWatch(*_sources(self.spec, self.topic))
        self.fired: list[Fired] = []
        # The faults on now, by how each is undone: resumed, fault file cleared, restarted, network healed.
        self.held: dict[str, set[int]] = {kind: set() for kind in UNDO}
        self.deleted_before: dict[int, int] = {}  # partition -> the log start DeleteRecords set
        from confluent_kafka.admin import AdminClient

        self.admin = AdminClient(history.client_conf({"bootstrap.servers": self.spec.bootstrap}))
        self._controller: int | None = None
        self._controller_asked = False

    def role(self, target: str | int, partition: int) -> int:
        """The broker `target` names now, from the events (a Metadata request could land on a paused broker and
        wait out its timeout): the leader the controller last elected, the followers in the order the partition
        was created with."""
        if isinstance(target, int):
            return target
        if self.kafka:
            return self._kafka_role(target, partition)
        changes = [e for e in read_events(self.spec, self.topic)
                   if e["type"] == "leader_change" and e.get("partition") == partition]
        assert changes, f"{self.topic}-{partition} has no leader yet"
        leader = int(changes[-1]["leader_after"])
        if target == "leader":
            return leader
        followers = [int(b) for b in changes[0]["isr"] if b != leader]
        return followers[1] if target == "follower2" else followers[0]

    def _kafka_role(self, target: str, partition: int) -> int:
        """The broker `target` names now, from the brokers' metadata as the watch merged it (Kafka has no events):
        the leader, or the followers in the order of the partition's replicas."""
        def state() -> PartitionState | None:
            states = [s for s in seeds_kafka.consolidate(self.watch.snapshot()) if s.partition == partition]
            return states[-1] if states and states[-1].leader >= 0 else None

        now = wait_until(state, self.seed.settle_s, f"a leader of {self.topic}-{partition} in the watch",
                         interval_s=POLL_S)
        if target == "leader":
            return now.leader
        followers = [b for b in self.watch.replicas(partition) if b != now.leader]
        # ZooKeeper mode's controller is a broker: a fault on it would move the controller too (its ISR commits
        # wait for the next one), which the scenario does not mean, so it is the last follower picked.
        controller = self._zookeeper_controller()
        followers.sort(key=lambda b: b == controller)
        return followers[1] if target == "follower2" else followers[0]

    def _zookeeper_controller(self) -> int | None:
        """The broker that is ZooKeeper mode's controller, or None (KRaft: the controller is no broker). Asked
        once, at the first fault, while every broker answers; the scenarios' faults never move it."""
        if self._controller_asked:
            return self._controller
        self._controller_asked = True
        cluster = self.admin.describe_cluster(request_timeout=ADMIN_TIMEOUT_S).result(timeout=ADMIN_TIMEOUT_S)
        brokers = {b.node_id for b in self.spec.brokers}
        found = cluster.controller
        self._controller = int(found.id) if found is not None and int(found.id) in brokers else None
        return self._controller

    def fire(self, step: SeedStep) -> tuple[int, str]:
        """Carry out `step`; returns the broker it hit and the kind of fault to undo there."""
        broker = self.role(step.target, step.partition)
        self.log(f"{step.action} broker {broker} ({step.target} of {self.topic}-{step.partition})")
        start_ms = _now_ms()
        if step.action == "stop":
            self.spec = cluster.stop_node(self.spec, broker, sig=signal.SIGTERM)
        elif step.action == "crash" and self.kafka:
            self.spec = kafka_power.crash(self.spec, broker)
        elif step.action == "crash":
            self.spec, _ = power.crash(self.spec, broker, restart=False)
        elif step.action == "delete-records":
            self._delete_records(step.partition)
        elif step.action == "throttle":
            network.install(self.spec, network.current(self.spec).with_ingress(broker, step.kbit))
        elif step.action == "latency":
            network.shape(self.spec, broker, delay_ms=step.ms, jitter_ms=step.jitter_ms, incoming=True)
        elif step.action == "slow-reads" and self.kafka:
            slow_disk.write_control(Path(self.spec.node(broker).directory), {f"{self.topic}-{step.partition}": step.ms})
        else:
            fields: dict[str, Any] = {}
            if step.action in ("slow-reads", "fail-partition"):
                fields = {"topic": self.topic, "partition": step.partition}
            if step.action in ("slow-reads", "delay"):
                fields["ms"] = step.ms
            self.spec = script.apply(self.spec, Step(0, step.action, broker, **fields))
        kind = KIND_OF.get(step.action, "faulted")
        if kind == "down" and self.kafka:
            # insync's slow reads slow its fetches; a slow disk would slow Kafka's recovery of its logs too,
            # for minutes: the disk is well again once its broker is down.
            self.undo(broker, "faulted")
        if step.action != "delete-records":
            self.held[kind].add(broker)
        self.fired.append(Fired(step.action, broker, start_ms, _now_ms()))
        return broker, kind

    def undo(self, broker: int, kind: str) -> None:
        """Undo one kind of fault on `broker`: "paused" (resume), "faulted" (clear its fault file), "down"
        (restart it), "isolated", "throttled" or "slowed" (heal the network: every network fault ends); nothing
        when it is no longer on."""
        if broker not in self.held[kind]:
            return
        self.held[kind].discard(broker)
        if kind == "faulted" and self.kafka:
            slow_disk.write_control(Path(self.spec.node(broker).directory), {})
        else:
            self.spec = script.apply(self.spec, Step(0, UNDO[kind], None if kind in NETWORK_KINDS else broker))
        self.log(f"{UNDO[kind]} broker {broker}")

    def undo_all(self) -> None:
        for kind, brokers in self.held.items():
            for broker in sorted(brokers):
                self.undo(broker, kind)

    def _delete_records(self, partition: int) -> None:
        from confluent_kafka import OFFSET_END, TopicPartition

        futures = self.admin.delete_records([TopicPartition(self.topic, partition, OFFSET_END)],
                                            request_timeout=DELETE_RECORDS_TIMEOUT_S)
        [result] = [f.result(DELETE_RECORDS_TIMEOUT_S) for f in futures.values()]
        self.deleted_before[partition] = int(result.low_watermark)
        self.log(f"DeleteRecords {self.topic}-{partition}: log start now {result.low_watermark}")

    def wait_full_isr(self, deadline_s: float) -> bool:
        return self.wait_for("isr-full", 0, deadline_s)

    def wait_for(self, state: str, partition: int, deadline_s: float) -> bool:
        """Whether `state` (a `SeedStep.after`) holds within `deadline_s`, as the events tell it (a broker just
        restarted can answer Metadata from its old image, full ISR and all, before it has caught up)."""
        def reached() -> bool:
            self.admin.poll(0)  # serve its queued log lines to the clients' logger
            if self.kafka:
                return self._kafka_reached(state, partition)
            events = read_events(self.spec, self.topic)
            if state in ("isr-full", "isr-published"):
                full = full_isr(events, self.seed.partitions, self.seed.replication_factor)
                return full and (state == "isr-full" or published_since_isr_change(events))
            leader, isr = isr_now(events, partition)
            if state == "isr-shrunk":
                return len(isr) < self.seed.replication_factor
            return leader >= 0 and isr == [leader]

        try:
            wait_until(reached, deadline_s, f"{state} (partition {partition})", interval_s=POLL_S)
        except WaitTimeout:
            return False
        return True


    def _kafka_reached(self, state: str, partition: int) -> bool:
        """`wait_for`'s states from the brokers' metadata (a change a broker shows is one it was told of, so
        "isr-published" is "isr-full" here)."""
        latest = {s.partition: s for s in seeds_kafka.consolidate(self.watch.snapshot())}
        if state in ("isr-full", "isr-published"):
            return len(latest) == self.seed.partitions and all(
                s.leader >= 0 and len(s.isr) == self.seed.replication_factor for s in latest.values())
        now = latest.get(partition)
        if now is None:
            return False
        if state == "isr-shrunk":
            return len(now.isr) < self.seed.replication_factor
        return now.leader >= 0 and list(now.isr) == [now.leader]


def run_real(seed: RealSeed, directory: Path, log: Callable[[str], None] = lambda _: None,
             engine: str = kafka_cluster.ENGINE_INSYNC) -> SeedRun:
    """One real run of `seed` on insync, or on Kafka (`engine`, `kafka:VERSION`; see seeds_kafka.py)."""
    run = _RealRun(seed, directory, log, kafka_cluster.parse_engine(engine))
    try:
        ensure_topic(run.spec.bootstrap, run.topic, seed.partitions, seed.replication_factor,
                     {"min.insync.replicas": str(seed.min_isr)})
        workload = history.ProduceWorkload(run.spec.bootstrap, run.topic, seed.rate, seed.name)
        side = _SideProducer(run.spec.bootstrap, run.topic, seed.partitions, seed.side_records, seed.side_every_s,
                             seed.side_acks)
        workload.start()
        # The faults' clock starts at the first acknowledged write: a broker paused while the producer still
        # waits for its first metadata or producer id there stalls it for seconds (its first records then go out
        # at once, after the pause, so the follower is never behind and never leaves the ISR).
        if not _first_ack(workload, seed.settle_s):
            run.log(f"no write acknowledged after {seed.settle_s} s: the faults start anyway")
        if seed.side_records:
            side.start()
        watch = run.watch
        if seed.watch_metadata or run.kafka:
            watch.start()
        try:
            _play(run, seed.steps, seed.duration_s, seed.settle_s)
        finally:
            # On Kafka the watch is the only view of the ISRs: it goes on until they are whole again.
            seen = watch.snapshot() if run.kafka else watch.stop()
            side.stop()
            run.undo_all()
            if not run.wait_full_isr(seed.settle_s):
                run.log(f"not every ISR of {run.topic} full after {seed.settle_s} s")
            seen = watch.stop() if run.kafka else seen
            produced = workload.stop()
        # What DeleteRecords removed on purpose is not lost: only acknowledgements at or above the new log start.
        produced.acked = [a for a in produced.acked if a[1] >= run.deleted_before.get(a[0], 0)]
        verdict = history.verdict(produced, history.read_back(run.spec.bootstrap, run.topic, seed.name))
        if seed.watch_metadata or run.kafka:
            (Path(run.spec.directory) / WATCH_FILE).write_text("".join(json.dumps(entry) + "\n" for entry in seen))
        if run.kafka:
            return seeds_kafka.seed_run(seed, run.spec, seen, run.fired, verdict, _now_ms())
        return _seed_run(seed, read_events(run.spec, run.topic), verdict, seen)
    finally:
        # The run has read what it needs: the nodes are killed, not given the full deadline to close their logs
        # (they can linger seconds after their "shut down" line, seconds a suite of seeds would pay each time).
        cluster.down(cluster.ClusterSpec.load(run.spec.directory), DOWN_DEADLINE_S)
        seeds_kafka.unmount_slow_disks(run.disks)


def _first_ack(workload: history.ProduceWorkload, deadline_s: float) -> bool:
    try:
        wait_until(lambda: workload.history.acked, deadline_s, "a first acknowledged write", interval_s=POLL_S / 5)
    except WaitTimeout:
        return False
    return True


def _play(run: _RealRun, steps: tuple[SeedStep, ...], duration_s: float, settle_s: float) -> None:
    """Fire the steps on time and undo each `for_s` after it fired; a step's wait for a state moves the rest of
    the plan by as long as it took. The plan is finite and each wait bounded, so this ends."""
    start = time.monotonic()
    queue: list[tuple[float, int, SeedStep | tuple[int, str]]] = [(s.at_s, i, s) for i, s in enumerate(steps)]
    heapq.heapify(queue)
    order = len(queue)
    while queue:
        at_s, _, item = heapq.heappop(queue)
        time.sleep(max(0.0, start + at_s - time.monotonic()))
        if not isinstance(item, SeedStep):
            run.undo(*item)
            continue
        if item.after:
            waiting_since = time.monotonic()
            if not run.wait_for(item.after, item.partition, settle_s):
                run.log(f"{item.after} not reached after {settle_s} s: {item.action} anyway")
            start += time.monotonic() - waiting_since
        undo = run.fire(item)
        if item.for_s > 0:
            heapq.heappush(queue, (at_s + item.for_s, order, undo))
            order += 1
    time.sleep(max(0.0, start + duration_s - time.monotonic()))


Source = Callable[[], list[admin_requests.PartitionDescription]]
ZOOKEEPER_SOURCE = 0  # the watch's name for ZooKeeper's answers: node 0 runs it in a ZooKeeper-mode Kafka cluster


def _sources(spec: cluster.ClusterSpec, topic: str) -> tuple[dict[int, Source], list[Callable[[], None]]]:
    """Whom the watch asks for a topic's partitions, by node id, and what to close after: every broker,
    DescribeTopicPartitions (with the ELR) where the broker has it (insync, KRaft Kafka), Metadata v7 on a
    ZooKeeper-mode Kafka, and there ZooKeeper too, where the controller writes each partition's state (what a
    watch of brokers cut off or down cannot see)."""
    def describe(address: str) -> Source:
        return lambda: admin_requests.describe_topic_partitions(address, [topic], WATCH_TIMEOUT_S)[0]

    def metadata(address: str) -> Source:
        return lambda: admin_requests.metadata_partitions(address, topic, WATCH_TIMEOUT_S) or []

    if spec.engine == kafka_cluster.ENGINE_INSYNC or kafka_cluster.dist_for(spec.engine).kraft_only:
        return {b.node_id: describe(b.address) for b in spec.brokers}, []
    zookeeper = kafka_cluster.ZooKeeperState(spec.node(0).address)
    sources = {b.node_id: metadata(b.address) for b in spec.brokers}
    return {**sources, ZOOKEEPER_SOURCE: lambda: zookeeper.partitions(topic)}, [zookeeper.close]


def _now_ms() -> int:
    return int(time.time() * 1000)  # the brokers' events' clock


class _MetadataWatch(threading.Thread):
    """Asks every broker for the topic's partitions from the broker's own metadata every `WATCH_S`, and records
    each answer that differs from that broker's last one: when each ISR or leader change reached each broker. A
    broker that does not answer in time (paused) is asked again later."""

    def __init__(self, sources: dict[int, Source], closers: list[Callable[[], None]]) -> None:
        super().__init__(name="seed-metadata-watch", daemon=True)
        self.sources, self.closers = sources, closers
        self.seen: list[dict[str, Any]] = []
        self._last: dict[tuple[int, int], tuple[Any, ...]] = {}
        self._replicas: dict[int, list[int]] = {}
        self._lock = threading.Lock()
        self._stop_event = threading.Event()

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.seen)

    def replicas(self, partition: int) -> list[int]:
        with self._lock:
            return list(self._replicas.get(partition, ()))

    def stop(self) -> list[dict[str, Any]]:
        self._stop_event.set()
        if self.is_alive():
            self.join(WATCH_TIMEOUT_S * len(self.sources) + WATCH_S)
        for close in self.closers:
            close()
        self.closers = []
        return self.snapshot()

    def run(self) -> None:
        while not self._stop_event.wait(WATCH_S):
            for broker, ask in self.sources.items():
                try:
                    rows = ask()
                except OSError:
                    continue
                now_ms = _now_ms()
                with self._lock:
                    for row in rows:
                        self._replicas.setdefault(row.partition, list(row.replicas))
                        state = (row.leader, row.leader_epoch, row.isr, row.elr)
                        if self._last.get((broker, row.partition)) != state:
                            self._last[(broker, row.partition)] = state
                            self.seen.append({"ts_ms": now_ms, "broker": broker, "partition": row.partition,
                                              "isr": list(row.isr), "leader": row.leader,
                                              "leader_epoch": row.leader_epoch, "elr": list(row.elr)})


class _SideProducer(threading.Thread):
    """A second producer writing `records` small records at once every `every_s`, to the topic's partitions in
    turn (the default partitioner sticks to one partition a batch, leaving others without new records for
    seconds). Its values carry no run id, so the verdict, which follows the steady producer, reads past them."""

    VALUE = b"side".ljust(32, b".")  # the simulator's bursty value_bytes

    def __init__(self, bootstrap: str, topic: str, partitions: int, records: int, every_s: float, acks: str) -> None:
        super().__init__(name="seed-side-producer", daemon=True)
        self.bootstrap, self.topic, self.records, self.every_s, self.acks = bootstrap, topic, records, every_s, acks
        self.partitions = partitions
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(history.DELIVERY_TIMEOUT_S)

    def run(self) -> None:
        from confluent_kafka import Producer

        # batch.size is the Java producer's default, 16 kB: librdkafka's (1 MB) puts a whole burst in one batch,
        # which a follower fetch returns whole past replica.fetch.max.bytes (the first batch always comes), so a
        # follower would be behind a burst for one fetch only and a count-rule check would rarely fall in it.
        producer = Producer(history.client_conf({"bootstrap.servers": self.bootstrap, "acks": self.acks,
                                                 "linger.ms": 5, "batch.size": 16384,
                                                 "queue.buffering.max.messages": 4 * self.records}))
        while not self._stop_event.wait(self.every_s):
            for i in range(self.records):
                try:
                    producer.produce(self.topic, value=self.VALUE, partition=i % self.partitions)
                except BufferError:
                    break  # the last ones are not delivered yet: this time fewer
            producer.poll(0)
        producer.flush(history.DELIVERY_TIMEOUT_S)


def read_events(spec: cluster.ClusterSpec, topic: str) -> list[dict[str, Any]]:
    """Every node's events of `topic` (and the cluster-wide ones), in time order; a line torn by SIGKILL is
    skipped."""
    events = []
    for node in spec.nodes:
        path = node.log_dir / EVENTS_FILE
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("topic", topic) == topic:
                events.append(event)
    return sorted(events, key=lambda e: e["ts_ms"])


def full_isr(events: list[dict[str, Any]], partitions: int, replication_factor: int) -> bool:
    """Whether, after `events`, every partition has a leader and all its replicas in the ISR."""
    states = [isr_now(events, p) for p in range(partitions)]
    return all(len(isr) == replication_factor and leader >= 0 for leader, isr in states)


def published_since_isr_change(events: list[dict[str, Any]]) -> bool:
    """Whether the controller propagated metadata after the last ISR change `events` show."""
    changes = [e["ts_ms"] for e in events if e["type"] in ("isr_shrink", "isr_expand")]
    published = [e["ts_ms"] for e in events if e["type"] == "metadata_propagated"]
    return max(published, default=-1) >= max(changes, default=-1)


def isr_now(events: list[dict[str, Any]], partition: int) -> tuple[int, list[int]]:
    """`partition`'s leader (-1: none, or never seen) and ISR after `events`: the controller's elections, the
    leader's committed shrinks and expansions, and the controller's removal of a fenced follower, the one ISR
    change no event reports (a follower cut off past the session timeout may leave that way first)."""
    leader, isr = -1, list[int]()
    for event in events:
        if event["type"] == "broker_fenced" and event["broker_id"] != leader:
            isr = [b for b in isr if b != event["broker_id"]]
        elif event.get("partition") != partition:
            continue
        elif event["type"] == "leader_change":
            isr, leader = list(event["isr"]), int(event["leader_after"])
        elif event["type"] in ("isr_shrink", "isr_expand"):
            isr = list(event["isr_after"])
    return leader, isr


def _seed_run(seed: RealSeed, events: list[dict[str, Any]], verdict: history.Verdict,
              seen: list[dict[str, Any]]) -> SeedRun:
    rejected = sum(int(e.get("count", 1)) for e in events
                   if e["type"] == "produce_rejected" and e.get("error") in NOT_ENOUGH_REPLICAS)
    return SeedRun("real", seed.lag_ms, tuple(events), verdict.acked, verdict.lost, verdict.duplicated, rejected,
                   interval_s(events, "under_replicated_start", "under_replicated_end"),
                   interval_s(events, "under_min_isr_start", "under_min_isr_end"),
                   interval_s(events, "partition_offline", "partition_online"),
                   propagation_ms(parse_overrides(seed.broker_configs())), tuple(seen))


def interval_s(events: list[dict[str, Any]], start_type: str, end_type: str) -> float:
    """Partition-seconds between each partition's start and end events (one still open ends at the last event)."""
    open_since: dict[int, int] = {}
    total_ms = 0
    for event in events:
        partition = int(event.get("partition", -1))
        if event["type"] == start_type:
            open_since.setdefault(partition, event["ts_ms"])
        elif event["type"] == end_type and partition in open_since:
            total_ms += event["ts_ms"] - open_since.pop(partition)
    last_ms = events[-1]["ts_ms"] if events else 0
    total_ms += sum(last_ms - began for began in open_since.values())
    return round(total_ms / 1000, 1)
