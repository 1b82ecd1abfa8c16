"""`list_runs [--status S] [--org O] [--release R] [--play P] [--limit N] [--cursor C]`: runs, newest first, one line each."""

from django.core.management.base import CommandError

from scheduler.errors import SchedulerError
from scheduler.kinds import RunStatus, values
from scheduler.management.cli import SchedulerCommand, integer
from scheduler.operations import run_list


class Command(SchedulerCommand):
    help = "List runs newest first, filtered; a page at a time (the last line gives the next page's cursor)."

    def add_arguments(self, parser):
        parser.add_argument("--status", choices=values(RunStatus))
        parser.add_argument("--org")
        parser.add_argument("--release")
        parser.add_argument("--play")
        parser.add_argument("--limit", type=integer(1, run_list.MAX_PAGE), default=50)
        parser.add_argument("--cursor")

    def handle(self, *args, **options):
        filters = run_list.RunFilter(options["status"], options["org"], options["release"], options["play"])
        try:
            rows, next_cursor = run_list.page(filters, cursor=options["cursor"], limit=options["limit"])
        except SchedulerError as error:
            raise CommandError(error.message) from None
        for row in rows:
            ended = f" {row['error_code']}" if row["error_code"] else ""
            self.stdout.write(f"{row['run_id']} {row['status']}{ended} {row['play_name']} org={row['org_id'] or '-'} "
                              f"attempt {row['attempts'] or 0}/{row['max_attempts']} created {row['created_at']:%Y-%m-%d %H:%M:%S}")
        if next_cursor:
            self.stdout.write(f"next page: --cursor {next_cursor}")
