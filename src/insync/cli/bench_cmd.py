"""`insync bench storage|produce|consume|e2e|latency|requests|compare|spark-source`: storage beside plain file I/O
(`insync.bench.storage`), client throughput and latency over the Kafka protocol (`insync.bench.clients`), acks and
end-to-end latency with a producer and a tailing consumer in their own processes (`insync.bench.latency`), the
Produce requests per second a leader serves and where its time goes (`insync.bench.requests`), and
all of them on insync and on a peer, Apache Kafka or Tansu, side by side (`insync.bench.compare`), as JSON or a table."""

from __future__ import annotations

import argparse
import json
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace

from insync.bench import clients, latency, requests, storage, targets
from insync.bench import compare as compare_bench
from insync.bench.latency_workers import CLIENTS, HEADER
from insync.chaos import kafka_cluster
from insync.config import ConfigError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("bench", help="measure insync beside a plain baseline")
    commands = parser.add_subparsers(dest="bench_command", metavar="COMMAND")
    commands.required = True
    bench = commands.add_parser("storage", help="log appends and reads vs plain open().write()/read()")
    bench.add_argument("--seconds", type=float, default=3.0, help="time spent appending (default 3)")
    bench.add_argument("--dir", default=None, help="where the temporary files go (default: the temp dir)")
    bench.add_argument("--fetch-bytes", type=int, default=1024 * 1024, help="bytes per read (default 1 MiB)")
    bench.add_argument("--json", action="store_true", help="print one JSON object per batch size")
    bench.set_defaults(func=run_storage)
    for mode, text in (("produce", "produce records as fast as acks allow (or at --rate)"),
                       ("consume", "consume the topic from the earliest offset"),
                       ("e2e", "produce at --rate and consume at once: send-to-receipt latency")):
        sub = commands.add_parser(mode, help=text)
        sub.add_argument("--bootstrap-server", default="127.0.0.1:9092")
        sub.add_argument("--topic", default="insync-bench")
        sub.add_argument("--messages", type=int, default=100_000)
        sub.add_argument("--size", type=int, default=1024, help="bytes per record (default 1 KiB)")
        sub.add_argument("--acks", default="all", choices=["0", "1", "all"])
        sub.add_argument("--rate", type=float, default=2000.0 if mode == "e2e" else None,
                         help="records per second (e2e default 2000)")
        sub.set_defaults(func=run_client, mode=mode)
    _register_security(commands)
    _register_latency(commands)
    _register_requests(commands)
    compare = commands.add_parser("compare", help="every client benchmark on a local insync cluster and on a peer: "
                                  "Apache Kafka (--peer kafka[:VERSION]) or Tansu")
    compare.add_argument("--peer", default="tansu", help="tansu (default) or kafka[:VERSION], e.g. kafka:4.1")
    compare.add_argument("--seconds", type=float, default=latency.SECONDS_MIN,
                         help=f"measured per throughput and latency run (at least {latency.SECONDS_MIN:g})")
    compare.add_argument("--steps", type=int, default=6, help="runs of the highest-rate search at most (default 6)")
    compare.add_argument("--scale", type=int, nargs="?", const=1000, default=None, metavar="PARTITIONS",
                         help="with --peer kafka, also the scale rows on a topic of PARTITIONS (default 1000), RF 3; "
                              "slow, so off unless asked")
    compare.add_argument("--only", default=None, metavar="GROUPS",
                         help=f"comma-separated row groups to run, of {','.join(compare_bench.GROUPS)} (default all)")
    compare.add_argument("--compaction-mb", type=int, default=compare_bench.COMPACTION_MB, metavar="MB",
                         help=f"with --peer kafka, the compacted log of the compaction rows "
                              f"(default {compare_bench.COMPACTION_MB})")
    compare.add_argument("--json", action="store_true")
    compare.set_defaults(func=run_compare)
    source = commands.add_parser("spark-source", help="Spark reading a topic through format(\"insync\") vs parquet")
    source.add_argument("--bootstrap-server", required=True)
    source.add_argument("--records", type=int, default=1_000_000)
    source.add_argument("--size", type=int, default=1024)
    source.add_argument("--partitions", type=int, default=2)
    source.add_argument("--rounds", type=int, default=5, help="timed rounds of each reader (default 5)")
    source.add_argument("--master", default="local[*]")
    source.set_defaults(func=run_spark_source)


def _register_security(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = commands.add_parser("security", help="produce and consume MB/s on a PLAINTEXT cluster and on a secured "
                                "one, each started for the run (3 partitions, RF min(3, brokers), acks=all)")
    bench.add_argument("--security", default="sasl_ssl", choices=("ssl", "sasl_ssl", "sasl_plaintext"))
    bench.add_argument("--brokers", type=int, default=3)
    bench.add_argument("--messages", type=int, default=100_000)
    bench.add_argument("--size", type=int, default=1024, help="bytes per record (default 1 KiB)")
    bench.add_argument("--json", action="store_true")
    bench.set_defaults(func=run_security)


def run_security(args: argparse.Namespace) -> int:
    """The same produce and consume runs on a PLAINTEXT cluster, then on one secured with --security."""
    if args.brokers < 1 or args.messages < 1 or args.size < 8:
        raise ConfigError("--brokers and --messages must be at least 1, --size at least 8")
    results = []
    for security in ("plaintext", args.security):
        with targets.insync_cluster(args.brokers, security) as target:
            target.ensure_topic("insync-bench-security", 3)
            produced = clients.produce(target.bootstrap, "insync-bench-security", args.messages, args.size, "all")
            consumed = clients.consume(target.bootstrap, "insync-bench-security", args.messages)
        results.append((security, produced, consumed))
    for security, produced, consumed in results:
        if args.json:
            print(json.dumps({"security": security, "produce": json.loads(produced.to_json()),
                              "consume": json.loads(consumed.to_json())}))
        else:
            print(f"{security:<15} produce {produced.mb_per_s:7.2f} MB/s (p99 {produced.p99_ms} ms)   "
                  f"consume {consumed.mb_per_s:7.2f} MB/s   errors {produced.errors + consumed.errors}")
    return 0 if all(p.errors == 0 and c.errors == 0 for _, p, c in results) else 1


def _register_latency(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = commands.add_parser("latency", help="acks and end-to-end latency, producer and tailing consumer in their "
                                "own processes, on a 3-broker cluster started for the run (RF 3, min ISR 2)")
    bench.add_argument("--bootstrap-server", default=None,
                       help="run against this broker (or Tansu) instead of starting a cluster")
    bench.add_argument("--replication-factor", type=int, default=3,
                       help="of the topic when it is created on --bootstrap-server (default 3)")
    bench.add_argument("--brokers", type=int, default=3, help="of the cluster started for the run (default 3)")
    bench.add_argument("--topic", default="insync-latency")
    bench.add_argument("--client", default="confluent", choices=CLIENTS, help="the producer's client library")
    bench.add_argument("--rate", type=float, default=500.0, help="records per second (default 500)")
    bench.add_argument("--linger-ms", type=int, default=0, help="the producer's linger.ms (default 0)")
    bench.add_argument("--acks", default="all", choices=["0", "1", "all"])
    bench.add_argument("--record-bytes", type=int, default=1024)
    bench.add_argument("--seconds", type=float, default=latency.SECONDS_MIN,
                       help=f"measured, after the warm-up (at least {latency.SECONDS_MIN:g})")
    bench.add_argument("--warmup-seconds", type=float, default=3.0)
    bench.add_argument("--find-max-rate", action="store_true",
                       help="search the highest rate whose end-to-end p99 stays under --e2e-p99-ms, from --rate")
    bench.add_argument("--e2e-p99-ms", type=float, default=latency.E2E_P99_MS_MAX)
    bench.add_argument("--steps", type=int, default=7, help="runs of the search at most (default 7)")
    bench.set_defaults(func=run_latency)


def run_latency(args: argparse.Namespace) -> int:
    if args.seconds < latency.SECONDS_MIN or args.warmup_seconds < 0:
        raise ConfigError(f"--seconds must be at least {latency.SECONDS_MIN:g} and --warmup-seconds not negative")
    if args.rate < 1 or args.linger_ms < 0 or args.record_bytes < HEADER.size:
        raise ConfigError(f"--rate must be at least 1, --linger-ms not negative and --record-bytes at least "
                          f"{HEADER.size}")
    if not 1 <= args.steps <= latency.SEARCH_STEPS_MAX or args.e2e_p99_ms <= 0:
        raise ConfigError(f"--steps must be 1 to {latency.SEARCH_STEPS_MAX} and --e2e-p99-ms positive")
    if args.brokers < 1 or args.replication_factor < 1:
        raise ConfigError("--brokers and --replication-factor must be at least 1")
    given = targets.Target(args.bootstrap_server, args.bootstrap_server, args.replication_factor)
    context: AbstractContextManager[targets.Target] = (
        targets.insync_cluster(args.brokers) if args.bootstrap_server is None else nullcontext(given))
    with context as target:
        target.ensure_topic(args.topic, 1)
        plan = latency.plan_for(target, args.topic, args.client, args.rate, args.seconds, args.warmup_seconds,
                                args.record_bytes, args.acks, args.linger_ms)
        if not args.find_max_rate:
            result = latency.run(target, plan)
            print(result.to_json())
            return 0 if result.errors == 0 else 1
        search = latency.find_max_rate(lambda rate: latency.run(target, replace(plan, rate=rate)), args.rate,
                                       args.e2e_p99_ms, args.steps)
    print(search.to_json())
    return 0


def _register_requests(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = commands.add_parser("requests", help="Produce requests per second a leader serves at one record per "
                                "request (acks=1 and acks=all, 3 brokers, RF 3, min ISR 2) and its time per request")
    bench.add_argument("--seconds", type=float, default=10.0, help="measured per acks setting (default 10)")
    bench.add_argument("--warmup-seconds", type=float, default=2.0)
    bench.add_argument("--inflight", type=int, default=16, help="requests kept on the wire (default 16)")
    bench.add_argument("--acks", default="both", choices=["1", "all", "both"])
    bench.add_argument("--profile", action="store_true",
                       help="then sample the leader with py-spy as long again: Python ms per request by category")
    bench.set_defaults(func=run_requests)


def run_requests(args: argparse.Namespace) -> int:
    if args.seconds < 1 or args.warmup_seconds < 0 or not 1 <= args.inflight <= requests.INFLIGHT_MAX:
        raise ConfigError(f"--seconds must be at least 1, --warmup-seconds not negative, --inflight 1 to "
                          f"{requests.INFLIGHT_MAX}")
    acks_list = {"1": [1], "all": [-1], "both": [1, -1]}[args.acks]
    with targets.insync_cluster(3) as target:
        topic = "insync-requests"
        target.ensure_topic(topic, 1)
        address, leader_pid = requests.leader_of(target, topic)
        for acks in acks_list:
            result = requests.run(address, topic, acks, leader_pid, target.pids,
                                  args.seconds, args.warmup_seconds, args.inflight, args.profile)
            print(result.to_json(), flush=True)
    return 0


def run_storage(args: argparse.Namespace) -> int:
    if args.seconds <= 0 or args.fetch_bytes <= 0:
        raise ConfigError("--seconds and --fetch-bytes must be positive")
    results = storage.run(seconds=args.seconds, directory=args.dir, fetch_bytes=args.fetch_bytes)
    if args.json:
        for result in results:
            print(json.dumps(result.as_dict()))
        return 0
    print(f"{'batch':>6} {'MB':>8} {'append MB/s':>12} {'write MB/s':>11} {'ratio':>6} "
          f"{'read MB/s':>10} {'plain MB/s':>11} {'ratio':>6}")
    for r in results:
        print(f"{r.batch:>6} {r.total_mb:>8.1f} {r.append_mb_s:>12.1f} {r.plain_write_mb_s:>11.1f} "
              f"{r.append_ratio:>6.2f} {r.read_mb_s:>10.1f} {r.plain_read_mb_s:>11.1f} {r.read_ratio:>6.2f}")
    return 0


def run_client(args: argparse.Namespace) -> int:
    if args.messages <= 0 or args.size < 16 or (args.rate is not None and args.rate <= 0):
        raise ConfigError("--messages must be positive, --size at least 16 and --rate positive")
    if args.mode == "produce":
        result = clients.produce(args.bootstrap_server, args.topic, args.messages, args.size, args.acks, args.rate)
    elif args.mode == "consume":
        result = clients.consume(args.bootstrap_server, args.topic, args.messages)
    else:
        result = clients.e2e(args.bootstrap_server, args.topic, args.messages, args.size, args.rate, args.acks)
    print(result.to_json())
    return 0 if result.errors == 0 else 1


def run_compare(args: argparse.Namespace) -> int:
    if args.seconds < latency.SECONDS_MIN or not 1 <= args.steps <= latency.SEARCH_STEPS_MAX:
        raise ConfigError(f"--seconds must be at least {latency.SECONDS_MIN:g} and --steps 1 to "
                          f"{latency.SEARCH_STEPS_MAX}")
    if args.peer != "tansu":
        kafka_cluster.parse_engine(args.peer)  # names a release insync can assemble, before anything starts
    only = frozenset(compare_bench.GROUPS if args.only is None else
                     (group.strip() for group in args.only.split(",") if group.strip()))
    unknown = sorted(only - frozenset(compare_bench.GROUPS))
    if unknown:
        raise ConfigError(f"--only takes {', '.join(compare_bench.GROUPS)}, not {', '.join(unknown)}")
    if args.scale is not None and args.scale < 1:
        raise ConfigError("--scale takes a number of partitions, 1 or more")
    if args.compaction_mb < 1:
        raise ConfigError("--compaction-mb takes a size in MB, 1 or more")
    result = compare_bench.compare(args.seconds, args.steps, peer=args.peer, scale_partitions=args.scale, only=only,
                                   compaction_mb=args.compaction_mb)
    print(json.dumps(result) if args.json else compare_bench.table(result))
    return 0


def run_spark_source(args: argparse.Namespace) -> int:
    if args.records <= 0 or args.size <= 0 or args.partitions <= 0 or not 0 < args.rounds <= 20:
        raise ConfigError("--records, --size and --partitions must be positive, --rounds 1 to 20")
    from insync.spark.session import build_session
    from insync.spark.source import bench as source_bench

    spark = build_session(args.master, app_name="insync-bench-source")
    try:
        result = source_bench.run(spark, args.bootstrap_server, records=args.records, size=args.size,
                                  partitions=args.partitions, rounds=args.rounds)
    finally:
        spark.stop()
    print(result.to_json())
    return 0
