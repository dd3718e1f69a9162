"""`insync sim run SCENARIO` and `insync sim sweep SCENARIO --seeds N`: the deterministic simulator from the shell.

`run` prints a readable table (or the full JSON result with `--json`) and exits 1 when an invariant or an
expectation of the scenario failed, printing the seed and the command that reproduces the run.
`sweep` runs seeds 0..N-1 (or from `--first-seed`) over `--jobs` processes (default: every local core) and
prints one line per failing seed plus a summary; it exits 1 when any seed failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from insync.cli.logs import quiet_logs
from insync.config import ConfigError
from insync.properties import parse_overrides
from insync.sim.run import run_scenario
from insync.sim.scenario import load_scenario, scenario_names
from insync.sim.sweep import local_processes, sweep


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("sim", help="deterministic simulation of a cluster under faults")
    commands = parser.add_subparsers(dest="sim_command", metavar="SUBCOMMAND")
    commands.required = True

    run = commands.add_parser("run", help="run one scenario with one seed")
    _common(run)
    run.add_argument("--seed", type=int, default=None, help="seed (default: the scenario's own)")
    run.add_argument("--json", action="store_true", help="print the full result as JSON")
    run.add_argument("--no-events", action="store_true", help="leave the event list out of the JSON")
    run.add_argument("--verbose", action="store_true", help="show the brokers' log lines (Kafka's wording)")
    run.set_defaults(func=_run)

    sweep_parser = commands.add_parser("sweep", help="run one scenario over many seeds in parallel")
    _common(sweep_parser)
    sweep_parser.add_argument("--seeds", type=int, required=True, help="how many seeds")
    sweep_parser.add_argument("--first-seed", type=int, default=0)
    sweep_parser.add_argument("--jobs", type=int, default=None, help="processes (default: all cores)")
    sweep_parser.add_argument("--json", action="store_true", help="print a JSON summary")
    sweep_parser.add_argument("--spark", action="store_true", help="one Spark task per seed instead of processes")
    sweep_parser.add_argument("--master", default="local[*]", help="Spark master with --spark (default local[*])")
    sweep_parser.set_defaults(func=_sweep)

    listing = commands.add_parser("list", help="list the packaged scenarios")
    listing.set_defaults(func=_list)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", help="a packaged scenario name or a .toml file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a scenario value by dotted path (repeatable)")


def _run(args: argparse.Namespace) -> int:
    quiet_logs(logging.INFO if args.verbose else logging.CRITICAL)
    if args.verbose:
        logging.basicConfig(format="%(message)s", stream=sys.stderr)
    overrides = parse_overrides(args.overrides)
    scenario = load_scenario(args.scenario, overrides, seed=args.seed)
    result = run_scenario(scenario, overrides)
    if args.json:
        json.dump(result.to_dict(with_events=not args.no_events), sys.stdout, indent=1)
        print()
    else:
        print(result.table())
    if not result.ok:
        print(f"FAILED seed {result.seed}; reproduce with: {result.reproduce_command()}", file=sys.stderr)
        return 1
    return 0


def _sweep(args: argparse.Namespace) -> int:
    quiet_logs(logging.CRITICAL)
    overrides = parse_overrides(args.overrides)
    load_scenario(args.scenario, overrides)  # fail fast on a bad name or override, before forking
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    if args.seeds <= 0:
        raise ConfigError(f"--seeds must be positive, got {args.seeds}")
    if args.spark:
        from insync.spark.sweep import spark_tasks  # pyspark only when asked for

        summary = sweep(args.scenario, overrides, seeds, spark_tasks(args.master))
    else:
        summary = sweep(args.scenario, overrides, seeds, local_processes(args.jobs))
    if args.json:
        json.dump(summary.to_dict(), sys.stdout, indent=1)
        print()
    else:
        print(summary.table())
    for failure in summary.failures:
        print(f"FAILED seed {failure['seed']}; reproduce with: {failure['reproduce']}", file=sys.stderr)
    return 1 if summary.failures else 0


def _list(args: argparse.Namespace) -> int:
    for name in scenario_names():
        print(name)
    return 0
