"""Kafka's own command-line tools against Kafka and against insync: the same steps, in the same order, on two
clusters; each step's exit code and output, normalised for what must differ (ids, ports, paths, timings), side by
side. `run_table` returns the rows; `markdown` renders the table docs/compatibility.md shows."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import txn_workload
from differential import CLOSED, Connection, request

from insync.admin import describe_rows
from insync.chaos import cluster, kafka_tools
from insync.chaos.kafka_dist import KafkaDist
from insync.waiting import wait_until

Normalize = Callable[[str], str]
ISR_WAIT_S = 90.0


INTERNAL = re.compile(r"__(consumer_offsets|insync_events)")


def _generic(text: str) -> str:
    """Addresses, ids and log timestamps masked; internal topics left out (their replicas are placed at random)."""
    text = re.sub(r"\b\d{1,3}(\.\d{1,3}){3}:\d+\b", "HOST:PORT", text)
    text = re.sub(r"(TopicId|Cluster ID|ClusterId|clusterId)(\"?:\s*\"?)[A-Za-z0-9_-]{22}", r"\1\2ID", text)
    text = re.sub(r"^\[\d{4}-\d\d-\d\d [\d:,]+\] ", "", text, flags=re.MULTILINE)
    text = re.sub(r"HOST:PORT\s+\(\d+\)", "HOST:PORT (ID)", text)  # a group's coordinator: placed at random
    text = re.sub(r"__(consumer_offsets|insync_events)-\d+(, )?", "", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines() if not INTERNAL.search(line))


def _sorted_lines(text: str) -> str:
    return "\n".join(sorted(_generic(text).splitlines()))


def _numbers(text: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "N", _generic(text))


def _log_dirs(text: str) -> str:
    """kafka-log-dirs: the JSON's paths and sizes are each cluster's own; the partitions and lags are compared."""
    lines = text.strip().splitlines()
    report = json.loads(lines[-1])
    summary = sorted((b["broker"], p["partition"], p["offsetLag"], p["isFuture"])
                     for b in report["brokers"] for d in b["logDirs"] for p in d["partitions"])
    return "\n".join([*lines[:-1], *map(str, summary)])


def _generate(text: str) -> str:
    """kafka-reassign-partitions --generate: the proposal is random (Kafka's assignment starts at a random broker);
    the current assignment is compared."""
    return _generic(text.split("Proposed partition reassignment configuration")[0])


def _verifiable_producer(text: str) -> str:
    names = [json.loads(line).get("name") for line in text.splitlines() if line.startswith("{")]
    return f"sent {names.count('producer_send_success')}, failed {names.count('producer_send_error')}"


def _verifiable_consumer(text: str) -> str:
    events = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    consumed = sum(e.get("count", 0) for e in events if e.get("name") == "records_consumed")
    committed = all(e.get("success") for e in events if e.get("name") == "offsets_committed")
    return f"consumed {consumed}, commits ok {committed}"


def _consumer_perf(text: str) -> str:
    header, values = text.strip().splitlines()[-2:]
    return f"{header}\nnMsg={values.split(',')[4].strip()}"


@dataclass(frozen=True)
class Step:
    """One tool run (`tool`, `args` with {bootstrap} and {dir}), or an action on the cluster (`action`)."""

    name: str
    tool: str = ""
    args: tuple[str, ...] = ()
    stdin: str | None = None
    normalize: Normalize = _generic
    files: dict[str, str] = field(default_factory=dict)  # written to {dir} first
    action: Callable[[cluster.ClusterSpec], cluster.ClusterSpec] | None = None


@dataclass(frozen=True)
class Row:
    step: str
    command: str
    kafka_exit: int
    insync_exit: int
    kafka_output: str
    insync_output: str

    @property
    def identical(self) -> bool:
        return self.kafka_exit == self.insync_exit and self.kafka_output == self.insync_output


def _wait_isr(spec: cluster.ClusterSpec, topic: str, wanted: Callable[[tuple[int, ...]], bool]) -> None:
    def as_wanted() -> bool:
        rows = describe_rows(spec.bootstrap, [topic])
        return bool(rows) and all(wanted(row.isr) for row in rows)

    wait_until(as_wanted, ISR_WAIT_S, f"{spec.engine}: ISRs of {topic} as wanted", interval_s=0.5,
               retry_on=(Exception,))


def _stop_broker_3(spec: cluster.ClusterSpec) -> cluster.ClusterSpec:
    spec = cluster.stop_node(spec, 3, deadline_s=30.0, sig=signal.SIGTERM)
    _wait_isr(spec, "tt", lambda isr: 3 not in isr)
    return spec


def _restart_broker_3(spec: cluster.ClusterSpec) -> cluster.ClusterSpec:
    spec = cluster.start_node(spec, 3)
    cluster.wait_listening(spec.node(3), spec.start_deadline_s)
    _wait_isr(spec, "tt", lambda isr: len(isr) == 3)
    return spec


# A transactional producer per cluster (by directory) whose transaction stays open between two actions.
_OPEN_TRANSACTIONS: dict[str, Any] = {}
TRANSACTIONAL_ID = "tools-txn"


def _open_transaction(spec: cluster.ClusterSpec) -> cluster.ClusterSpec:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": spec.bootstrap, "transactional.id": TRANSACTIONAL_ID})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce("tt", key=b"k", value=b"in a transaction", partition=0)
    assert producer.flush(60) == 0
    _OPEN_TRANSACTIONS[spec.directory] = producer
    return spec


def _commit_transaction(spec: cluster.ClusterSpec) -> cluster.ClusterSpec:
    _OPEN_TRANSACTIONS.pop(spec.directory).commit_transaction(60)
    connections = [Connection(b.address) for b in spec.brokers]
    try:
        coordinator = txn_workload.coordinator(connections, TRANSACTIONAL_ID)

        def completed() -> bool:  # EndTxn is answered at PrepareCommit; CompleteCommit follows the markers
            answer = coordinator.send(request(65, 0, transactional_ids=[TRANSACTIONAL_ID]))
            return answer != CLOSED and str(answer.transaction_states[0].transaction_state) == "CompleteCommit"

        wait_until(completed, 30.0, f"{spec.engine}: the transaction of {TRANSACTIONAL_ID} complete")
    finally:
        for connection in connections:
            connection.close()
    return spec


def _columns(*names: str) -> Normalize:
    """A table's columns `names` masked (their values are each cluster's own), -1 and None kept: they say
    "none" on both sides."""
    def normalize(text: str) -> str:
        lines = _generic(text).splitlines()
        if not lines:
            return ""
        header = lines[0].split()
        masked = {i for i, name in enumerate(header) if name in names}
        rows = [" ".join("*" if i in masked and value not in ("-1", "None") else value
                         for i, value in enumerate(line.split())) for line in lines[1:]]
        return "\n".join([" ".join(header), *sorted(rows)])
    return normalize


def _records(count: int) -> str:
    return "".join(f"k{i}:value-{i}\n" for i in range(count))


B = ("--bootstrap-server", "{bootstrap}")
TT = ("--topic", "tt")
STEPS: tuple[Step, ...] = (
    Step("topics: create with configs", "kafka-topics", (*B, "--create", *TT, "--replica-assignment",
         "1:2:3,2:3:1,3:1:2", "--config", "min.insync.replicas=2", "--config", "retention.ms=600000")),
    Step("topics: create, replicas only on broker 3", "kafka-topics",
         (*B, "--create", "--topic", "solo", "--replica-assignment", "3")),
    Step("topics: create an existing topic", "kafka-topics", (*B, "--create", *TT, "--partitions", "1")),
    Step("topics: create, replication factor above the brokers", "kafka-topics",
         (*B, "--create", "--topic", "big", "--partitions", "1", "--replication-factor", "5")),
    Step("topics: create, invalid config", "kafka-topics",
         (*B, "--create", "--topic", "badcfg", "--partitions", "1", "--config", "min.insync.replicas=zero")),
    Step("topics: list", "kafka-topics", (*B, "--list")),
    Step("topics: describe", "kafka-topics", (*B, "--describe", *TT)),
    Step("console-producer: 60 keyed records, acks=all", "kafka-console-producer",
         (*B, *TT, "--property", "parse.key=true", "--property", "key.separator=:"), stdin=_records(60)),
    Step("console-consumer: from the beginning, in a group", "kafka-console-consumer",
         (*B, *TT, "--from-beginning", "--max-messages", "60", "--timeout-ms", "30000", "--group", "cg",
          "--property", "print.key=true", "--property", "print.partition=true", "--property", "print.offset=true"),
         normalize=_sorted_lines),
    Step("get-offsets", "kafka-get-offsets", (*B, *TT), normalize=_sorted_lines),
    Step("get-offsets: earliest", "kafka-get-offsets", (*B, *TT, "--time", "-2"), normalize=_sorted_lines),
    Step("(broker 3 stopped: controlled shutdown)", action=_stop_broker_3),
    Step("topics: describe --under-replicated-partitions", "kafka-topics",
         (*B, "--describe", "--under-replicated-partitions")),
    Step("topics: describe --under-min-isr-partitions", "kafka-topics",
         (*B, "--describe", "--under-min-isr-partitions")),
    Step("topics: describe --at-min-isr-partitions", "kafka-topics", (*B, "--describe", "--at-min-isr-partitions")),
    Step("topics: describe --unavailable-partitions", "kafka-topics",
         (*B, "--describe", "--unavailable-partitions")),
    Step("(broker 3 restarted)", action=_restart_broker_3),
    Step("topics: alter partitions with an assignment", "kafka-topics",
         (*B, "--alter", *TT, "--partitions", "4", "--replica-assignment", "1:2:3,2:3:1,3:1:2,1:3:2")),
    Step("topics: describe after alter", "kafka-topics", (*B, "--describe", *TT)),
    Step("configs: alter topic", "kafka-configs", (*B, "--entity-type", "topics", "--entity-name", "tt", "--alter",
                                                   "--add-config", "retention.ms=1000000,max.message.bytes=2000000")),
    Step("configs: describe topic", "kafka-configs", (*B, "--entity-type", "topics", "--entity-name", "tt",
                                                      "--describe")),
    Step("configs: alter topic, unknown key", "kafka-configs", (*B, "--entity-type", "topics", "--entity-name",
                                                                "tt", "--alter", "--add-config", "no.such.key=1")),
    Step("configs: alter broker 1", "kafka-configs", (*B, "--entity-type", "brokers", "--entity-name", "1",
                                                      "--alter", "--add-config", "log.retention.ms=86400000")),
    Step("configs: describe broker 1", "kafka-configs", (*B, "--entity-type", "brokers", "--entity-name", "1",
                                                         "--describe")),
    Step("configs: alter broker default", "kafka-configs", (*B, "--entity-type", "brokers", "--entity-default",
                                                            "--alter", "--add-config", "log.retention.ms=172800000")),
    Step("configs: describe broker default", "kafka-configs", (*B, "--entity-type", "brokers", "--entity-default",
                                                               "--describe")),
    Step("configs: add a SCRAM user", "kafka-configs", (*B, "--entity-type", "users", "--entity-name", "alice",
                                                        "--alter", "--add-config",
                                                        "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")),
    Step("configs: describe SCRAM users", "kafka-configs", (*B, "--entity-type", "users", "--describe")),
    Step("consumer-groups: list", "kafka-consumer-groups", (*B, "--list")),
    Step("consumer-groups: describe", "kafka-consumer-groups", (*B, "--describe", "--group", "cg"),
         normalize=_sorted_lines),
    Step("consumer-groups: describe --state", "kafka-consumer-groups", (*B, "--describe", "--group", "cg", "--state")),
    Step("consumer-groups: reset-offsets to earliest", "kafka-consumer-groups",
         (*B, "--reset-offsets", "--group", "cg", *TT, "--to-earliest", "--execute"), normalize=_sorted_lines),
    Step("consumer-groups: describe an unknown group", "kafka-consumer-groups", (*B, "--describe", "--group", "nope")),
    Step("consumer-groups: delete", "kafka-consumer-groups", (*B, "--delete", "--group", "cg")),
    Step("acls: add", "kafka-acls", (*B, "--add", "--allow-principal", "User:alice", "--operation", "Read", *TT)),
    Step("acls: list", "kafka-acls", (*B, "--list", *TT)),
    Step("acls: remove", "kafka-acls", (*B, "--remove", "--force", "--allow-principal", "User:alice", "--operation",
                                        "Read", *TT)),
    Step("reassign-partitions: generate", "kafka-reassign-partitions",
         (*B, "--generate", "--topics-to-move-json-file", "{dir}/move.json", "--broker-list", "1,2,3"),
         normalize=_generate, files={"move.json": '{"version":1,"topics":[{"topic":"tt"}]}'}),
    Step("reassign-partitions: execute with a throttle", "kafka-reassign-partitions",
         (*B, "--execute", "--reassignment-json-file", "{dir}/plan.json", "--throttle", "50000000"),
         files={"plan.json": '{"version":1,"partitions":[{"topic":"tt","partition":3,"replicas":[2,3,1]}]}'}),
    Step("reassign-partitions: verify", "kafka-reassign-partitions",
         (*B, "--verify", "--reassignment-json-file", "{dir}/plan.json")),
    Step("leader-election: preferred, all partitions", "kafka-leader-election",
         (*B, "--election-type", "preferred", "--all-topic-partitions"), normalize=_sorted_lines),
    Step("delete-records", "kafka-delete-records", (*B, "--offset-json-file", "{dir}/delete.json"),
         files={"delete.json": '{"version":1,"partitions":[{"topic":"tt","partition":0,"offset":2}]}'}),
    Step("get-offsets: earliest after delete-records", "kafka-get-offsets", (*B, *TT, "--time", "-2"),
         normalize=_sorted_lines),
    Step("log-dirs: describe", "kafka-log-dirs", (*B, "--describe", "--topic-list", "tt"), normalize=_log_dirs),
    Step("cluster: cluster-id", "kafka-cluster", ("cluster-id", *B)),
    Step("features: describe", "kafka-features", (*B, "describe"), normalize=_sorted_lines),
    Step("metadata-quorum: describe --status", "kafka-metadata-quorum", (*B, "describe", "--status"),
         normalize=_numbers),
    Step("producer-perf-test: 20,000 x 1 KiB, acks=all", "kafka-producer-perf-test",
         ("--topic", "perf", "--num-records", "20000", "--record-size", "1024", "--throughput", "-1",
          "--producer-props", "bootstrap.servers={bootstrap}", "acks=all"),
         normalize=lambda text: _numbers(text.strip().splitlines()[-1])),
    Step("consumer-perf-test: 20,000 records", "kafka-consumer-perf-test",
         (*B, "--topic", "perf", "--messages", "20000", "--timeout", "60000"), normalize=_consumer_perf),
    Step("e2e-latency: 300 records, acks=all", "kafka-e2e-latency",
         ("{bootstrap}", "lat", "300", "all", "100"),
         normalize=_numbers),
    Step("VerifiableProducer: 2,000 records, acks=all", "kafka-verifiable-producer",
         (*B, "--topic", "vt", "--max-messages", "2000", "--acks", "-1"), normalize=_verifiable_producer),
    Step("VerifiableConsumer: 2,000 records, group, commits", "kafka-verifiable-consumer",
         (*B, "--topic", "vt", "--group-id", "vg", "--max-messages", "2000", "--reset-policy", "earliest"),
         normalize=_verifiable_consumer),
    Step("(a transaction left open on tt-0)", action=_open_transaction),
    Step("transactions: list", "kafka-transactions", (*B, "list"), normalize=_columns("Coordinator", "ProducerId")),
    Step("transactions: describe an open transaction", "kafka-transactions",
         (*B, "describe", "--transactional-id", TRANSACTIONAL_ID),
         normalize=_columns("CoordinatorId", "ProducerId", "CurrentTransactionStartTimeMs", "TransactionDurationMs")),
    Step("transactions: describe-producers", "kafka-transactions",
         (*B, "describe-producers", *TT, "--partition", "0"),
         normalize=_columns("ProducerId", "LastTimestamp")),
    Step("transactions: find-hanging", "kafka-transactions", (*B, "find-hanging", "--broker-id", "1"),
         normalize=_columns("ProducerId", "LastTimestamp", "Duration(min)")),
    Step("(the transaction committed)", action=_commit_transaction),
    Step("transactions: describe a committed transaction", "kafka-transactions",
         (*B, "describe", "--transactional-id", TRANSACTIONAL_ID),
         normalize=_columns("CoordinatorId", "ProducerId", "CurrentTransactionStartTimeMs", "TransactionDurationMs")),
    Step("transactions: describe an unknown id", "kafka-transactions",
         (*B, "describe", "--transactional-id", "nope")),
    Step("topics: delete", "kafka-topics", (*B, "--delete", "--topic", "solo")),
    Step("topics: list after delete", "kafka-topics", (*B, "--list")),
)


def _run_step(dist: KafkaDist, step: Step, spec: cluster.ClusterSpec, workdir: Path) -> tuple[int, str]:
    for name, text in step.files.items():
        (workdir / name).write_text(text)
    args = [arg.format(bootstrap=spec.brokers[0].address, dir=workdir) for arg in step.args]
    ran = kafka_tools.run(dist, step.tool, args, stdin=step.stdin, cwd=workdir)
    output = ran.stdout if ran.exit_code == 0 else ran.stdout + ran.stderr
    try:
        return ran.exit_code, step.normalize(output)
    except (ValueError, IndexError, KeyError) as exc:  # output not of the shape a normaliser reads
        return ran.exit_code, f"unreadable output ({exc!r}): {_generic(output)[:500]}"


def run_table(dist: KafkaDist, kafka: cluster.ClusterSpec, insync: cluster.ClusterSpec, workdir: Path
              ) -> list[Row]:
    """Every step on Kafka and on insync at the same time (each tool a JVM of its own, whose start is most of a
    step's time), the next step once both are done, so the clusters see the same history."""
    rows = []
    specs = {"kafka": kafka, "insync": insync}
    for engine in specs:
        (workdir / engine).mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=len(specs)) as pool:
        for step in STEPS:
            if step.action is not None:
                specs = {engine: step.action(spec) for engine, spec in specs.items()}
                continue
            ran = [pool.submit(_run_step, dist, step, specs[e], workdir / e) for e in specs]
            (k_exit, k_out), (i_exit, i_out) = (future.result() for future in ran)
            command = f"{step.tool} {' '.join(step.args)}".replace("{bootstrap}", "B").replace("{dir}/", "")
            rows.append(Row(step.name, command, k_exit, i_exit, k_out, i_out))
    return rows


def markdown(rows: list[Row], differences: dict[str, str], kafka_version: str) -> str:
    """The table: each step, the command, Kafka's and insync's exit codes, and whether the outputs agree."""
    lines = [f"| step | command | Kafka {kafka_version} | insync | same? |", "| --- | --- | --- | --- | --- |"]
    for row in rows:
        verdict = "identical" if row.identical else f"differs: {differences.get(row.step, 'NOT LISTED')}"
        lines.append(f"| {row.step} | `{row.command}` | exit {row.kafka_exit} | exit {row.insync_exit} | {verdict} |")
    return "\n".join(lines) + "\n"
