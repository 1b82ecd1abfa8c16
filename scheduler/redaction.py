"""Secrets never leave the database in readable form (requirements §1.8).

Launch tokens are replaced wherever launch JSON is shown: admin, status API,
logs and error messages.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[redacted]"
SECRET_KEY_PATTERN = re.compile(r"(token|secret|password|apikey|api_key|authorization|credential)", re.IGNORECASE)


def redact(value: Any) -> Any:
    """A copy of `value` with every secret-looking key's value replaced."""
    if isinstance(value, dict):
        return {
            key: (REDACTED if isinstance(key, str) and SECRET_KEY_PATTERN.search(key) and item is not None else redact(item))
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact(item) for item in value]
    return value


def launch_secrets(launch: dict | None) -> list[str]:
    """The token values a launch carries (executorToken, coordinatorInternalToken, ...), to scrub from messages."""
    return [value for key, value in (launch or {}).items() if "token" in key.lower() and isinstance(value, str)]


def redact_text(text: str, secrets: list[str]) -> str:
    """`text` with each known secret string replaced (for error messages)."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    return text
