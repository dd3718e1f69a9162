"""`insync bench storage`: storage throughput beside plain file I/O (logic in `insync.bench.storage`)."""

from __future__ import annotations

import argparse
import json

from insync.bench import storage


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


def run_storage(args: argparse.Namespace) -> int:
    if args.seconds <= 0 or args.fetch_bytes <= 0:
        raise argparse.ArgumentTypeError("--seconds and --fetch-bytes must be positive")
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
