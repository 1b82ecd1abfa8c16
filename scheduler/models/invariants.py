"""Trigger bodies shared by the models' triggers (django-pgtrigger): a refusal, or a call of one of the
scheduler's own database functions (their SQL is defined once, by the migration that creates them)."""

import pgtrigger
from pgtrigger import compiler

from scheduler.conf import scheduler_settings


class SchemaTrigger(pgtrigger.Trigger):
    """A trigger whose ignore function is the scheduler schema's, whatever the project's PGTRIGGER_SCHEMA (APP-2):
    the compiled trigger, and so the scheduler's migrations, are the same in every project."""

    def compile(self, model) -> compiler.Trigger:
        compiled = super().compile(model)
        arguments = {**compiled.sql.kwargs,
                     "ignore_func_name": f'"{scheduler_settings.schema}"._pgtrigger_should_ignore'}
        return compiler.Trigger(name=compiled.name, sql=compiler.UpsertTriggerSql(**arguments))


def refuse(message: str) -> str:
    """PL/pgSQL body that refuses the write with an integrity error; `message` is a RAISE format and its arguments.

    The guards of UPDATEs on busy rows (runs, attempts, receipts, cleanup jobs) run AFTER the row is written: the
    error still undoes the whole statement, and a BEFORE row trigger would first lock every row the statement
    updates (a tuple lock and its WAL record, about 15 µs, on each heartbeat, park and settlement) just to evaluate
    a WHEN that is almost always false."""
    return f"RAISE EXCEPTION {message} USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;"


def call(function: str, argument: str) -> str:
    """PL/pgSQL body that calls a scheduler function, qualified by the configured schema (no search_path, a
    pooler's or a role's, can misdirect it)."""
    return f'PERFORM "{scheduler_settings.schema}".{function}({argument});'


# RET-1, RET-4: the one sanctioned removal of tombstones and cleanup events is the retention prune, whose
# transaction says so (SET LOCAL scheduler.pruning = on) before its one statement; any other delete is refused.
PRUNING_MAY_DELETE = "IF TG_OP = 'DELETE' AND current_setting('scheduler.pruning', true) = 'on' THEN RETURN OLD; END IF; "
