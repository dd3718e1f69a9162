"""`insync chaos seeds`: each seed scenario in the simulator and on a real cluster, figures side by side.

For every named seed (all by default; `insync.chaos.seeds.SEEDS`) the simulator runs its scenario, then a real
3-process cluster plays the same faults in lag times of its own (seconds, not minutes), and the table shows
both runs' figures and whether each satisfied the seed's claims; a seed that needs network namespaces has no
real run where they cannot be made (not root, no iproute2/nftables), and says why. `--sim-only` skips the real
clusters; `--markdown` prints the table as docs/benchmarks.md has it. `--engine kafka:VERSION` (repeatable, beside
`insync`, the default) plays the same faults on a real Apache Kafka cluster too, every seed whose faults can be made
from outside a Kafka process (the others say why). Exit status 1 when any claim failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

from insync.chaos import kafka_cluster, netns, seed_table, seeds, seeds_kafka, seeds_run
from insync.chaos.seed_model import RealSeed, SeedRun
from insync.cli.logs import client_log, quiet_logs
from insync.config import ConfigError


def register(commands: Any) -> None:
    sub = commands.add_parser("seeds", help="the seed scenarios in the simulator and on a real cluster, side by side",
                              description=__doc__.split("\n\n")[1] if __doc__ else None)
    sub.add_argument("names", nargs="*", metavar="SCENARIO",
                     help=f"which (default all): {', '.join(s.name for s in seeds.SEEDS)}")
    sub.add_argument("--dir", help="where the real clusters live (default: a new temporary directory)")
    sub.add_argument("--sim-only", action="store_true", help="only the simulator's runs")
    sub.add_argument("--markdown", action="store_true", help="print the table in Markdown")
    sub.add_argument("--json", action="store_true", help="print the rows as JSON")
    sub.add_argument("--engine", action="append", metavar="ENGINE",
                     help="insync (the default) or kafka:VERSION; repeat for several, e.g. --engine kafka:3.9 "
                          "--engine kafka:4.1 --engine insync")
    sub.set_defaults(func=_seeds)


def _seeds(args: argparse.Namespace) -> int:
    quiet_logs(logging.CRITICAL)  # the simulated brokers' log lines: the table says it all
    chosen = [seeds.seed_named(name) for name in args.names] or list(seeds.SEEDS)
    engines = [kafka_cluster.parse_engine(engine) for engine in args.engine or [kafka_cluster.ENGINE_INSYNC]]
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="insync-seeds-"))
    root.mkdir(parents=True, exist_ok=True)
    rows, ok, failed = [], True, list[str]()
    with client_log(root / "clients.log"):
        for seed in chosen:
            print(f"{seed.name}: {seed.description}", file=sys.stderr)
            runs = [seeds_run.run_sim(seed)]
            unavailable = netns.unavailable() if seed.namespaces and not args.sim_only else None
            if unavailable:
                print(f"{seed.name}: no real run, {unavailable}", file=sys.stderr)
            elif not args.sim_only:
                runs.extend(_real_runs(seed, engines, root, failed))
            for run in runs:
                failures = seed.check(run)
                ok = ok and not failures
                rows.append(seed_table.figures(seed.name, run, failures))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(seed_table.render(rows, args.markdown))
        if not args.sim_only:
            print(f"real clusters' logs and events under {root}")
    if failed:
        print(f"runs that failed (see above): {', '.join(failed)}", file=sys.stderr)
    return 0 if ok and not failed else 1


def _real_runs(seed: RealSeed, engines: list[str], root: Path, failed: list[str]) -> list[SeedRun]:
    """`seed` on each engine that can make its faults, in its own directory; a run that fails is named in
    `failed`."""
    runs = []
    for engine in engines:
        why = None if engine == kafka_cluster.ENGINE_INSYNC else seeds_kafka.unavailable(
            seed, kafka_cluster.dist_for(engine).kraft_only)
        if why:
            print(f"{seed.name}: no run on {engine}, {why}", file=sys.stderr)
            continue
        where = root / (seed.name if engine == kafka_cluster.ENGINE_INSYNC
                        else f"{seed.name}-{engine.replace(':', '-')}")
        try:
            runs.append(seeds_run.run_real(seed, where, engine=engine))
        except ConfigError as e:  # a setting the engine refuses: that engine's row is missing, the others stand
            print(f"{seed.name}: no run on {engine}, {e}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - one run's failure is that run's row; the table goes on
            print(f"{seed.name}: the run on {engine} failed: {type(e).__name__}: {e}", file=sys.stderr)
            failed.append(f"{seed.name} on {engine}")
    return runs
