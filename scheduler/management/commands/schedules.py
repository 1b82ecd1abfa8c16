"""`schedules list|show|add|pause|resume|preview` (SCD-7): operate cron schedules from a shell.

    schedules list [--org ORG]
    schedules show ID
    schedules add --org ORG --name NAME --cron CRON [--timezone TZ] --template JSON [--overlap ...] [--catch-up ...]
    schedules pause ID | schedules resume ID
    schedules preview ID [--next N] [--after ISO]   (the next N slots, UTC ISO, one a line, as the loop fires them)
"""

import datetime as dt
import json

from django.core.management.base import CommandError

from scheduler.errors import SchedulerError
from scheduler.kinds import ScheduleCatchUp, ScheduleOverlap, values
from scheduler.management.cli import SchedulerCommand, integer
from scheduler import validation
from scheduler.periodic import definitions


def _utc(value: dt.datetime | None) -> str:
    return "-" if value is None else value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Command(SchedulerCommand):
    help = "List, show, add, pause, resume or preview cron schedules (SCD-7)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["list", "show", "add", "pause", "resume", "preview"])
        parser.add_argument("schedule_id", nargs="?", help="the schedule (show, pause, resume, preview)")
        parser.add_argument("--org", default=None)
        parser.add_argument("--name", default=None)
        parser.add_argument("--cron", default=None, help="five fields, or @hourly, @daily, @weekly, @monthly")
        parser.add_argument("--timezone", default="UTC", help="IANA zone the cron reads in (default UTC)")
        parser.add_argument("--template", default=None, help="the launch body as JSON (as POST /internal/runs)")
        parser.add_argument("--overlap", choices=values(ScheduleOverlap), default=ScheduleOverlap.ALLOW.value)
        parser.add_argument("--catch-up", choices=values(ScheduleCatchUp), default=ScheduleCatchUp.LATEST.value)
        parser.add_argument("--paused", action="store_true", help="add it paused")
        parser.add_argument("--next", type=integer(1, definitions.MAX_PREVIEW), default=5, help="preview: slots")
        parser.add_argument("--after", default=None, help="preview: slots after this ISO 8601 time (default now)")

    def handle(self, *args, **options):
        action = options["action"]
        if action not in ("list", "add") and not options["schedule_id"]:
            raise CommandError(f"{action} needs a schedule id")
        try:
            getattr(self, f"_{action}")(options)
        except SchedulerError as error:
            raise CommandError(f"{error.field}: {error.message}" if error.field else error.message) from None

    def _list(self, options):
        org = validation.identifier(options["org"], "--org", optional=True)
        rows, cursor = definitions.page(org, None, definitions.MAX_PAGE)
        while cursor:  # every schedule, a page at a time
            more, cursor = definitions.page(org, cursor, definitions.MAX_PAGE)
            rows += more
        for row in rows:
            self.stdout.write(f"{row['schedule_id']}  {row['org_id']}/{row['name']}  {row['cron']} "
                              f"{row['timezone']}  {'paused' if row['paused'] else 'next ' + _utc(row['next_fire_at'])}")

    def _show(self, options):
        row = definitions.read(options["schedule_id"])
        self.stdout.write(json.dumps({**row, "next_fire_at": _utc(row["next_fire_at"]),
                                      "created_at": _utc(row["created_at"]), "updated_at": _utc(row["updated_at"]),
                                      "recent_fires": [{**fire, "slot_at": _utc(fire["slot_at"]),
                                                        "fired_at": _utc(fire["fired_at"])}
                                                       for fire in definitions.recent_fires(row["schedule_id"])]},
                                     indent=2, sort_keys=True))

    def _add(self, options):
        if options["template"] is None:
            raise CommandError("add needs --template JSON (the launch body)")
        try:
            template = json.loads(options["template"])
        except ValueError:
            raise CommandError("--template must be JSON") from None
        row = definitions.create(definitions.ScheduleSpec(
            options["org"], options["name"], options["cron"], options["timezone"], template, options["overlap"],
            options["catch_up"], options["paused"]))
        self.stdout.write(f"{row['schedule_id']} next {_utc(row['next_fire_at'])}")

    def _pause(self, options):
        changed = definitions.set_paused(options["schedule_id"], True)
        self.stdout.write(f"{options['schedule_id']}: paused" + ("" if changed else " (already)"))

    def _resume(self, options):
        changed = definitions.set_paused(options["schedule_id"], False)
        row = definitions.read(options["schedule_id"])
        self.stdout.write(f"{options['schedule_id']}: next {_utc(row['next_fire_at'])}" + ("" if changed else " (already running)"))

    def _preview(self, options):
        after = None
        if options["after"]:
            try:
                after = dt.datetime.fromisoformat(options["after"])
            except ValueError:
                raise CommandError("--after must be an ISO 8601 time") from None
            if after.tzinfo is None:
                raise CommandError("--after must carry a time zone")
        for slot in definitions.preview(definitions.read(options["schedule_id"]), options["next"], after):
            self.stdout.write(_utc(slot))
