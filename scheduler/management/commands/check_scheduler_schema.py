"""`check_scheduler_schema`: exit 0 when the schema is ready, 1 with the problems listed (SCH-4)."""

from django.core.management.base import CommandError

from scheduler.management.cli import SchedulerCommand
from scheduler.schema.shape import OPTIONAL_ITEMS, check_schema_shape


class Command(SchedulerCommand):
    help = "Report whether every table, column, constraint, trigger, function and index the scheduler needs exists."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument(
            "--without",
            action="append",
            default=[],
            choices=sorted(OPTIONAL_ITEMS),
            help="exclude an optional v64 item from the requirement (repeatable)",
        )
        parser.add_argument("--database", default="default")

    def handle(self, *args, **options):
        report = check_schema_shape(set(options["without"]), using=options["database"])
        if report.ready:
            self.stdout.write(f"schema {report.schema}: ready")
            return
        self.stdout.write(f"schema {report.schema}: not ready ({len(report.problems)} problems)")
        for problem in report.problems:
            self.stdout.write(f"  {problem}")
        raise CommandError("scheduler schema not ready", returncode=1)
