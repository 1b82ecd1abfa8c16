"""Every SCHEDULER_* setting in one typed object, each with its one default and its parser.

`scheduler_settings.schema` reads `settings.SCHEDULER_SCHEMA` live (so tests
may override it) and falls back to the default declared here; nothing else
reads `settings.SCHEDULER_*`. config/settings.py fills those Django settings
from the environment through `SchedulerSettings.environment()`, which
validates each value and names the variable in its error. Procrastinate's
Django settings class works the same way.

This module imports nothing from Django at import time: config/settings.py
uses it while Django's settings load.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Generic, Mapping, TypeVar, overload

from scheduler.kinds import Provider, values
from scheduler.setting_text import as_text, parsed_once

T = TypeVar("T")

SCHEMA_VERSION = 64
PLAN_CACHE_MODES = ("auto", "force_generic_plan", "force_custom_plan")
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def project_import_root() -> str:
    """Where the running project's modules import from: its manage.py's directory, else the working directory."""
    import sys

    return os.path.abspath(sys.path[0] or os.getcwd())


def _refuse(message: str):
    from django.core.exceptions import ImproperlyConfigured

    return ImproperlyConfigured(message)


def validate_schema_name(name: str) -> str:
    """The schema is spliced into SQL text and search_path, so anything that would need quoting is refused."""
    if not isinstance(name, str) or not _SCHEMA_NAME.fullmatch(name):
        raise _refuse(f"SCHEDULER_SCHEMA must be a plain lower-case identifier "
                      f"([a-z_][a-z0-9_]*, at most 63 characters), got {name!r}")
    return name


def _text(key: str, raw: str) -> str:
    return raw


def _optional_text(key: str, raw: str) -> str | None:
    return raw or None


def _optional_file(key: str, raw: str) -> str | None:
    """A file read when the provider is built: refused at start-up when it cannot be read."""
    if not raw:
        return None
    if not os.access(raw, os.R_OK) or not Path(raw).is_file():
        raise _refuse(f"{key} must name a readable file, got {raw!r}")
    return raw


def _optional_callable(key: str, raw: str) -> str | None:
    """`module:function`, imported when the provider is built (the module may need the provider's library)."""
    from scheduler.runs.launch_rules import PLAY_CALLABLE

    if not raw:
        return None
    if not PLAY_CALLABLE.fullmatch(raw):
        raise _refuse(f"{key} must be module:function, got {raw!r}")
    return raw


def _integer(minimum: int, maximum: int = 2**31 - 1) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise _refuse(f"{key} must be an integer, got {raw!r}") from None
        if not minimum <= value <= maximum:
            raise _refuse(f"{key} must be between {minimum} and {maximum}")
        return value

    return parse


def _optional_integer(minimum: int, maximum: int = 2**31 - 1) -> Callable[[str, str], int | None]:
    whole = _integer(minimum, maximum)

    def parse(key: str, raw: str) -> int | None:
        return None if raw.strip() == "" else whole(key, raw)

    return parse


def _boolean(key: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise _refuse(f"{key} must be true or false, got {raw!r}")


def _one_of(options: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(key: str, raw: str) -> str:
        if raw not in options:
            raise _refuse(f"{key} must be one of {', '.join(options)}, got {raw!r}")
        return raw

    return parse


def _schema(key: str, raw: str) -> str:
    return validate_schema_name(raw)


def _daytona_keys(key: str, raw: str) -> dict[str, str]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        raise _refuse(f"{key} must be a JSON object from organization id to API key") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in value.items()):
        raise _refuse(f"{key} must map organization ids to non-empty key strings")
    return value


def _modal_tokens(key: str, raw: str) -> dict[str, dict[str, str]]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        raise _refuse(f"{key} must be a JSON object from workspace to {{tokenId, tokenSecret}}") from None
    if not isinstance(value, dict) or not all(
        isinstance(token, dict) and isinstance(token.get("tokenId"), str) and isinstance(token.get("tokenSecret"), str)
        for token in value.values()
    ):
        raise _refuse(f'{key} entries must be {{"tokenId": ..., "tokenSecret": ...}}')
    return value


def local_secret_key(path: Path) -> str:
    """A random key kept in `path` (0600), made by the first process that needs it; every later one reads it.

    Written to a private temporary file and linked into place, so a process
    racing the first never reads a half-written key.
    """
    import os
    import secrets

    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(48))
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
        finally:
            os.unlink(temporary)
    return path.read_text().strip()


class Setting(Generic[T]):
    """One SCHEDULER_* setting: its default, and how its environment variable is parsed (None: derived, not read)."""

    def __init__(self, default: T, parse: Callable[[str, str], T] | None = _text):
        self.default = default
        self.parse = parse

    def __set_name__(self, owner, name: str) -> None:
        self.key = f"SCHEDULER_{name.upper()}"

    @overload
    def __get__(self, instance: None, owner: type) -> "Setting[T]": ...

    @overload
    def __get__(self, instance: object, owner: type) -> T: ...

    def __get__(self, instance, owner):
        if instance is None:
            return self
        from django.conf import settings

        value = getattr(settings, self.key, self.default)
        if self.parse is None or value is self.default or (type(value) is type(self.default) and type(value) is not str):
            return value
        # APP-3: a Django setting may be given as text or as a value; either way it is parsed as the environment's.
        return parsed_once(self.parse, self.key, value)

    def check(self) -> str | None:
        """The error a bad value of this Django setting would raise when read, or None (APP-3: `manage.py check`)."""
        from django.conf import settings

        if self.parse is None or not hasattr(settings, self.key):
            return None
        try:
            self.parse(self.key, as_text(getattr(settings, self.key)))
        except Exception as error:  # noqa: BLE001 - ImproperlyConfigured, its message names the setting
            return str(error)
        return None

    def from_environment(self, environ: Mapping[str, str]) -> T:
        raw = environ.get(self.key)
        return self.default if raw is None or self.parse is None else self.parse(self.key, raw)


class SchedulerSettings:
    """The scheduler's settings; see the README's configuration table for what each means."""

    schema = Setting("runtime_scheduler", _schema)
    internal_token = Setting("")
    statement_timeout_ms = Setting(30_000, _integer(0))
    prepare_statements = Setting(True, _boolean)
    plan_cache_mode = Setting("auto", _one_of(PLAN_CACHE_MODES))
    # DATABASE_URL reaches a transaction-pooling bouncer: no session state, no startup options (docs/operations.md).
    transaction_pooling = Setting(False, _boolean)
    claim_lease_seconds = Setting(300, _integer(1))
    dispatch_starts = Setting(32, _integer(1, 256))
    # Issue 47: after a claim that took fewer runs than it had slots for, the dispatcher claims again no sooner
    # than this (ms): launches that arrive meanwhile share one claim statement.
    dispatch_cooldown_ms = Setting(5, _integer(0, 1000))
    # The same for a drainer after a tick that delivered some facts but found no more ready.
    drain_cooldown_ms = Setting(5, _integer(0, 1000))
    # FSH-1: the cap of an org whose org_limits row names none (unset: unlimited).
    org_max_active = Setting[int | None](None, _optional_integer(0))
    # RET-1, RET-2: days a finished run (with every row of its own) and a billing item are kept before pruning.
    retention_days = Setting(30, _integer(0))
    billing_retention_days = Setting(400, _integer(0))
    cleanup_lease_seconds = Setting(120, _integer(1))
    # Issue 47: provider calls (deletes, read-backs) one cleanup worker makes at once within a tick.
    cleanup_concurrency = Setting(8, _integer(1, 64))
    # Issue 47: runs whose facts one drainer sends to their run-ledger receivers at once (one after the other,
    # a saturated machine's drainer fell behind on round trips alone).
    delivery_concurrency = Setting(8, _integer(1, 64))
    billing_lease_seconds = Setting(300, _integer(1))
    settle_batch_size = Setting(32, _integer(1, 500))
    heartbeat_batch_size = Setting(32, _integer(1, 500))
    launch_batch_size = Setting(32, _integer(1, 500))
    # Issue 47: how long a group statement whose items keep overlapping waits for more (runs/batcher.py). 1 ms
    # saved what 5 did (PostgreSQL's CPU a run) while holding a request thread a fifth as long; 5 starved the
    # soak's eight runner threads under chaos.
    batch_linger_ms = Setting(1, _integer(0, 100))
    heartbeat_timeout_ms = Setting(60_000, _integer(1))
    max_request_bytes = Setting(1024 * 1024, _integer(1024))
    default_provider = Setting(Provider.LOCAL.value, _one_of(values(Provider)))
    # APP-5: outside this repository (which keeps them in .embedded/) local sandboxes live under the temporary directory.
    sandbox_dir = Setting(str(Path(tempfile.gettempdir()) / f"scheduler-sandboxes-{os.getuid()}"))
    daytona_api_url = Setting("https://app.daytona.io/api")
    daytona_api_keys: Setting[dict[str, str]] = Setting({}, _daytona_keys)
    daytona_snapshot = Setting[str | None](None, _optional_text)
    # PRV-1: a Dockerfile whose content new sandboxes are built from (buildInfo, with resources) instead of a snapshot.
    daytona_dockerfile = Setting[str | None](None, _optional_file)
    daytona_disk_gb = Setting(3, _integer(1, 1024))
    # PRV-2: how long a start waits for its sandbox to be `started`.
    daytona_start_timeout_seconds = Setting(120, _integer(1, 3600))
    modal_server_url = Setting[str | None](None, _optional_text)
    modal_tokens: Setting[dict[str, dict[str, str]]] = Setting({}, _modal_tokens)
    modal_image = Setting[str | None](None, _optional_text)
    # PRV-5: `module:function` returning a modal.Image with the user's plays (instead of a registry image).
    modal_image_definition = Setting[str | None](None, _optional_callable)
    # PRV-5: the lifetime of a Modal sandbox whose launch names no timeoutSeconds (Modal's maximum is 24 h).
    modal_sandbox_timeout_seconds = Setting(3600, _integer(1, 86_400))
    # APP-6: what a local sandbox's plays and tasks import from (os.pathsep-separated); unset, the project's BASE_DIR.
    sandbox_pythonpath = Setting("")
    public_api_url = Setting("http://127.0.0.1:8000")
    application_name = Setting("run-scheduler")
    require_secret_key = Setting(False, _boolean)
    # Local sandboxes run plays as the scheduler's own user: outside DEBUG and a loopback bind they must be allowed.
    allow_local_sandboxes = Setting(False, _boolean)
    # The unprivileged user local sandboxes run as when the scheduler runs as root ("" keeps root).
    local_sandbox_user = Setting[str | None]("scheduler-sandbox", _optional_text)
    bind = Setting("127.0.0.1:8000")
    web_workers = Setting(2, _integer(1, 64))
    web_threads = Setting(4, _integer(1, 256))
    web_timeout = Setting(30, _integer(1))
    # Derived by config/settings.py (true when DATABASE_URL is unset), never read from the environment.
    embedded_database = Setting(False, None)

    @classmethod
    def declared(cls) -> dict[str, Setting]:
        return {name: value for name, value in vars(cls).items() if isinstance(value, Setting)}

    @classmethod
    def environment(cls, environ: Mapping[str, str]) -> dict[str, Any]:
        """{SCHEDULER_NAME: value} for every setting read from the environment, validated."""
        return {setting.key: setting.from_environment(environ)
                for setting in cls.declared().values() if setting.parse is not None}


scheduler_settings = SchedulerSettings()
