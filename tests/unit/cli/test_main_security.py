"""`insync certs create`, `--command-config` and `cluster up --security`'s layout, without a cluster."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from insync import command_config
from insync.chaos import certs, cluster
from insync.cli.main import build_parser, main
from insync.config import BrokerConfig


def test_certs_create_makes_a_ca_node_and_client_certificates_signed_by_it(tmp_path: Path) -> None:
    from cryptography import x509

    assert main(["certs", "create", "--dir", str(tmp_path), "--client", "alice", "--client", "bob"]) == 0
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.pem").read_bytes())
    for name in ("node", "alice", "bob"):
        certificate = x509.load_pem_x509_certificate((tmp_path / f"{name}.pem").read_bytes())
        certificate.verify_directly_issued_by(ca)  # raises when the CA did not sign it
        assert certificate.subject.rfc4514_string() == f"CN={name},O=insync"
    node = x509.load_pem_x509_certificate((tmp_path / "node.pem").read_bytes())
    names = node.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert (tmp_path / "alice-key.pem").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(("argv", "message"), [
    (["--client", "node"], "client name 'node'"),
    (["--client", "a/b"], "client name 'a/b'"),
    (["--days", "0"], "--days must be between 1 and 36500"),
])
def test_certs_create_refuses_bad_input(tmp_path: Path, argv: list[str], message: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "create", "--dir", str(tmp_path), *argv]) == 1
    assert message in capsys.readouterr().err


def test_every_command_that_talks_to_a_cluster_takes_command_config() -> None:
    parser = build_parser()
    for argv in (["topics", "list"], ["groups", "list"], ["produce", "--topic", "t"], ["cluster", "status",
                 "--dir", "d"], ["configs", "--describe", "--entity-type", "brokers", "--entity-default"]):
        assert parser.parse_known_args([*argv, "--command-config", "f"])[0].command_config == "f", argv


def test_command_config_is_read_and_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n")
    assert command_config.load(path)["sasl.mechanism"] == "PLAIN"
    path.write_text("security.protocol=TLS\n")
    with pytest.raises(ValueError, match=f"--command-config {path}: security.protocol=TLS is not one of"):
        command_config.load(path)
    with pytest.raises(ValueError, match="cannot read --command-config"):
        command_config.load(tmp_path / "missing")
    assert main(["topics", "list", "--command-config", str(tmp_path / "missing")]) == 1


def test_command_config_settings_reach_clients_and_give_a_tls_context(tmp_path: Path) -> None:
    files = certs.create(tmp_path)
    try:
        command_config.use({"security.protocol": "SSL", "ssl.ca.location": str(files.ca)})
        assert command_config.confluent({"bootstrap.servers": "b"})["security.protocol"] == "SSL"
        context = command_config.ssl_context()
        assert isinstance(context, ssl.SSLContext) and context.check_hostname
    finally:
        command_config.use({})
    assert command_config.ssl_context() is None and command_config.confluent({}) == {}


def test_a_ssl_cluster_layout_secures_every_listener_and_writes_client_properties(tmp_path: Path) -> None:
    spec = cluster.layout(tmp_path, 2, 0, [], security="ssl")
    controller = BrokerConfig.from_sources(spec.controller.config_path)
    broker = BrokerConfig.from_sources(spec.brokers[0].config_path)
    assert controller.get_str("controller.listener").startswith("CONTROLLER://")  # type: ignore[union-attr]
    assert broker.get_list("listeners")[0].startswith("SSL://")
    assert broker.get_str("ssl.client.auth") == "required"
    assert broker.get_str("super.users") == "User:node;User:admin"
    assert "CONTROLLER:SSL" in broker.get_list("listener.security.protocol.map")
    assert command_config.load(Path(spec.directory) / "client.properties")["security.protocol"] == "SSL"
    assert cluster.ClusterSpec.load(spec.directory).client_settings()["ssl.key.location"].endswith("admin-key.pem")


def test_a_sasl_plaintext_cluster_layout_has_plain_users_and_no_tls(tmp_path: Path) -> None:
    spec = cluster.layout(tmp_path, 1, 0, [], security="sasl_plaintext")
    broker = BrokerConfig.from_sources(spec.brokers[0].config_path)
    assert broker.get_list("listeners")[0].startswith("SASL_PLAINTEXT://")
    jaas = broker.get_str("listener.name.controller.plain.sasl.jaas.config") or ""
    settings = spec.client_settings()
    assert f'user_admin="{settings["sasl.password"]}"' in jaas and 'username="node"' in jaas
    assert settings["security.protocol"] == "SASL_PLAINTEXT" and "ssl.ca.location" not in settings
    assert not (tmp_path / "certs").exists()
    # the files that hold the passwords are the owner's alone
    for path in (spec.brokers[0].config_path, tmp_path / "cluster.json", tmp_path / "client.properties"):
        assert path.stat().st_mode & 0o077 == 0, path
    with pytest.raises(ValueError, match="--security must be one of"):
        cluster.layout(tmp_path / "x", 1, 0, [], security="tls")


def test_bench_security_refuses_bad_sizes_before_starting_anything(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "security", "--brokers", "0"]) == 1
    assert "--brokers and --messages must be at least 1" in capsys.readouterr().err


def test_a_command_given_a_secured_clusters_dir_uses_its_client_settings(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = cluster.layout(tmp_path, 1, 0, [], security="ssl")
    seen: list[dict[str, str]] = []
    monkeypatch.setattr("insync.cli.cluster_cmd.describe_rows",
                        lambda _bootstrap: seen.append(command_config.current()) or [])
    assert main(["cluster", "status", "--dir", spec.directory]) == 0
    assert seen[0]["security.protocol"] == "SSL" and seen[0]["ssl.key.location"].endswith("admin-key.pem")
    assert command_config.current() == {}  # the command's settings end with it


def test_certs_create_on_a_directory_with_a_ca_keeps_it_and_adds_clients(tmp_path: Path) -> None:
    from cryptography import x509

    first = certs.create(tmp_path, clients=("alice",))
    ca, node = first.ca.read_bytes(), first.node.read_bytes()
    certs.create(tmp_path, clients=("bob",))
    assert (first.ca.read_bytes(), first.node.read_bytes()) == (ca, node)
    bob = x509.load_pem_x509_certificate(first.client("bob")[0].read_bytes())
    bob.verify_directly_issued_by(x509.load_pem_x509_certificate(ca))
