"""`scheduler_workers`: every worker loop of a deployment, supervised, from the user's own project (APP-5).

Each loop runs as a child (`python -m scheduler <command>` with this
project's DJANGO_SETTINGS_MODULE), restarted with backoff when it exits; one
that keeps failing stops them all with a non-zero exit. SIGTERM or Ctrl-C
stops the children, then the runners of local sandboxes still running.
The web server (the internal API, /healthz, /metrics) is the project's own.
"""

from django.core.management.base import CommandError

from scheduler.management.cli import SchedulerCommand
from scheduler.stack.supervisor import Supervisor, child_environment, stop_local_sandboxes, worker_children

class Command(SchedulerCommand):
    help = "Run every scheduler worker loop as a supervised child process until SIGTERM or Ctrl-C."

    def handle(self, *args, **options):
        children = worker_children()
        self.stdout.write(f"scheduler workers: {', '.join(child.name for child in children)}; Ctrl-C stops them")
        self.stdout.flush()
        supervisor = Supervisor(children, child_environment())
        try:
            code = supervisor.run()
        finally:
            stop_local_sandboxes(self._say)
        if code:
            raise CommandError(f"{supervisor.gave_up} kept failing; every worker was stopped (see the log above)",
                               returncode=code)
        self.stdout.write("scheduler workers stopped")

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()
