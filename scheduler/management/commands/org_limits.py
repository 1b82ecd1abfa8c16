"""`org_limits show|set|pause|resume ORG_ID [--max-active N|none] [--max-starts-per-minute N|none] [--weight N]
[--reason TEXT]`: read or change an org's limits and weight (FSH-10, FSH-11); every change is audited in
operator_actions."""

import argparse

from django.core.management.base import CommandError

from scheduler.errors import SchedulerError
from scheduler.fairshare import limits
from scheduler.management.cli import SchedulerCommand, integer
from scheduler.operations.cli_actor import command_actor
from scheduler.validation import MAX_INT32


def _limit(text: str):
    """An argparse type: a whole number 0..2^31-1, or `none` to clear the limit."""
    return None if text.strip().lower() == "none" else integer(0, MAX_INT32)(text)


_limit.__name__ = "limit"


class Command(SchedulerCommand):
    help = "Show or change an org's limits: its cap on active runs, its start rate, its pause (FSH-10)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["show", "set", "pause", "resume"])
        parser.add_argument("org_id")
        parser.add_argument("--max-active", type=_limit, default=argparse.SUPPRESS,
                            help="most active runs (0 holds everything; none: the default SCHEDULER_ORG_MAX_ACTIVE)")
        parser.add_argument("--max-starts-per-minute", type=_limit, default=argparse.SUPPRESS,
                            help="most claims in any rolling minute (none: no start rate)")
        parser.add_argument("--weight", type=integer(1, 1000), default=argparse.SUPPRESS,
                            help="the org's share of the claims beside other backlogged orgs, relative to theirs "
                                 "(1..1000, default 1)")
        parser.add_argument("--reason", default=argparse.SUPPRESS, help="why (kept on the org and in the audit row)")

    def handle(self, *args, **options):
        action, org_id = options["action"], options["org_id"].strip()
        if not org_id:
            raise CommandError("ORG_ID must not be empty")
        given = {name: options[name] for name in ("max_active", "max_starts_per_minute", "weight", "reason")
                 if name in options}
        if action != "set" and set(given) - {"reason"}:
            raise CommandError(f"{action} takes only --reason; use set for --max-active, --max-starts-per-minute "
                               "and --weight")
        if action == "set" and not given:
            raise CommandError("set needs --max-active, --max-starts-per-minute, --weight or --reason")
        try:
            if action != "show":
                paused = {"pause": True, "resume": False}.get(action)
                wanted = limits.LimitsChange(**given, paused=paused)
                limits.change(org_id, wanted, actor=command_actor(), action=f"org_limits_{action}")
            state = limits.read(org_id)
        except SchedulerError as error:
            raise CommandError(error.message) from None
        self.stdout.write(
            f"{state.org_id}: {'paused' if state.paused else 'dispatching'}, "
            f"max active {state.max_active if state.max_active is not None else 'default'}, "
            f"max starts/min {state.max_starts_per_minute if state.max_starts_per_minute is not None else 'none'}, "
            f"weight {state.weight}, "
            f"{state.active} active, {state.queued} queued" + (f" ({state.reason})" if state.reason else ""))
