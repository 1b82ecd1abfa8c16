"""APP-2: the scheduler names its schema itself: every statement, model and migration works whatever the
connection's search_path, and `check` names a missing companion app or a database that is not PostgreSQL."""

import pytest
from django.apps import apps
from django.db import connection

from scheduler import db, sql
from scheduler.conf import scheduler_settings
from scheduler.system_checks import companion_apps, postgresql_databases
from tests.support import connect, prepared_text, run_manage

pytestmark = pytest.mark.django_db

# Statements PREPARE cannot take (utility statements); each is checked by the migrations that run it.
UTILITY = ("CREATE", "SET", "DO", "ALTER", "NOTIFY", "LISTEN", "UNLISTEN", "RESET", "DROP", "LOCK", "ANALYZE")


@pytest.mark.requirement("APP-2")
def test_every_statement_resolves_with_a_search_path_without_the_schema():
    """PREPARE resolves every table and function a statement names; with only pg_catalog on the path, an
    unqualified name in any block (or any fragment it expands) is an error."""
    unresolved = {}
    with connect(connection.settings_dict["NAME"], autocommit=True) as conn:
        conn.execute("SET search_path TO pg_catalog")
        for name in sql.raw_blocks():
            text, _ = prepared_text(name)
            body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).lstrip()
            if body.upper().startswith(UTILITY):
                continue
            try:
                conn.execute(f"PREPARE probe AS {text}")
                conn.execute("DEALLOCATE probe")
            except Exception as error:  # noqa: BLE001 - collected and shown together
                unresolved[name] = str(error).splitlines()[0]
    assert unresolved == {}


def test_every_model_reads_with_a_search_path_without_the_schema():
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL search_path TO pg_catalog")
        for model in apps.get_app_config("scheduler").get_models():
            model.objects.exists()
        cursor.execute("SELECT current_setting('search_path')")
        assert cursor.fetchone()[0] == "pg_catalog"


@pytest.mark.requirement("APP-2")
def test_migrate_with_a_plain_search_path_leaves_public_alone(scratch_db):
    """A user's connection (search_path "$user", public, no options copied from here): the scheduler's tables,
    functions and triggers go to its schema, Django's own tables stay in public beside the user's table."""
    with scratch_db.connect(autocommit=True) as conn:
        conn.execute("CREATE TABLE public.my_orders (id integer)")
    migrated = run_manage("migrate", "--no-input", database_url_value=scratch_db.url,
                          DJANGO_SETTINGS_MODULE="tests.user_project_settings")
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    with scratch_db.connect() as conn:
        public = {row[0] for row in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'v')")}
        functions = conn.execute(
            "SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace").fetchone()[0]
        scheduler_tables = {row[0] for row in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace AND relkind = 'r'",
            [scheduler_settings.schema])}
    assert "my_orders" in public and "django_migrations" in public and "auth_user" in public
    assert not {name for name in public if name not in {"my_orders"} and not name.startswith(("django_", "auth_"))}
    assert functions == 0
    assert {"runs", "attempts", "outbox", "receipts", "schedules"} <= scheduler_tables
    checked = run_manage("check_scheduler_schema", database_url_value=scratch_db.url,
                         DJANGO_SETTINGS_MODULE="tests.user_project_settings")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_check_names_a_missing_companion_app(settings):
    assert companion_apps() == []
    settings.INSTALLED_APPS = [app for app in settings.INSTALLED_APPS if app != "pgtrigger"]
    errors = companion_apps()
    assert [error.id for error in errors] == ["scheduler.E001"]
    assert "'pgtrigger'" in errors[0].msg


def test_check_refuses_a_database_that_is_not_postgresql(tmp_path):
    """The README's TASKS block on SQLite: `check` says so, instead of an AttributeError at the first enqueue."""
    checked = run_manage("check", database_url_value=f"sqlite:///{tmp_path / 'user.sqlite3'}",
                         DJANGO_SETTINGS_MODULE="tests.user_project_settings")
    assert checked.returncode == 1
    assert "scheduler.E002" in checked.stderr and "DATABASES['default'] is sqlite" in checked.stderr
    assert postgresql_databases() == []


@pytest.mark.django_db(transaction=True)
def test_flush_empties_the_scheduler_tables_too():
    """Django lists only the tables its search_path shows; a TransactionTestCase's flush (a user's suite too)
    must still leave no scheduler row behind."""
    from django.core.management import call_command

    from scheduler import models
    from tests.factories import launch

    launch()
    assert models.Run.objects.count() == 1
    call_command("flush", interactive=False, verbosity=0)
    assert models.Run.objects.count() == 0
