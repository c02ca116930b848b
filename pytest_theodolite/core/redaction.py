"""What counts as a secret, defined once: results, baselines and client properties all redact by it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "***REDACTED***"
# Key names that hold secrets: passwords, tokens, credentials, API/private/access keys, JAAS configs (which
# embed passwords), auth settings, and any key named "key" as a word (Kafka's ssl.key.password, ssl.keystore.key).
SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?|secret|token|credential|api[-_.]?key|private[-_.]?key|access[-_.]?key|jaas|auth"
    r"|(^|[-_.])key([-_.]|$)",
    re.IGNORECASE,
)
_URL_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s:]+:[^/@\s]+@", re.IGNORECASE)


def is_secret_key(name: object) -> bool:
    return bool(SECRET_KEY.search(str(name)))


def redact_secrets(value: Any) -> Any:
    """A copy of `value` (nested dicts/lists) with the values of secret keys (`SECRET_KEY`) and the user
    info of URLs (``scheme://user:password@``) replaced by `REDACTED`."""
    if isinstance(value, Mapping):
        return {
            str(key): REDACTED if is_secret_key(key) and item is not None else redact_secrets(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_secrets(item) for item in value]
    if isinstance(value, str):
        return _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", value)
    return value
