"""`scheduler_up`: migrate, then run the API and every worker loop until SIGTERM/SIGINT."""

import os

from django.core.management import call_command
from django.core.management.base import BaseCommand

from scheduler.supervisor import Supervisor, child_database_url, default_children


class Command(BaseCommand):
    help = "Migrate the scheduler schema, then run gunicorn and the worker loops (Ctrl-C stops them)."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default=os.environ.get("SCHEDULER_BIND", "127.0.0.1:8000"))

    def handle(self, *args, **options):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("check_scheduler_schema")
        env = dict(os.environ, DATABASE_URL=child_database_url())
        bind = options["bind"]
        self.stdout.write(
            f"scheduler up: http://{bind}/healthz and http://{bind}/admin/ "
            f"(create an admin user with ./dev manage createsuperuser); Ctrl-C stops it",
        )
        self.stdout.flush()
        code = Supervisor(default_children(bind), env).run()
        if code:
            raise SystemExit(code)
        self.stdout.write("scheduler stopped")
