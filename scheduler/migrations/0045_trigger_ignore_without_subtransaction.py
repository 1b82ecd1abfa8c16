# Issue 47: every firing of a scheduler trigger first asks django-pgtrigger's _pgtrigger_should_ignore whether
# `pgtrigger.ignore` names it. The library's version reads the setting inside an exception block, so each call
# opened a subtransaction and, with the setting unset (always, here), raised and caught an error: 3.5 µs of the 12
# a launched run's wake trigger took (a launch of 32 runs: 0.38 -> 0.27 ms in its trigger, 2.45 -> 2.34 ms in all),
# and about 3% of a settled run's share of a 32-run settlement. This version has no exception block. It also reads
# the list pgtrigger.ignore() sends as pgtrigger writes it: the library's version cast it to text[], which the
# scheduler's quoted, schema-qualified table names make fail, so pgtrigger.ignore() ignored none of its triggers.
# Why safe during a deploy: CREATE OR REPLACE of a function with the same signature; no release depends on how it
# finds its answer. pgtrigger writes its own version back whenever a later migration installs a trigger:
# tests/schema/test_trigger_ignore.py fails then, and such a migration reruns this one's SQL.

from django.db import migrations

from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import SchedulerMigration

SCHEMA = f'"{scheduler_settings.schema}"'

WITHOUT_SUBTRANSACTION = f"""
CREATE OR REPLACE FUNCTION {SCHEMA}._pgtrigger_should_ignore(trigger_name name) RETURNS boolean AS $fn$
DECLARE
    ignored text := current_setting('pgtrigger.ignore', true);
BEGIN
    IF ignored IS NULL OR ignored = '' THEN
        RETURN false;
    END IF;
    -- Read element by element, not cast to text[]: pgtrigger joins its URIs unquoted, and a schema-qualified
    -- table's ("schema"."table":trigger id) makes the list no array literal at all.
    RETURN EXISTS (SELECT 1 FROM unnest(string_to_array(btrim(ignored, '{{}}'), ',')) AS element
                   WHERE btrim(element, '"') = trigger_name);
END;
$fn$ LANGUAGE plpgsql
"""

# django-pgtrigger 4.x's own body (pgtrigger/compiler.py), restored by a rollback of this migration.
LIBRARY_VERSION = f"""
CREATE OR REPLACE FUNCTION {SCHEMA}._pgtrigger_should_ignore(trigger_name name) RETURNS boolean AS $fn$
DECLARE
    _pgtrigger_ignore TEXT[];
    _result BOOLEAN;
BEGIN
    BEGIN
        SELECT INTO _pgtrigger_ignore CURRENT_SETTING('pgtrigger.ignore');
        EXCEPTION WHEN OTHERS THEN
    END;
    IF _pgtrigger_ignore IS NOT NULL THEN
        SELECT trigger_name = ANY(_pgtrigger_ignore) INTO _result;
        RETURN _result;
    ELSE
        RETURN FALSE;
    END IF;
END;
$fn$ LANGUAGE plpgsql
"""


class Migration(SchedulerMigration):
    dependencies = [("scheduler", "0044_outbox_payload_without_statistics")]

    operations = [migrations.RunSQL(WITHOUT_SUBTRANSACTION, LIBRARY_VERSION)]
