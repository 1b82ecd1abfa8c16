"""SCHEDULER_* settings with their defaults, in one small object.

This module imports nothing from Django at import time so that
config/settings.py can use `validate_schema_name` while settings load.
"""

from __future__ import annotations

import re

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

SCHEMA_VERSION = 64


class ConfigurationError(Exception):
    """A setting is malformed; raised at start-up, never mid-request."""


def validate_schema_name(name: str) -> str:
    """Return `name` if it is a plain lower-case PostgreSQL identifier.

    The schema is spliced into SQL text and search_path, so anything that
    would need quoting is refused instead of quoted.
    """
    if not isinstance(name, str) or not _SCHEMA_NAME.fullmatch(name):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            f"SCHEDULER_SCHEMA must be a plain lower-case identifier "
            f"([a-z_][a-z0-9_]*, at most 63 characters), got {name!r}"
        )
    return name


class _Settings:
    """Reads `SCHEDULER_*` from django.conf.settings with defaults."""

    defaults = {
        "SCHEDULER_SCHEMA": "runtime_scheduler",
        "SCHEDULER_INTERNAL_TOKEN": "",
        "SCHEDULER_STATEMENT_TIMEOUT_MS": 30_000,
        "SCHEDULER_CLAIM_LEASE_SECONDS": 300,
        "SCHEDULER_MAX_REQUEST_BYTES": 1024 * 1024,
        "SCHEDULER_PREPARE_STATEMENTS": True,
        "SCHEDULER_PLAN_CACHE_MODE": "auto",
        "SCHEDULER_SETTLE_BATCH_SIZE": 32,
    }

    def __getattr__(self, name: str):
        from django.conf import settings

        key = f"SCHEDULER_{name}"
        if key not in self.defaults:
            raise AttributeError(name)
        return getattr(settings, key, self.defaults[key])


scheduler_settings = _Settings()


PROVIDER_NAMES = ("local", "daytona", "modal")


def parse_daytona_keys(raw: str) -> dict[str, str]:
    """SCHEDULER_DAYTONA_API_KEYS: a JSON object from organization id to API key."""
    from django.core.exceptions import ImproperlyConfigured

    import json

    try:
        value = json.loads(raw or "{}")
    except ValueError:
        raise ImproperlyConfigured("SCHEDULER_DAYTONA_API_KEYS must be a JSON object from organization id to API key") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in value.items()):
        raise ImproperlyConfigured("SCHEDULER_DAYTONA_API_KEYS must map organization ids to non-empty key strings")
    return value


def parse_modal_tokens(raw: str) -> dict[str, dict[str, str]]:
    """SCHEDULER_MODAL_TOKENS: a JSON object from workspace to {tokenId, tokenSecret}."""
    from django.core.exceptions import ImproperlyConfigured

    import json

    try:
        value = json.loads(raw or "{}")
    except ValueError:
        raise ImproperlyConfigured("SCHEDULER_MODAL_TOKENS must be a JSON object from workspace to {tokenId, tokenSecret}") from None
    if not isinstance(value, dict) or not all(
        isinstance(token, dict) and isinstance(token.get("tokenId"), str) and isinstance(token.get("tokenSecret"), str)
        for token in value.values()
    ):
        raise ImproperlyConfigured("SCHEDULER_MODAL_TOKENS entries must be {\"tokenId\": ..., \"tokenSecret\": ...}")
    return value


def validate_provider_name(name: str) -> str:
    from django.core.exceptions import ImproperlyConfigured

    if name not in PROVIDER_NAMES:
        raise ImproperlyConfigured(f"SCHEDULER_DEFAULT_PROVIDER must be one of {', '.join(PROVIDER_NAMES)}, got {name!r}")
    return name
