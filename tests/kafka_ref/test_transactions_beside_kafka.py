"""The same transactional workload (txn_workload.py) on a 3-broker Kafka 4.1 cluster and then a 3-broker insync
cluster (replication factor 3, min ISR 2): what the clients see of it compared exchange by exchange, the records a
read_committed and a read_uncommitted consumer read (offsets included, so the markers' gaps too), the last stable
offset while a transaction is open, fencing, and the errors of misuse. Every difference is fixed or listed in
transactions_differences.toml with its reason; the report goes to build/compat/transactions.md."""

from __future__ import annotations

from pathlib import Path

import pytest
import txn_workload
from differential import check_listed, differences, listed
from reference import start_kafka

from insync.chaos import cluster

pytestmark = pytest.mark.timeout(900)
REPORT = Path(__file__).resolve().parents[2] / "build" / "compat" / "transactions.md"
LISTED = listed(Path(__file__).parent / "transactions_differences.toml")


def _findings(directory: Path, engine: str) -> txn_workload.Findings:
    spec = start_kafka(directory, "4.1") if engine == "kafka" else cluster.up(str(directory), 3, 0, [])
    try:
        return txn_workload.run(spec)
    finally:
        cluster.down(cluster.ClusterSpec.load(spec.directory), 20.0)


def test_clients_see_the_same_transactions_on_kafka_and_insync(tmp_path: Path) -> None:
    kafka = _findings(tmp_path / "kafka", "kafka")  # one cluster at a time: the machine is small
    insync = _findings(tmp_path / "insync", "insync")
    names = sorted(kafka.keys() | insync.keys())
    rows = [(name, list(differences(kafka.get(name, "<absent>"), insync.get(name, "<absent>")))) for name in names]
    check_listed(rows, LISTED, REPORT, "Transactions beside Kafka 4.1")
    committed = kafka["consumer read_committed: every record of tx"]
    assert not any("zombie" in value or value.startswith("r1-") for _, _, value in committed), committed
    assert sum(value.startswith("open-") for _, _, value in committed) == 4
