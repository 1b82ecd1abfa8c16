"""The scheduler's triggers ask `_pgtrigger_should_ignore` first (django-pgtrigger's escape hatch): migration 0045
answers without a subtransaction on every firing, and reads the list pgtrigger.ignore() sends as it is written."""

import pgtrigger
import pytest
from django.db import IntegrityError, connection, transaction

from scheduler.conf import scheduler_settings

pytestmark = pytest.mark.django_db

FROZEN = "pgtrigger_terminal_run_status_frozen_4c740"


def _exec(sql, params=None):
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])


@pytest.fixture
def finished_run():
    _exec("INSERT INTO runs (run_id, play_name, status) VALUES ('run-i', 'play', 'completed')")


def _status_after_update() -> str:
    _exec("UPDATE runs SET status = 'failed' WHERE run_id = 'run-i'")
    with connection.cursor() as cursor:
        cursor.execute("SELECT status FROM runs WHERE run_id = 'run-i'")
        return cursor.fetchone()[0]


def test_pgtrigger_ignore__a_list_naming_the_trigger_lets_the_write_through(finished_run):
    with transaction.atomic():
        _exec("SELECT set_config('pgtrigger.ignore', %s, true)", [f"{{other,{FROZEN}}}"])
        assert _status_after_update() == "failed"


@pytest.mark.parametrize("uris", [("scheduler.Run:terminal_run_status_frozen",), ()])
def test_pgtrigger_ignore__named_or_all__lets_the_write_through(finished_run, uris):
    """pgtrigger.ignore() names a trigger by "<db_table>:<id>" and by its id, unquoted: the scheduler's quoted,
    schema-qualified tables made that list a malformed array, which the library's function ignored nothing for."""
    with pgtrigger.ignore(*uris), transaction.atomic():
        assert _status_after_update() == "failed"


@pytest.mark.parametrize("setting", [None, "", "{some_other_trigger}", "not a list", f"{{{FROZEN}_not}}"])
def test_pgtrigger_ignore__unset_empty_or_naming_others__ignores_nothing(finished_run, setting):
    with pytest.raises(IntegrityError, match="cannot change status"), transaction.atomic():
        if setting is not None:
            _exec("SELECT set_config('pgtrigger.ignore', %s, true)", [setting])
        _status_after_update()


def test_should_ignore__opens_no_subtransaction():
    """Issue 47: an exception block opens a subtransaction on every call (and the library's read of the unset
    setting raised and caught an error each time). pgtrigger writes its own version back whenever a migration
    installs a trigger: such a migration must rerun 0045's SQL after it, or this fails."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE oid = to_regproc(%s)",
                       [f'"{scheduler_settings.schema}"._pgtrigger_should_ignore'])
        source = cursor.fetchone()[0]
    assert "current_setting('pgtrigger.ignore', true)" in source and "EXCEPTION" not in source.upper(), source
