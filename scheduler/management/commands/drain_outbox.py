"""`drain_outbox [--once] [--batch N] [--lane ledger|search] [--head-priority P] [--workers N]` (OBX-9).

Each worker is a Loop on its own thread, with its own connection and lease
owner. A LISTEN connection wakes them when a fact is inserted; polling is the
fallback. SIGTERM lets each worker finish its prefixes, returns the leases
it still holds, and exits 0.
"""

import logging
import threading
import uuid
from functools import partial

from scheduler import outbound
from scheduler.conf import scheduler_settings
from scheduler.kinds import HeadPriority, Lane, values
from scheduler.loop import Loop, arm_wake_signal, lease_owner, listen, run_together
from scheduler.management.cli import LoopCommand, integer, seconds
from scheduler.outbox import claims, drainer

logger = logging.getLogger("scheduler.drain")


def _finish(owner: str) -> None:
    """A stopping worker returns the leases it still holds and closes its pooled receiver connections."""
    try:
        claims.release_all(owner)
    finally:
        outbound.close_thread_transports()


class Command(LoopCommand):
    help = "Deliver outbox facts to their run-ledger receivers in per-run causal order."
    loop_name = "drain"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--batch", type=integer(1), default=50, help="prefixes per worker per tick")
        parser.add_argument("--lane", choices=values(Lane), default=Lane.LEDGER.value)
        parser.add_argument("--head-priority", choices=values(HeadPriority), default=HeadPriority.ADMISSION_FIRST.value)
        parser.add_argument("--workers", type=integer(1, 64), default=1)
        parser.add_argument("--max-attempts", type=integer(1), default=10, help="delivery attempts before a head is failed")
        parser.add_argument("--lease-seconds", type=seconds(positive=True), default=30.0,
                            help="how long a claimed prefix is held")

    def handle(self, *args, **options):
        stopping, wake = threading.Event(), threading.Event()
        base = lease_owner(uuid.uuid4().hex[:6])
        loops = [self._worker(f"{base}:{index}", options, stopping, wake) for index in range(options["workers"])]
        if not options["once"]:
            listen(f"{scheduler_settings.schema}_outbox_wake", stopping, wake, logger)
        self.exit_with(lambda: run_together(loops, "drain", logger))

    def _worker(self, owner: str, options: dict, stopping: threading.Event, wake: threading.Event) -> Loop:
        def tick():
            return drainer.run_once(owner, lane=Lane(options["lane"]), head_priority=HeadPriority(options["head_priority"]),
                                    batch=options["batch"], max_attempts=options["max_attempts"],
                                    lease_seconds=options["lease_seconds"], should_stop=stopping.is_set).as_tick()

        return Loop(f"drain {owner}", tick, interval=options["interval"], once=options["once"], logger=logger,
                    stopping=stopping, wake=wake, finish=partial(_finish, owner),
                    arm=None if options["once"] else partial(arm_wake_signal, "outbox_wake"))
