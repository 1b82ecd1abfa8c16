"""`scheduler_up`: this repository's development stack (`./dev up`).

Migrates, collects the admin's static files, then runs gunicorn beside the
children of `scheduler_workers` (scheduler/stack/supervisor.py) on one
database, the embedded server's when DATABASE_URL is unset, and launches the
demo. Everything here is this repository's: a user's project runs
`scheduler_workers` and its own web server instead.
"""

import hashlib
import os
import secrets
import sys
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import OperationalError

from scheduler.conf import scheduler_settings
from scheduler.faults import describe
from scheduler.management.cli import SchedulerCommand
from scheduler.stack.demo import Demo
from scheduler.stack.supervisor import (AlreadyRunning, Child, Supervisor, child_environment, single_instance,
                                        stop_local_sandboxes, worker_children)

EMBEDDED = Path(settings.BASE_DIR) / ".embedded"


def child_database_url() -> str:
    if scheduler_settings.embedded_database:
        from config.embedded_pg import database_url

        return database_url()
    return os.environ["DATABASE_URL"]


def local_internal_token() -> tuple[str, Path]:
    """A control-API token for a local set-up without SCHEDULER_INTERNAL_TOKEN: a 0600 file, never printed."""
    path = EMBEDDED / "internal_token"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(32))
    return path.read_text().strip(), path


def fresh_metrics_dir() -> Path:
    """An empty directory for prometheus-client's multiprocess files (a previous run's would be counted again)."""
    path = EMBEDDED / "prometheus"
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink()
    return path


def stack_children(bind: str) -> list[Child]:
    gunicorn = [sys.executable, "-m", "gunicorn", "-c", str(Path(settings.BASE_DIR) / "config" / "gunicorn.conf.py"),
                "--bind", bind]
    return [Child("web", gunicorn), *worker_children()]


def _instance_lock() -> tuple[Path, str]:
    """Where the one-instance lock lives: the embedded server's directory, or one lock per other database."""
    if scheduler_settings.embedded_database:
        from config.embedded_pg import EMBEDDED_DIR

        return EMBEDDED_DIR, "scheduler_up.lock"
    database = hashlib.sha256(child_database_url().encode()).hexdigest()[:12]
    return Path(scheduler_settings.sandbox_dir).parent, f"scheduler_up-{database}.lock"


class Command(SchedulerCommand):
    help = "Migrate the scheduler schema, then run gunicorn and the worker loops (Ctrl-C stops them)."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default=None, help="host:port for the API (default SCHEDULER_BIND)")
        parser.add_argument("--no-demo", action="store_true", help="do not launch the demo run")

    def handle(self, *args, **options):
        try:
            with single_instance(*_instance_lock()):
                code = self._up(options)
        except AlreadyRunning as error:
            raise CommandError(str(error)) from None
        if code:
            raise CommandError("a worker kept failing; everything was stopped (see the log above)", returncode=code)
        self.stdout.write("scheduler stopped")

    def _up(self, options) -> int:
        try:
            call_command("migrate", interactive=False, verbosity=0)
        except OperationalError as error:
            raise CommandError(f"cannot reach the database: {describe(error)}") from None
        call_command("check_scheduler_schema")
        # The admin's CSS and scripts, compressed and hashed, for gunicorn to serve through WhiteNoise.
        call_command("collectstatic", interactive=False, verbosity=0)
        env = child_environment(dict(os.environ, DATABASE_URL=child_database_url()))
        token_note = ""
        if not scheduler_settings.internal_token:
            env["SCHEDULER_INTERNAL_TOKEN"], path = local_internal_token()
            token_note = f"; control API token in {path}"
        bind = options["bind"] or scheduler_settings.bind
        env.setdefault("SCHEDULER_PUBLIC_API_URL", f"http://{bind}")
        env["SCHEDULER_BIND"] = bind  # what the local provider checks before it starts plays
        env["PROMETHEUS_MULTIPROC_DIR"] = str(fresh_metrics_dir())  # /metrics aggregates every child's histograms
        self._say(f"scheduler up: http://{bind}/healthz and http://{bind}/admin/ "
                  f"(create an admin user with ./dev manage createsuperuser){token_note}; Ctrl-C stops it")
        supervisor = Supervisor(stack_children(bind), env)
        try:
            if options["no_demo"]:
                return supervisor.run()
            demo = Demo(self._say)
            supervisor.on_tick = demo.poll
            return supervisor.run(on_started=lambda _: demo.launch())
        finally:
            stop_local_sandboxes(self._say)

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()
