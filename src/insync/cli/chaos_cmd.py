"""`insync chaos`: faults on demand against a cluster started by `insync cluster up --dir DIR`."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from insync.chaos import campaign, checker, cluster, kafka_cluster, nemesis, power, report, script
from insync.chaos.ops import read_history
from insync.cli import chaos_net_cmd, fuzz_cmd, seeds_cmd
from insync.config import ConfigError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("chaos", help="inject faults into a local cluster")
    commands = parser.add_subparsers(dest="chaos_command", metavar="ACTION")
    commands.required = True
    helps = {
        "pause": "SIGSTOP the broker (a GC pause that lasts until resume)",
        "resume": "SIGCONT the broker",
        "kill": "SIGKILL the broker",
        "restart": "start a killed or stopped broker again",
        "crash": "power loss: SIGKILL the node, drop what it wrote since each file's last fsync, restart it "
                 "(needs fault.injection.power.loss.enable=true)",
        "slow-reads": "every read of one partition's log takes --ms (KIP-501's slow leader)",
        "clear": "remove every injected fault from the broker",
        "fail-partition": "the broker's follower appends to one partition raise (KIP-461)",
        "delay": "add --ms of latency to the broker's replication requests",
    }
    for action in script.PROCESS_ACTIONS:
        sub = commands.add_parser(action, help=helps[action])
        sub.add_argument("broker", type=int)
        if action in ("slow-reads", "fail-partition"):
            if action == "fail-partition":
                sub.add_argument("topic")
                sub.add_argument("partition", type=int)
            else:
                sub.add_argument("--topic", required=True)
                sub.add_argument("--partition", type=int, required=True)
        if action in ("slow-reads", "delay"):
            sub.add_argument("--ms", type=int, required=True)
        sub.add_argument("--dir", required=True, help="cluster directory")
        sub.set_defaults(func=_one, action=action)
        if action == "crash":
            sub.add_argument("--torn-tail", action="store_true",
                             help="each cut file keeps a random prefix of what it lost (a half-made write)")
            sub.set_defaults(func=_crash)
    chaos_net_cmd.register(commands)
    run = commands.add_parser("run", help="play a timed TOML script of faults under a workload")
    run.add_argument("file")
    run.add_argument("--dir", required=True)
    run.add_argument("--json", action="store_true")
    run.set_defaults(func=_run)
    camp = commands.add_parser("campaign", help="runs of a Jepsen-style workload under faults drawn from a seed, "
                               "each on its own new cluster, checked for lost, duplicated and misread records")
    camp.add_argument("--runs", type=int, default=1)
    camp.add_argument("--seed", type=int, default=0, help="run r uses seed+r; --runs 1 --seed X replays seed X")
    camp.add_argument("--duration", type=float, default=60.0, help="seconds of workload per run")
    camp.add_argument("--faults", default="all", help=f"comma-separated kinds or all ({', '.join(nemesis.KINDS)}); "
                      "opt-in: " + ", ".join([*nemesis.OPT_IN_KINDS, *nemesis.LOG_DIR_KINDS, *nemesis.CLOCK_KINDS,
                                               *nemesis.TXN_KINDS]))
    camp.add_argument("--concurrent-faults", type=int, default=1, metavar="N",
                      help=f"up to N faults active at once (1 to {campaign.CONCURRENCY_MAX})")
    camp.add_argument("--rate", type=float, default=300.0, help="records per second over all producers")
    camp.add_argument("--zookeeper", action="store_true",
                      help="metadata.store=zookeeper with two controllers (one standby) and a ZooKeeper server per "
                      "run, so controller-kill and controller-pause hand over to the standby")
    camp.add_argument("--engine", default="insync", metavar="insync|kafka[:VERSION]",
                      help="the same runs on real Apache Kafka (see cluster up --engine): the same seed plans the "
                           "same schedule, and the faults only an insync node can inject into itself (slow-reads, "
                           "fail-partition, delay) are skipped where they fall")
    camp.add_argument("--txn", action="store_true",
                      help="a transactional producer too, and the transactional checks (aborted-read, "
                           "torn-transaction, lost-write, duplicate)")
    camp.add_argument("--out", default="chaos-campaign", help="directory for each run's history and report")
    camp.set_defaults(func=_campaign)
    check = commands.add_parser("check", help="check a campaign run's history.jsonl again (Jepsen's anomalies)")
    check.add_argument("history")
    check.add_argument("--show", type=int, default=20, help="anomalies to print")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=_check)
    seeds_cmd.register(commands)
    fuzz_cmd.register(commands)


def _one(args: argparse.Namespace) -> int:
    step = script.parse_step({"at_s": 0, "action": args.action, "broker": args.broker,
                              **{k: getattr(args, k) for k in ("topic", "partition", "ms")
                                 if getattr(args, k, None) is not None}}, 0)
    script.apply(cluster.ClusterSpec.load(args.dir), step)
    print(f"{args.action} broker {args.broker}: done")
    return 0


def _crash(args: argparse.Namespace) -> int:
    _spec, cut = power.crash(cluster.ClusterSpec.load(args.dir), args.broker, torn_tail=args.torn_tail)
    print(f"crash broker {args.broker}: killed, cut {cut.files_cut} files ({cut.bytes_lost} bytes not fsynced), "
          "restarted")
    return 0


def _run(args: argparse.Namespace) -> int:
    plan = script.load_script(args.file)
    verdict = script.run_script(cluster.ClusterSpec.load(args.dir), plan,
                                log=(lambda _line: None) if args.json else print)
    if args.json:
        print(json.dumps({**{k: getattr(verdict, k) for k in verdict.__slots__}, "ok": verdict.ok}))
    else:
        print(f"sent {verdict.sent}, acknowledged {verdict.acked}, read back {verdict.read}, failed "
              f"{sum(verdict.failed.values())} {verdict.failed or ''}")
        print(f"lost {verdict.lost}, duplicated {verdict.duplicated}, reordered {verdict.reordered}: "
              f"{'OK' if verdict.ok else 'VIOLATION'}")
    return 0 if verdict.ok else 1


def _campaign(args: argparse.Namespace) -> int:
    engine = kafka_cluster.parse_engine(args.engine)
    kinds = nemesis.parse_kinds(args.faults)
    if args.runs < 1 or args.duration <= campaign.WARMUP_S + campaign.COOLDOWN_S or args.rate <= 0:
        raise ConfigError(f"--runs must be at least 1 (got {args.runs}), --duration over "
                          f"{campaign.WARMUP_S + campaign.COOLDOWN_S:g} s (got {args.duration:g}) and --rate "
                          f"positive (got {args.rate:g})")
    if not 1 <= args.concurrent_faults <= campaign.CONCURRENCY_MAX:
        raise ConfigError(f"--concurrent-faults must be 1 to {campaign.CONCURRENCY_MAX}, got {args.concurrent_faults}")
    plans = campaign.plan_campaign(args.runs, args.seed, args.duration, kinds, args.concurrent_faults,
                                   args.zookeeper, engine, args.txn)
    done: list[campaign.RunResult] = []

    def each(result: campaign.RunResult) -> None:
        done.append(result)
        print(f"run {result.plan.run} (seed {result.plan.seed}, {result.elapsed_s:.0f} s): "
              f"{'; '.join(f for f, _, _ in result.check.faults) or 'no fault'} -> {result.directory}/report.html",
              flush=True)
        if result.skipped:
            print(f"  skipped on {result.plan.engine}: {', '.join(result.skipped)}")
        for error in result.client_errors:
            print(f"  client error: {error}")
        if result.error:
            print(f"  harness error, run not ok: {result.error}")

    started = time.monotonic()
    campaign.run_campaign(plans, Path(args.out), args.rate, each)
    print("\n".join(report.table([(r.plan.run, r.plan.seed, r.check, r.error) for r in done])))
    print(f"{len(done)} runs in {time.monotonic() - started:.0f} s; totals in {Path(args.out) / 'campaign.json'} and index.html")
    return 0 if all(r.ok for r in done) else 1


def _check(args: argparse.Namespace) -> int:
    result = checker.check(read_history(args.history))
    if args.json:
        print(json.dumps({"ok": result.ok, "forbidden": len(result.forbidden), "sends": result.sends,
                          "transactions": result.transactions,
                          "reads": result.reads, "anomalies": result.counts,
                          "anomalies_by_label": result.counts_by_label(),
                          "examples": result.examples(report.ANOMALIES_SHOWN)}))
        return 0 if result.ok else 1
    print(f"sends {result.sends}, records read {result.reads}, complete reads of {list(result.complete_partitions)}"
          + (f", transactions {result.transactions}" if result.transactions else ""))
    for label, kinds in result.counts_by_label().items():
        print(f"  {label}: {', '.join(f'{k} {n}' for k, n in kinds.items())}")
    for anomaly in result.anomalies[:args.show]:
        mark = "FORBIDDEN" if anomaly.forbidden else "allowed"
        print(f"  {mark} {anomaly.kind} {anomaly.detail} {list(anomaly.values)[:4]} "
              f"faults: {'; '.join(anomaly.faults) or '-'}")
    print("OK" if result.ok else f"{len(result.forbidden)} forbidden anomalies")
    return 0 if result.ok else 1
