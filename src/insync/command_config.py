"""Client settings of insync's own commands, as Kafka's tools take them: `--command-config FILE`.

The file is a properties file in librdkafka's names (`security.protocol`, `ssl.ca.location`,
`ssl.certificate.location`, `ssl.key.location`, `ssl.key.password`, `sasl.mechanism`, `sasl.username`,
`sasl.password`, ...), which is what `insync cluster up --security ...` writes to `DIR/client.properties` and what
confluent-kafka and `kcat -F` read too. The command line loads it once (`use`) before a command runs; every
client the tools make then starts from it: confluent-kafka clients take the settings as they are
(`confluent`), and insync's own socket requests (`admin_requests`) take the TLS part (`ssl_context`).
One process runs one command, so the settings are the process's: a module-level value set at the command-line
boundary, not a parameter threaded through every tool.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from insync.config import ConfigError
from insync.properties import parse_properties

TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

_settings: dict[str, str] = {}


def load(path: str | Path) -> dict[str, str]:
    """The settings in `path`; ConfigError naming the file when it cannot be read or names a bad protocol."""
    try:
        settings = dict(parse_properties(Path(path).read_text()))
    except OSError as exc:
        raise ConfigError(f"cannot read --command-config {path}: {exc.strerror or exc}") from None
    except ConfigError as exc:
        raise ConfigError(f"--command-config {path}: {exc}") from None
    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(f"--command-config {path}: security.protocol={protocol} is not one of "
                          f"{', '.join(SECURITY_PROTOCOLS)}")
    return settings


def use(settings: Mapping[str, str]) -> None:
    """Make `settings` the process's client settings (the command line, once, before the command runs)."""
    _settings.clear()
    _settings.update(settings)


def current() -> dict[str, str]:
    return dict(_settings)


def confluent(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A confluent-kafka client's config: the command's settings under `conf` (which wins)."""
    return {**_settings, **conf}


def ssl_context(settings: Mapping[str, str] | None = None) -> ssl.SSLContext | None:
    """The TLS context for insync's own connections with these settings (the current ones by default); None
    when the protocol has no TLS. Verifies the broker against `ssl.ca.location` and its host name unless
    `ssl.endpoint.identification.algorithm=none`; presents `ssl.certificate.location` when given."""
    settings = _settings if settings is None else settings
    if settings.get("security.protocol", "PLAINTEXT").upper() not in TLS_PROTOCOLS:
        return None
    context = ssl.create_default_context(cafile=settings.get("ssl.ca.location"))
    context.check_hostname = settings.get("ssl.endpoint.identification.algorithm", "https") != "none"
    certificate = settings.get("ssl.certificate.location")
    if certificate is not None:
        context.load_cert_chain(certificate, settings.get("ssl.key.location"), settings.get("ssl.key.password"))
    return context
