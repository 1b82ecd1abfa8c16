"""The scheduler's triggers ask `_pgtrigger_should_ignore` first (django-pgtrigger's escape hatch): migration 0045
answers as the library does without a subtransaction on every firing."""

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


def test_pgtrigger_ignore__a_list_naming_the_trigger_lets_the_write_through(finished_run):
    with transaction.atomic():
        _exec("SELECT set_config('pgtrigger.ignore', %s, true)", [f"{{other,{FROZEN}}}"])
        _exec("UPDATE runs SET status = 'failed' WHERE run_id = 'run-i'")
    with connection.cursor() as cursor:
        cursor.execute("SELECT status FROM runs WHERE run_id = 'run-i'")
        assert cursor.fetchone()[0] == "failed"


# The last is what pgtrigger.ignore() sends for a table named with its schema, as the scheduler's are: not a list.
@pytest.mark.parametrize("setting", [None, "", "{some_other_trigger}", "not a list", "{NULL}",
                                     f'{{"runtime_scheduler"."runs":{FROZEN},{FROZEN}}}'])
def test_pgtrigger_ignore__unset_empty_other_or_malformed__ignores_nothing(finished_run, setting):
    """The library's answers for every value: only a list that names the trigger ignores it."""
    with pytest.raises(IntegrityError, match="cannot change status"), transaction.atomic():
        if setting is not None:
            _exec("SELECT set_config('pgtrigger.ignore', %s, true)", [setting])
        _exec("UPDATE runs SET status = 'failed' WHERE run_id = 'run-i'")


def test_should_ignore__reads_the_setting_before_any_exception_block():
    """Issue 47: an exception block opens a subtransaction on every call, and reading the unset setting without
    missing_ok raised and caught an error on every firing. pgtrigger writes its own version back whenever a
    migration installs a trigger; such a migration must rerun 0045's SQL after it, or this fails."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE oid = to_regproc(%s)",
                       [f'"{scheduler_settings.schema}"._pgtrigger_should_ignore'])
        source = cursor.fetchone()[0]
    usual = source.index("current_setting('pgtrigger.ignore', true)")
    assert "EXCEPTION" not in source[:usual] and source.index("RETURN false") < source.index("EXCEPTION"), source
