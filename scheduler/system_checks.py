"""What `manage.py check` says about a project that installs the scheduler (APP-2, APP-3).

Each mistake is named at `check` (which `migrate` and `runserver` run first)
instead of surfacing later as an AttributeError inside `enqueue` or a
missing relation inside a worker.
"""

from __future__ import annotations

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.db import connections

from scheduler.conf import SchedulerSettings

# The apps the scheduler's models and admin need beside it.
COMPANION_APPS = {
    "pgtrigger": "django-pgtrigger installs the scheduler's invariant triggers",
    "django.contrib.contenttypes": "the scheduler's operator permissions are content-type permissions",
    "django.contrib.auth": "the admin's repairs are guarded by the scheduler's permissions",
}


@checks.register()
def companion_apps(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    return [
        checks.Error(f"INSTALLED_APPS lacks {name!r}, which the scheduler needs: {why}",
                     hint=f'add "{name}" to INSTALLED_APPS', id="scheduler.E001")
        for name, why in COMPANION_APPS.items() if not apps.is_installed(name)
    ]


@checks.register()
def postgresql_databases(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Every database alias must be PostgreSQL: the scheduler's statements, its router and its tasks use them all."""
    return [
        checks.Error(f"DATABASES[{alias!r}] is {connections[alias].vendor}; the scheduler needs PostgreSQL",
                     hint="set ENGINE to django.db.backends.postgresql", id="scheduler.E002")
        for alias in settings.DATABASES
        if connections[alias].vendor not in ("postgresql", "dummy")
    ]


@checks.register()
def scheduler_settings_values(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Each SCHEDULER_* Django setting parses as its environment variable would."""
    errors = []
    for setting in SchedulerSettings.declared().values():
        message = setting.check()
        if message:
            errors.append(checks.Error(message, id="scheduler.E003"))
    return errors
