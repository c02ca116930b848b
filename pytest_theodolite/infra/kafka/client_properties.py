"""Client properties of an external cluster (security protocol, SASL, SSL) in Kafka's own dotted names.

One set of properties serves every client: Spark's connector takes them as ``kafka.<name>`` options, Java
tools as they are, and kafka-python through the translation below. They often hold secrets, so nothing here
prints them; ``redacted`` gives a loggable view.
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


def python_client_config(properties: Mapping[str, str]) -> dict[str, object]:
    """kafka-python keyword arguments for the same connection."""
    config: dict[str, object] = {}
    for key, value in properties.items():
        if key == "sasl.jaas.config":
            for field, field_value in _JAAS_FIELD.findall(value):
                config[f"sasl_plain_{field}"] = jaas_unquote(field_value)
        elif key == "ssl.endpoint.identification.algorithm":
            config["ssl_check_hostname"] = bool(value)
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
    ``sasl.password``, so for PLAIN and SCRAM they become a ``sasl.jaas.config`` (one given is kept)."""
    config = {k: v for k, v in properties.items() if k not in ("sasl.username", "sasl.password")}
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
