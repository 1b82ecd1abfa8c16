"""`repair_schedule_fire SCHEDULE_ID SLOT_AT [--reason TEXT]` (SCD-6): fire a missed, skipped or refused slot
once; audited in operator_actions."""

import datetime as dt

from django.core.management.base import CommandError

from scheduler.management.cli import SchedulerCommand
from scheduler.operations import repairs
from scheduler.operations.cli_actor import command_actor


def instant(text: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"SLOT_AT must be an ISO 8601 time, got {text[:60]!r}") from None
    if value.tzinfo is None:
        raise CommandError("SLOT_AT must carry a time zone (2027-03-28T01:00:00Z)")
    return value.astimezone(dt.UTC)


class Command(SchedulerCommand):
    help = "Fire one missed, skipped or refused slot of a schedule now (a slot that launched is left alone)."

    def add_arguments(self, parser):
        parser.add_argument("schedule_id")
        parser.add_argument("slot_at", help="the slot, ISO 8601 with a zone")
        parser.add_argument("--reason", default=None, help="why (kept in the operator_actions audit row)")

    def handle(self, *args, **options):
        repair = repairs.repair_schedule_fire(options["schedule_id"], instant(options["slot_at"]), command_actor(),
                                              options["reason"])
        if not repair.changed:
            raise CommandError(repair.line())
        self.stdout.write(repair.line())
