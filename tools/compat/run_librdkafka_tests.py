"""librdkafka's own integration tests against a 3-broker insync cluster on 127.0.0.1 (`make compat`).

Every broker-facing test of librdkafka's test table (tests/test.c: not TEST_F_LOCAL, not TEST_F_MANUAL) that the
allowlist does not exclude runs in its own `TESTS=<name> ./test-runner -p1 -Q -L`, with a timeout, several at once
(`--jobs`), against a cluster started by `insync cluster up` (restarted between tests if a node died).
test-runner selects by test number, so the tests sharing a number run together each time (0045's five); each
test's status is read from its own row of test-runner's summary. The tests that emulate network trouble in the client (TEST_F_SOCKEM: librdkafka's socket
emulation delays and cuts its own connections) run too, since they need nothing of the broker but Kafka's
behaviour. A test names the broker setup it needs (`.scenario`, tests/scenarios/*.json): the "default" ones run
first, on a cluster creating topics on first use; then the cluster is replaced by one that does not
("noautocreate") for the tests that need that. A test reported SKIPPED (a broker version gate, a known issue,
quick mode) counts as skipped, as do the allowlisted ones. The last line is `N passed, N failed, N skipped`; the
exit status is 1 when any test failed.

Usage: run_librdkafka_tests.py TESTS_DIR [--allowlist FILE] [--only NAME ...] [--timeout-s S] [--kafka-version V]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from insync.chaos import cluster

HERE = Path(__file__).resolve().parent
DEFAULT_ALLOWLIST = HERE / "librdkafka-allowlist.txt"
KAFKA_VERSION = "4.0.0"  # the Kafka whose API versions insync advertises (docs/compatibility.md, the APIs insync serves)
# Five at a time: most tests wait on timeouts and rebalances, so five beat three and two on two cores
# (docs/compatibility.md).
JOBS = 5
TEST_TIMEOUT_S = 150.0  # above the longest test-runner timeout a listed test sets in quick mode
CLUSTER_UP_TIMEOUT_S = 120.0
OUTPUT_TAIL_LINES = 15  # of a failed test's output, printed for the reader
# Settings every node gets, beyond what `insync cluster up` sets (auto-created topics replicated min(3, brokers)
# times), per librdkafka test scenario (tests/scenarios/<name>.json: auto_create_topics, num_partitions 4,
# replication_factor 3), which tests rely on (0012 produces to partitions 0 and 1 of an auto-created topic). The
# initial rebalance delay is 1 s, not Kafka's 3 s (every consumer-group test waits it out once per group), and not
# 0: tests that start two consumers at once expect them in the group's first generation (0118_commit_rebalance
# expects its second consumer's revocation to come from its close, not from the first one joining late).
COMMON_CONFIG = ("num.partitions=4", "group.initial.rebalance.delay.ms=1000")
SCENARIO_CONFIG = {
    "default": ("auto.create.topics.enable=true", *COMMON_CONFIG),
    "noautocreate": ("auto.create.topics.enable=false", *COMMON_CONFIG),
}
# test.timeout.multiplier per test, where a test's own time limit is shorter than what librdkafka itself spends:
# 0059_bsearch seeks about 10 times with queued.min.messages=1, and each seek waits out the client's 1 s
# fetch.queue.backoff.ms (the previous fetch filled its queue) against a 10 s limit, whatever the broker.
TIMEOUT_MULTIPLIERS = {"0059_bsearch": 2.0}

_TEST_ENTRY = re.compile(r"^\s*_TEST\(\s*(\w+)\s*,\s*([^,)]*)(.*?)(?=^\s*_TEST\(|\Z)", re.MULTILINE | re.DOTALL)
_SCENARIO = re.compile(r'\.scenario\s*=\s*"([^"]*)"')
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SUMMARY_ROW = re.compile(r"^\|\s*(\w+)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|NOT STARTED)\s*\|", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Outcome:
    name: str
    status: str  # PASSED | FAILED | SKIPPED
    detail: str
    seconds: float


def broker_tests(tests_dir: Path) -> dict[str, str]:
    """The names of test.c's table entries that need a broker, in table order, and the scenario each runs in."""
    table = (tests_dir / "test.c").read_text(errors="replace")
    table = table[table.index("struct test tests[]"):]
    return {name: _scenario(rest) for name, flags, rest in _TEST_ENTRY.findall(table)
            if "TEST_F_LOCAL" not in flags and "TEST_F_MANUAL" not in flags}


def _scenario(entry: str) -> str:
    """test-runner runs a test when its scenario list contains the one it runs ("default" unless named)."""
    found = _SCENARIO.search(entry)
    scenarios = found.group(1).split(",") if found else ["default"]
    return "default" if "default" in scenarios else scenarios[0]


def read_allowlist(path: Path) -> dict[str, str]:
    """Test name -> why it is excluded; one `NNNN_name  reason` a line, `#` comments."""
    excluded: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
        if line:
            name, _, reason = line.partition(" ")
            excluded[name] = reason.strip()
    return excluded


def start_cluster(directory: Path, scenario: str) -> cluster.ClusterSpec:
    overrides = [arg for setting in SCENARIO_CONFIG[scenario] for arg in ("--config", setting)]
    subprocess.run([sys.executable, "-m", "insync.cli.main", "cluster", "up", "--dir", str(directory), "--brokers",
                    "3", "--port", "0", *overrides], check=True, timeout=CLUSTER_UP_TIMEOUT_S,
                   stdout=subprocess.DEVNULL)
    return cluster.ClusterSpec.load(directory)


def stop_cluster(directory: Path) -> None:
    subprocess.run([sys.executable, "-m", "insync.cli.main", "cluster", "down", "--dir", str(directory)],
                   check=False, timeout=CLUSTER_UP_TIMEOUT_S, stdout=subprocess.DEVNULL)
    shutil.rmtree(directory, ignore_errors=True)


def cluster_alive(directory: Path) -> bool:
    spec = cluster.ClusterSpec.load(directory)
    return all(node.pid is not None and cluster.pid_alive(node.pid) for node in spec.nodes)


@dataclass(frozen=True, slots=True)
class Target:
    """Where a test runs: the cluster's bootstrap servers and librdkafka's name for its setup."""

    bootstrap: str
    scenario: str


def kafka_path(work: Path) -> Path | None:
    """A directory laid out as a Kafka release for librdkafka's Java test programs (tests/java, run through
    `$KAFKA_PATH/bin/kafka-run-class.sh` with its classes on CLASSPATH, built against `$KAFKA_PATH/libs`): the
    jars `make kafka` assembled from Maven Central, and a kafka-run-class.sh that runs java on them. None when
    Kafka was not assembled (the tests that need it then report their own warning and fail)."""
    from insync.chaos import kafka_dist

    dist = kafka_dist.assembled("4.1")
    if dist is None:
        return None
    home = work / "kafka-path"
    (home / "bin").mkdir(parents=True, exist_ok=True)
    if not (home / "libs").exists():
        (home / "libs").symlink_to(dist.libs)
    script = home / "bin" / "kafka-run-class.sh"
    script.write_text('#!/bin/sh\nexec java -Xmx256m -cp "$CLASSPATH:$(dirname "$0")/../libs/*" "$@"\n')
    script.chmod(0o755)
    return home


def run_test(tests_dir: Path, name: str, target: Target, work: Path, kafka_version: str, timeout_s: float,
             java_home: Path | None) -> Outcome:
    conf = work / f"{name}.conf"
    multiplier = TIMEOUT_MULTIPLIERS.get(name)
    conf.write_text(f"bootstrap.servers={target.bootstrap}\ntest.topic.random=true\n"
                    + (f"test.timeout.multiplier={multiplier}\n" if multiplier else ""))
    # The librdkafka just built, not a system one (kcat's): test-runner links it dynamically.
    libraries = f"{tests_dir.parent / 'src'}:{tests_dir.parent / 'src-cpp'}"
    env = {**os.environ, "TESTS": name, "RDKAFKA_TEST_CONF": str(conf), "TEST_KAFKA_VERSION": kafka_version,
           "TEST_SCENARIO": target.scenario, "LD_LIBRARY_PATH": libraries}
    if java_home is not None:
        env["KAFKA_PATH"] = str(java_home)
    started = time.monotonic()
    try:
        done = subprocess.run(["./test-runner", "-p1", "-Q", "-L"], cwd=tests_dir, env=env, timeout=timeout_s,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as expired:
        output = _ANSI.sub("", (expired.stdout or b"").decode(errors="replace"))
        return Outcome(name, "FAILED", f"timed out after {timeout_s:.0f} s\n{_tail(output)}", time.monotonic() - started)
    output = _ANSI.sub("", done.stdout.decode(errors="replace"))
    rows = dict(_SUMMARY_ROW.findall(output))
    status = rows.get(name, "SKIPPED" if done.returncode == 0 else "FAILED")
    if status not in ("PASSED", "SKIPPED"):
        status = "FAILED"
    detail = _tail(output) if status == "FAILED" else ""
    return Outcome(name, status, detail, time.monotonic() - started)


def run_scenario(tests_dir: Path, scenario: str, names: list[str], work: Path, args: argparse.Namespace
                 ) -> list[Outcome]:
    """`names` on a cluster set up for `scenario`, started here and stopped after, `args.jobs` at a time (each test
    uses topics and groups of its own, as librdkafka's test-runner, which runs several at once, expects)."""
    directory = work / f"cluster-{scenario}"
    outcomes: list[Outcome] = []
    java_home = kafka_path(work)
    running: dict[concurrent.futures.Future[Outcome], str] = {}

    def report(done: Iterable[concurrent.futures.Future[Outcome]]) -> None:
        for future in done:
            outcome = future.result()
            del running[future]
            outcomes.append(outcome)
            print(f"{outcome.status:<7} {outcome.name} ({outcome.seconds:.1f} s)", flush=True)
            if outcome.detail:
                print(outcome.detail, flush=True)

    try:
        target = Target(start_cluster(directory, scenario).bootstrap, scenario)
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for name in names:
                if len(running) >= args.jobs:
                    report(concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED).done)
                if not cluster_alive(directory):
                    report(concurrent.futures.wait(running).done)  # none may run on the cluster being replaced
                    print(f"a node died before {name}: restarting the cluster", flush=True)
                    stop_cluster(directory)
                    target = Target(start_cluster(directory, scenario).bootstrap, scenario)
                running[pool.submit(run_test, tests_dir, name, target, work, args.kafka_version, args.timeout_s,
                                    java_home)] = name
            report(concurrent.futures.wait(running).done)
    finally:
        stop_cluster(directory)
    return outcomes


def _tail(output: str) -> str:
    return "\n".join("    " + line for line in output.splitlines()[-OUTPUT_TAIL_LINES:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tests_dir", type=Path)
    parser.add_argument("--allowlist", type=Path, default=DEFAULT_ALLOWLIST)
    parser.add_argument("--only", nargs="*", default=None, help="run just these tests (names or number prefixes)")
    parser.add_argument("--timeout-s", type=float, default=TEST_TIMEOUT_S)
    parser.add_argument("--kafka-version", default=KAFKA_VERSION)
    parser.add_argument("--jobs", type=int, default=JOBS, help="tests run at once against the cluster")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")

    excluded = read_allowlist(args.allowlist)
    scenarios = broker_tests(args.tests_dir)
    names = list(scenarios)
    if args.only:
        names = [n for n in names if any(n.startswith(prefix) for prefix in args.only)]
    to_run = [n for n in names if n not in excluded]
    unknown = sorted({scenarios[n] for n in to_run} - set(SCENARIO_CONFIG))
    assert not unknown, f"tests in scenarios this runner cannot set up: {unknown}"
    print(f"{len(names)} broker-facing tests, {len(names) - len(to_run)} excluded by {args.allowlist.name}, "
          f"{len(to_run)} to run", flush=True)
    work = Path(tempfile.mkdtemp(prefix="insync-compat-"))
    outcomes: list[Outcome] = []
    try:
        for scenario in SCENARIO_CONFIG:
            in_scenario = [n for n in to_run if scenarios[n] == scenario]
            if in_scenario:
                outcomes.extend(run_scenario(args.tests_dir, scenario, in_scenario, work, args))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    passed = sum(o.status == "PASSED" for o in outcomes)
    failed = [o.name for o in outcomes if o.status == "FAILED"]
    skipped = len(names) - passed - len(failed)
    if failed:
        print("failed: " + " ".join(failed))
    print(f"{passed} passed, {len(failed)} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
