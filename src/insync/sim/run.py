"""One simulation run: build the cluster, start the workload and the faults, run, heal, quiesce, check, report.

Phases, all in virtual time from the scenario's seed:
1. start-up: brokers register, the controller unfences them, the topic is created once all are in (bounded
   wait), and the clients start;
2. `duration_s` of workload under the scripted faults and `[chaos]`;
3. heal: every fault ends (links healed, disks cleared, dead brokers restarted), producers stop;
4. `quiesce_s` for the cluster to catch up, then the final checks (lost writes, divergence, consumed data, and
   with `[transactions]` the transactional ones of `txn_checker` on each partition's final leader, and with
   `[ctp]` the exactly-once ones of `ctp_checker`).
The checker's incremental invariants run after every broker step throughout. A scenario with `[transactions]`
gets a transaction coordinator on every broker and `__transaction_state` created with the topic (the server
creates it at the first FindCoordinator instead).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from insync.config import BrokerConfig, TransactionCoordinatorConfig
from insync.events import EventType, LeaderChangeReason
from insync.sim.checker import PREFIX_CHECK_INTERVAL_MS
from insync.sim.cluster import SimCluster
from insync.sim.ctp_checker import check_ctp, read_ctp
from insync.sim.ctp_workload import SimCtp
from insync.sim.expectations import check_expectations
from insync.sim.faults import FaultPlan
from insync.sim.history import History
from insync.sim.result import SimResult
from insync.sim.scenario import Scenario
from insync.sim.scheduler import Scheduler
from insync.sim.txn_checker import check_transactions, read_partition
from insync.sim.txn_workload import SimTxnProducer, TxnHistory
from insync.sim.workload import SimConsumer, SimProducer
from insync.types import TRANSACTION_STATE_TOPIC, BrokerId, TopicPartition

STARTUP_MS_MAX = 60_000
STARTUP_STEP_MS = 100


def run_scenario(scenario: Scenario, overrides: dict[str, str] | None = None) -> SimResult:
    """Run `scenario` with its seed and return the result (the run is a pure function of both)."""
    wall_start = time.perf_counter()
    cpu_start = time.process_time()
    scheduler = Scheduler(scenario.seed)
    run_start = scheduler.now_ms
    cluster = SimCluster(scheduler, scenario.brokers, scenario.broker_config, scenario.topic.name, scenario.network,
                         transactions=scenario.transactions is not None)
    _wait_for_brokers(scheduler, cluster)
    topic = scenario.topic
    cluster.create_topic(topic.name, topic.partitions, topic.replication_factor, topic.configs)
    if scenario.transactions is not None:
        _create_transaction_state(cluster, BrokerConfig(scenario.broker_config).transactions, scenario.brokers)
    tps = [TopicPartition(topic.name, p) for p in range(topic.partitions)]
    scheduler.run_until(scheduler.now_ms + 1_000)  # leaders and followers start
    history = History()
    bootstrap = [BrokerId(b) for b in cluster.broker_ids()]
    # Client schedules are relative to the start of the workload phase, as are faults.
    workload_start = scheduler.now_ms
    scheduler.start_ms = workload_start
    producers = [SimProducer(f"producer-{i}", 1000 + i, spec, bootstrap, scheduler, cluster.network, history)
                 for i, spec in enumerate(scenario.producers)]
    consumers = [SimConsumer(f"consumer-{i}", topic.name, topic.partitions, bootstrap, scheduler, cluster.network,
                             history) for i in range(scenario.consumers)]
    txn_history = TxnHistory()
    spec = scenario.transactions
    # With [ctp] the transactional producers write its input, the first partition, only.
    written = topic.partitions if scenario.ctp is None else 1
    txn_producers = [] if spec is None else [
        SimTxnProducer(f"txn-producer-{i}", topic.name, written, spec, bootstrap, scheduler, cluster.network,
                       txn_history) for i in range(spec.producers)]
    ctp = None if spec is None or scenario.ctp is None else SimCtp(
        topic.name, (spec, scenario.ctp), bootstrap, scheduler, cluster.network, txn_history)
    end_ms = workload_start + scenario.duration_ms
    plan = FaultPlan(scheduler, cluster, end_ms)
    plan.schedule(scenario.faults)
    if scenario.chaos is not None:
        plan.schedule_chaos({"partitions": topic.partitions, **scenario.chaos})
    _every(scheduler, PREFIX_CHECK_INTERVAL_MS, lambda: cluster.checker.check_prefixes(scheduler.now_ms, tps))
    scheduler.run_until(end_ms)
    for producer in producers:
        producer.stop()
    for txn_producer in txn_producers:
        txn_producer.stop()
    if ctp is not None:
        ctp.stop()  # its newest instance runs on through the quiesce, to process all the input
    plan.heal_all()
    scheduler.run_until(end_ms + scenario.quiesce_ms)
    cluster.update_health()
    if spec is not None:
        _check_transactions(cluster, tps, txn_history, ctp)
    result = _result(scenario, overrides or {}, cluster, history, (run_start, wall_start, cpu_start), consumers)
    if spec is not None:
        outcomes = Counter(attempt.outcome for attempt in txn_history.attempts)
        result.transactions = {"committed": outcomes["committed"], "aborted": outcomes["aborted"],
                               "abandoned": outcomes["abandoned"], "open": outcomes["open"],
                               **{f"error.{name}": count for name, count in sorted(txn_history.errors.items())}}
        if ctp is not None:
            result.transactions.update(ctp.figures())
    return result


def _create_transaction_state(cluster: SimCluster, config: TransactionCoordinatorConfig, brokers: int) -> None:
    """`__transaction_state` with Kafka's TransactionLog topic configs, as the server creates it."""
    cluster.create_topic(TRANSACTION_STATE_TOPIC, config.log_num_partitions, min(config.log_replication_factor,
                                                                                 brokers),
                         {"cleanup.policy": "compact", "min.insync.replicas": str(config.log_min_isr),
                          "unclean.leader.election.enable": "false"})


def _check_transactions(cluster: SimCluster, tps: list[TopicPartition], history: TxnHistory,
                        ctp: SimCtp | None) -> None:
    now = cluster.scheduler.now_ms
    leaders = {}
    for tp in tps:
        leader = cluster.current_leader(tp)
        core = cluster.brokers[leader].core if leader in cluster.brokers else None
        if core is None or core.leader_epoch(tp) is None:
            cluster.checker.violation(now, f"{tp}: no live leader to read transactions from (leader {leader})")
            continue
        leaders[tp] = core
    violations = check_transactions(history, {tp: read_partition(core, tp, now) for tp, core in leaders.items()})
    if ctp is not None and len(leaders) == len(tps):
        violations += check_ctp(read_ctp({tp.partition: core for tp, core in leaders.items()}, tps[0].topic, now))
    for text in violations:
        cluster.checker.violation(now, text)


def _every(scheduler: Scheduler, interval_ms: int, action: Callable[[], None]) -> None:
    def run() -> None:
        action()
        scheduler.after(interval_ms, run)

    scheduler.after(interval_ms, run)


def _wait_for_brokers(scheduler: Scheduler, cluster: SimCluster) -> None:
    for _ in range(STARTUP_MS_MAX // STARTUP_STEP_MS):
        if cluster.all_registered():
            return
        scheduler.run_until(scheduler.now_ms + STARTUP_STEP_MS)
    raise AssertionError("brokers did not register and unfence within a minute of virtual time")


def _result(scenario: Scenario, overrides: dict[str, str], cluster: SimCluster, history: History,
            starts: tuple[int, float, float], consumers: list[SimConsumer]) -> SimResult:
    scheduler = cluster.scheduler
    tps = [TopicPartition(scenario.topic.name, p) for p in range(scenario.topic.partitions)]
    types = Counter(event.type for event in cluster.events)
    unclean = sum(1 for e in cluster.events if e.type is EventType.LEADER_CHANGE
                  and e.fields.get("reason") == str(LeaderChangeReason.UNCLEAN))
    report = cluster.checker.final_check(scheduler.now_ms, history, tps, unclean)
    result = SimResult(
        scenario=scenario.name,
        seed=scenario.seed,
        config=scenario.document,
        overrides=overrides,
        virtual_s=(scheduler.now_ms - starts[0]) / 1000,
        wall_s=time.perf_counter() - starts[1],
        cpu_s=time.process_time() - starts[2],
        acked=sum(1 for ack in history.acks),
        acked_records=history.records_acked,
        lost_acked=report.lost_acked,
        duplicates=report.duplicates,
        isr_shrinks=types[EventType.ISR_SHRINK],
        isr_expands=types[EventType.ISR_EXPAND],
        urp_ms=cluster.urp_ms,
        under_min_isr_ms=cluster.under_min_isr_ms,
        offline_ms=cluster.offline_ms,
        produce_errors=dict(history.produce_errors),
        failed_partitions_max=cluster.failed_partitions_max,
        failed_partitions_end=cluster.failed_partitions_now(),
        metadata_propagations=types[EventType.METADATA_PROPAGATED],
        invariant_violations=list(cluster.checker.violations),
        unclean_elections=unclean,
        consumed_batches=sum(consumer.batches_read for consumer in consumers),
        divergent_logs=len(report.divergent),
        sim_events=scheduler.events_run,
        events=[event.to_dict() for event in sorted(cluster.events, key=lambda e: e.ts_ms)],
        trace=list(cluster.trace),
    )
    result.expectation_failures = check_expectations(scenario.expect, result)
    return result
