"""Client properties of an external cluster (security protocol, SASL, SSL) in Kafka's own dotted names.

One set of properties serves every client: Spark's connector takes them as ``kafka.<name>`` options (Java's
form, below), the generator's librdkafka as they are, and kafka-python through the translation below. SSL is
given as librdkafka gives it -- PEM files -- because that is the one form all three read: Java through its PEM
stores (Kafka 2.7+), kafka-python through Python's ``ssl``. Java's JKS and PKCS#12 stores neither Python client
reads, so they are refused (``check``). They often hold secrets, so nothing here prints them; ``redacted`` gives
a loggable view.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from pytest_theodolite.core.redaction import redact_secrets

ENV_PREFIX = "THEODOLITE_KAFKA_"
# names whose kafka-python keyword is not just the dotted name with underscores
_PYTHON_NAMES = {
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')  # JAAS quoting: \" and \\


def parse_lines(lines: Iterable[str], source: str) -> dict[str, str]:
    """``key=value`` lines (blank lines and ``#`` comments skipped) from the ini file."""
    properties = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{source}: {line.split('=')[0]!r}... is not of the form key=value")
        properties[key.strip()] = value.strip()
    return properties


def from_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``THEODOLITE_KAFKA_SASL_MECHANISM=PLAIN`` -> ``{"sasl.mechanism": "PLAIN"}`` (secrets belong here,
    not in a committed ini file)."""
    skip = {"THEODOLITE_KAFKA_BOOTSTRAP"}
    return {
        name[len(ENV_PREFIX) :].lower().replace("_", "."): value
        for name, value in environ.items()
        if name.startswith(ENV_PREFIX) and name not in skip
    }


_HOSTNAME_CHECKS = {"https": True, "": False, "none": False}  # Java says "" for none, librdkafka "none"
_JAVA_STORES = ("ssl.truststore.", "ssl.keystore.")
# librdkafka's names that Java has no property of (java_client_config gives their Java form)
_NOT_JAVA = (
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
)
_PEM_HOW_TO = (
    "give PEM files as librdkafka names them -- ssl.ca.location (the CA certificate) and, for a client "
    "certificate, ssl.certificate.location and ssl.key.location both naming one file that holds the PKCS#8 "
    "private key and the certificate (e.g. `cat client.key client.crt > client.pem`), ssl.key.password if the "
    "key is encrypted; Spark's Java client gets them as PEM stores. Every Spark executor host must read them "
    "at the same path."
)


def check(properties: Mapping[str, str]) -> None:
    """Refuse what one of the three clients could not use, saying what to give instead (ValueError)."""
    stores = sorted(key for key in properties if key.startswith(_JAVA_STORES))
    if stores:
        raise ValueError(
            f"{', '.join(stores)}: Java's key and trust stores, which the load generator (librdkafka) and the "
            f"lag sampler (kafka-python) cannot read; {_PEM_HOW_TO}"
        )
    certificate = properties.get("ssl.certificate.location")
    key = properties.get("ssl.key.location")
    if certificate != key:
        raise ValueError(
            f"ssl.certificate.location {certificate!r} and ssl.key.location {key!r} must name the same file: "
            f"Java reads a client certificate's key and certificate from one PEM file; {_PEM_HOW_TO}"
        )
    algorithm = properties.get("ssl.endpoint.identification.algorithm", "https")
    if algorithm.lower() not in _HOSTNAME_CHECKS:
        raise ValueError(
            f"ssl.endpoint.identification.algorithm {algorithm!r} is neither 'https' (check the broker's host "
            "name against its certificate, the default) nor 'none' (do not)"
        )


def python_client_config(properties: Mapping[str, str]) -> dict[str, object]:
    """kafka-python keyword arguments for the same connection."""
    config: dict[str, object] = {}
    for key, value in properties.items():
        if key == "sasl.jaas.config":
            for field, field_value in _JAAS_FIELD.findall(value):
                config[f"sasl_plain_{field}"] = jaas_unquote(field_value)
        elif key == "ssl.endpoint.identification.algorithm":
            config["ssl_check_hostname"] = _HOSTNAME_CHECKS.get(value.lower(), True)
        else:
            config[_PYTHON_NAMES.get(key, key.replace(".", "_"))] = value
    return config


def jaas_unquote(text: str) -> str:
    """The value of a quoted JAAS option: ``\\"`` and ``\\\\`` stand for ``"`` and ``\\``."""
    return re.sub(r"\\(.)", r"\1", text)


_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def java_client_config(properties: Mapping[str, str]) -> dict[str, str]:
    """The same connection for a Java client (Spark's Kafka connector): Java has no ``sasl.username`` /
    ``sasl.password``, so for PLAIN and SCRAM they become a ``sasl.jaas.config`` (one given is kept); PEM files
    become PEM trust and key stores; no host-name check is Java's empty algorithm."""
    config = {k: v for k, v in properties.items() if k not in _NOT_JAVA}
    if "ssl.ca.location" in properties:
        config |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": properties["ssl.ca.location"]}
    if "ssl.key.location" in properties:  # check(): the certificate's file too
        config |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": properties["ssl.key.location"]}
    if not _HOSTNAME_CHECKS.get(
        properties.get("ssl.endpoint.identification.algorithm", "https").lower(), True
    ):
        config["ssl.endpoint.identification.algorithm"] = ""
    module = _LOGIN_MODULES.get(properties.get("sasl.mechanism", "").upper())
    if "sasl.jaas.config" not in properties and "sasl.username" in properties and module:
        username, password = (
            properties[key].replace("\\", "\\\\").replace('"', '\\"')
            for key in ("sasl.username", "sasl.password")
        )
        config["sasl.jaas.config"] = f'{module} required username="{username}" password="{password}";'
    return config


def redacted(properties: Mapping[str, str]) -> dict[str, str]:
    """A loggable view: secret values (as `redaction` defines them) replaced."""
    return redact_secrets(properties)
