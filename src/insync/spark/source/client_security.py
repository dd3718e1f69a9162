"""The `kafka.security.protocol`, `kafka.sasl.*` and `kafka.ssl.*` options of the `insync` source and sink.

Spark's Kafka source takes the Java client's settings; the driver's metadata client and the sink's producer are
librdkafka, and the tasks' reader is insync's own (`fetch_client`). `librdkafka_names` turns the Java settings
into librdkafka's, so one set of options serves all three: `security.protocol` and `sasl.mechanism` keep their
names, `sasl.jaas.config` gives `sasl.username` and `sasl.password`, PEM truststores and keystores give
`ssl.ca.location`/`ssl.ca.pem` and `ssl.certificate.location`/`ssl.key.location`, and an empty
`ssl.endpoint.identification.algorithm` is `none`. librdkafka's own names are accepted as they are. Only PEM
stores (as the broker's) and the mechanisms insync speaks (PLAIN, SCRAM-SHA-256/512) are accepted: anything else
is refused when the query is defined, naming the option. `ReaderSecurity` is what the reader needs: a TLS
context, checking the broker's certificate and host name unless told not to, and the SASL credentials.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from insync.security.plain import JaasConfigError, parse_jaas_config
from insync.security.sasl_client import SaslCredentials

PROTOCOLS = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def librdkafka_names(conf: Mapping[str, str]) -> dict[str, str]:
    """`conf` with the Java client's security settings in librdkafka's names; ValueError naming a setting that
    cannot be honoured."""
    out = dict(conf)
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        if out.pop(key, "PEM").upper() != "PEM":
            raise ValueError(f"option kafka.{key} must be PEM: the insync source reads PEM stores only")
    jaas = out.pop("sasl.jaas.config", None)
    if jaas is not None:
        try:
            parsed = parse_jaas_config(jaas)
        except JaasConfigError as exc:
            raise ValueError(f"option kafka.sasl.jaas.config: {exc}") from None
        if parsed.username is None or parsed.password is None:
            raise ValueError("option kafka.sasl.jaas.config needs username=\"...\" and password=\"...\"")
        out.setdefault("sasl.username", parsed.username)
        out.setdefault("sasl.password", parsed.password)
    renamed = {"ssl.truststore.location": ("ssl.ca.location",), "ssl.truststore.certificates": ("ssl.ca.pem",),
               "ssl.keystore.location": ("ssl.certificate.location", "ssl.key.location")}
    for java, names in renamed.items():
        if java in out:
            value = out.pop(java)
            for name in names:
                out.setdefault(name, value)
    if out.get("ssl.endpoint.identification.algorithm") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    _check(out)
    return out


def _check(conf: Mapping[str, str]) -> None:
    protocol = conf.get("security.protocol", "plaintext").lower()
    if protocol not in PROTOCOLS:
        raise ValueError(f"option kafka.security.protocol={protocol}: expected one of {', '.join(PROTOCOLS)}")
    if protocol.startswith("sasl_"):
        mechanism = conf.get("sasl.mechanism", conf.get("sasl.mechanisms", "GSSAPI"))
        if mechanism not in MECHANISMS:
            raise ValueError(f"option kafka.sasl.mechanism={mechanism}: the insync source speaks "
                             f"{', '.join(MECHANISMS)}")
        if not conf.get("sasl.username") or "sasl.password" not in conf:
            raise ValueError(f"kafka.security.protocol={protocol} needs kafka.sasl.jaas.config (or "
                             "kafka.sasl.username and kafka.sasl.password)")


@dataclass(frozen=True, slots=True)
class ReaderSecurity:
    """How a task's reader connects: TLS or not, SASL credentials or not."""

    tls: ssl.SSLContext | None = None
    sasl: SaslCredentials | None = None

    @classmethod
    def of(cls, conf: Mapping[str, str]) -> ReaderSecurity:
        """From options already in librdkafka's names (`librdkafka_names`)."""
        protocol = conf.get("security.protocol", "plaintext").lower()
        sasl = None
        if protocol.startswith("sasl_"):
            sasl = SaslCredentials(conf.get("sasl.mechanism", conf.get("sasl.mechanisms", "")),
                                   conf["sasl.username"], conf["sasl.password"])
        return cls(_tls_context(conf) if protocol.endswith("ssl") else None, sasl)


def _tls_context(conf: Mapping[str, str]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=conf.get("ssl.ca.location"), cadata=conf.get("ssl.ca.pem"))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if conf.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    if "ssl.certificate.location" in conf:
        context.load_cert_chain(conf["ssl.certificate.location"], conf.get("ssl.key.location"),
                                conf.get("ssl.key.password"))
    return context
