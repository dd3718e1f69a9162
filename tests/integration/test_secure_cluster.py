"""`insync cluster up --security sasl_ssl` (issue 22), with ACLs on: every listener SASL over TLS, brokers
authenticating to each other and to the controller as `node`, both it and the operator `admin` super users; the operator's DIR/client.properties works unchanged with
confluent-kafka, `kcat -F` and insync's own commands (`--command-config`), and a client without credentials is
refused; the nodes' own __insync_events producers authenticate as `node`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import FAST, wait_until
from insync import command_config
from insync.admin import describe_rows, ensure_topic
from insync.chaos import cluster
from insync.cli.main import main
from insync.security_config import STANDARD_AUTHORIZER

pytestmark = pytest.mark.timeout(150)


def test_a_sasl_ssl_cluster_serves_its_operator_and_refuses_anonymous(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    acls_on = f"authorizer.class.name={STANDARD_AUTHORIZER}"  # the nodes and the operator are super users
    spec = cluster.up(str(tmp_path / "c"), 2, 0, [*FAST, "insync.events.topic.enable=true", acls_on],
                      security="sasl_ssl")
    try:
        properties = Path(spec.directory) / "client.properties"
        settings = spec.client_settings()
        assert settings["security.protocol"] == "SASL_SSL" and settings["sasl.username"] == "admin"
        assert properties.stat().st_mode & 0o777 == 0o600
        command_config.use(settings)
        ensure_topic(spec.bootstrap, "secure", 2, 2, {"min.insync.replicas": "2"})
        assert [len(r.isr) for r in describe_rows(spec.bootstrap, ["secure"])] == [2, 2]  # replicated over SASL_SSL
        producer = Producer({**settings, "bootstrap.servers": spec.bootstrap, "acks": "all"})
        for i in range(100):
            producer.produce("secure", f"m-{i}".encode())
        assert producer.flush(30) == 0
        read = subprocess.run(["kcat", "-F", str(properties), "-b", spec.bootstrap, "-C", "-t", "secure", "-e", "-q"],
                              check=True, timeout=60, capture_output=True).stdout.split()
        assert sorted(read) == sorted(f"m-{i}".encode() for i in range(100))
        command_config.use({})
        assert main(["topics", "describe", "--bootstrap-server", spec.bootstrap, "--command-config",
                     str(properties)]) == 0
        assert "Topic: secure" in capsys.readouterr().out
        # The nodes' own producers of __insync_events authenticate too (as node, over TLS).
        wait_until(lambda: subprocess.run(
            ["kcat", "-F", str(properties), "-b", spec.bootstrap, "-C", "-t", "__insync_events", "-e", "-q", "-c", "1"],
            timeout=30, capture_output=True).stdout.startswith(b"{"), 40, "events published over SASL_SSL")
        with pytest.raises(Exception):  # noqa: B017 - no credentials: confluent-kafka's KafkaException
            AdminClient({"bootstrap.servers": spec.bootstrap, "security.protocol": "SSL",
                         "ssl.ca.location": settings["ssl.ca.location"]}).list_topics(timeout=3)
    finally:
        command_config.use({})
        cluster.down(cluster.ClusterSpec.load(spec.directory), 10.0)
