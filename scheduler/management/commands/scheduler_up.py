"""`scheduler_up`: migrate, then run the API and every worker loop until SIGTERM/SIGINT."""

import os

from django.core.management import call_command

from scheduler.conf import scheduler_settings
from scheduler.management.cli import SchedulerCommand
from scheduler.stack.demo import DemoRun
from scheduler.stack.supervisor import Supervisor, child_database_url, default_children, local_internal_token


class Command(SchedulerCommand):
    help = "Migrate the scheduler schema, then run gunicorn and the worker loops (Ctrl-C stops them)."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default=None, help="host:port for the API (default SCHEDULER_BIND)")
        parser.add_argument("--no-demo", action="store_true", help="do not launch the demo run")

    def handle(self, *args, **options):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("check_scheduler_schema")
        env = dict(os.environ, DATABASE_URL=child_database_url())
        token_note = ""
        if not scheduler_settings.internal_token:
            env["SCHEDULER_INTERNAL_TOKEN"], path = local_internal_token()
            token_note = f"; control API token in {path}"
        bind = options["bind"] or scheduler_settings.bind
        env.setdefault("SCHEDULER_PUBLIC_API_URL", f"http://{bind}")
        self.stdout.write(
            f"scheduler up: http://{bind}/healthz and http://{bind}/admin/ "
            f"(create an admin user with ./dev manage createsuperuser){token_note}; Ctrl-C stops it",
        )
        self.stdout.flush()
        supervisor = Supervisor(default_children(bind), env)
        if not options["no_demo"]:
            demo = DemoRun(lambda line: (self.stdout.write(line), self.stdout.flush()))
            supervisor.on_tick = demo.poll
            code = supervisor.run(on_started=lambda _: demo.launch())
        else:
            code = supervisor.run()
        if code:
            raise SystemExit(code)
        self.stdout.write("scheduler stopped")
