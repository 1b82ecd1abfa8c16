"""`check_provider PROVIDER [--routing-domain ORG] [--wait SECONDS]` (PRV-7): create a sandbox, start the runner
with the built-in probe play, wait for it to reach SCHEDULER_PUBLIC_API_URL, delete the sandbox and read it back
gone. Each step is printed with its time; a failure is one line naming its cause, exit 1. Nothing is left behind,
even on Ctrl-C or SIGTERM."""

import signal
import sys

from django.core.management.base import CommandError
from django.db import DatabaseError

from scheduler.kinds import Provider, values
from scheduler.management.cli import SchedulerCommand, seconds
from scheduler.providers import checking
from scheduler.providers.base import ProviderError
from scheduler.providers.registry import get_provider


def _interrupted(signum, frame):
    raise KeyboardInterrupt  # the check's clean-up runs in its finally, as for Ctrl-C


class Command(SchedulerCommand):
    help = "Check a sandbox provider with a real account: sandbox, runner, heartbeat, delete, read-back."

    def add_arguments(self, parser):
        parser.add_argument("provider", choices=values(Provider))
        parser.add_argument("--routing-domain", default=None,
                            help="the organization (Daytona) or workspace (Modal) whose credential is used")
        parser.add_argument("--wait", type=seconds(positive=True), default=120.0,
                            help="how long to wait for the runner, and for the sandbox to be gone (default 120)")

    def handle(self, *args, **options):
        name = options["provider"]
        routing_domain = None if name == Provider.LOCAL else options["routing_domain"]
        if name != Provider.LOCAL and not routing_domain:
            raise CommandError("--routing-domain is required for a remote provider (whose credential to use)")
        try:
            provider = get_provider(name)
        except ProviderError as error:
            raise CommandError(f"{name}: {error}") from None
        say = lambda line: (self.stdout.write(line), self.stdout.flush())  # noqa: E731 - each step as it ends
        check = checking.ProviderCheck(provider, routing_domain, options["wait"], say)
        say(f"check_provider {name}{' for ' + routing_domain if routing_domain else ''} (check {check.check_id})")
        previous = signal.signal(signal.SIGTERM, _interrupted)
        try:
            result = check.run()
        except checking.CheckFailed as failed:
            self.stderr.write(f"check_provider: FAILED at {failed.step}: {failed.cause}: {failed.detail}")
            sys.exit(1)
        except KeyboardInterrupt:
            self.stderr.write("check_provider: interrupted; what it created was deleted")
            sys.exit(130)
        except DatabaseError as error:
            # The check keeps what the runner said in the scheduler's database: without it there is no check.
            raise CommandError(f"the scheduler's database is not reachable: {type(error).__name__}") from None
        finally:
            signal.signal(signal.SIGTERM, previous)
        output = result.get("output") or {}
        if result.get("status") != "completed":
            self.stderr.write(f"check_provider: FAILED at the probe play: the play failed: {result}")
            sys.exit(1)
        say(f"ok: the runner ran on Python {output.get('python')} ({output.get('executable')}) and reached "
            "the scheduler's API; the sandbox is gone")
