"""`dispatch_runs [--once] [--limit N] [--starts N] [--interval S]`: claim queued runs, start their sandboxes
concurrently (up to --starts in flight), park each as its start returns."""

import logging

from scheduler.conf import scheduler_settings
from scheduler.management.cli import LoopCommand, integer
from scheduler.runs import dispatch


class Command(LoopCommand):
    help = "Claim queued runs (RUN-2), start each in its sandbox and park it (RUN-3)."
    loop_name = "dispatch"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--limit", type=integer(1), default=32, help="most runs claimed per tick")
        parser.add_argument("--starts", type=integer(1, 256), default=None,
                            help="sandbox starts in flight at once (default SCHEDULER_DISPATCH_STARTS)")

    def handle(self, *args, **options):
        if options["once"]:
            limit = options["limit"]
            self.run_loop(lambda: dispatch.run_once(limit, options["starts"]).as_tick(limit), options,
                          logging.getLogger("scheduler.dispatch"))
            return
        pool = dispatch.DispatchPool(options["starts"])
        # On SIGTERM the loop ends and the starts in flight finish and park before the process exits.
        self.run_loop(lambda: pool.tick(options["limit"]), options, logging.getLogger("scheduler.dispatch"),
                      wake_signal="run_queued", finish=pool.close,
                      cooldown=scheduler_settings.dispatch_cooldown_ms / 1000)
