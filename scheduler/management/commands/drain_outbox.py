"""`drain_outbox [--once] [--batch N] [--lane ledger|search] [--head-priority P] [--workers N]` (OBX-9).

Each worker is a Loop on its own thread, with its own connection and lease
owner. A LISTEN connection wakes them when a fact is inserted; polling is the
fallback. SIGTERM lets each worker finish its prefixes, returns the leases
it still holds, and exits 0.
"""

import logging
import uuid
from functools import partial

from scheduler import outbound
from scheduler.kinds import HeadPriority, Lane, values
from scheduler.loop import lease_owner
from scheduler.conf import scheduler_settings
from scheduler.management.cli import LoopCommand, integer, seconds
from scheduler.outbox import drainer, settle

logger = logging.getLogger("scheduler.drain")
DEFAULTS = drainer.DrainOptions()


def _finish(owner: str) -> None:
    """A stopping worker returns the leases it still holds and closes its pooled receiver connections."""
    try:
        settle.release_all(owner)
    finally:
        outbound.close_thread_transports()


class Command(LoopCommand):
    help = "Deliver outbox facts to their run-ledger receivers in per-run causal order."
    loop_name = "drain"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--batch", type=integer(1), default=DEFAULTS.batch, help="prefixes per worker per tick")
        parser.add_argument("--lane", choices=values(Lane), default=DEFAULTS.lane.value)
        parser.add_argument("--head-priority", choices=values(HeadPriority), default=DEFAULTS.head_priority.value)
        parser.add_argument("--workers", type=integer(1, 64), default=1)
        parser.add_argument("--max-attempts", type=integer(1), default=DEFAULTS.max_attempts,
                            help="delivery attempts before a head is failed")
        parser.add_argument("--lease-seconds", type=seconds(positive=True), default=DEFAULTS.lease_seconds,
                            help="how long a claimed prefix is held")

    def handle(self, *args, **options):
        drain = dict(lane=Lane(options["lane"]), head_priority=HeadPriority(options["head_priority"]),
                     batch=options["batch"], max_attempts=options["max_attempts"],
                     lease_seconds=options["lease_seconds"])
        base = lease_owner(uuid.uuid4().hex[:6])

        def worker(owner: str):
            tick = lambda: drainer.run_once(owner, should_stop=self.stopping.is_set, **drain).as_tick()  # noqa: E731
            return f"drain {owner}", tick, partial(_finish, owner)

        self.run_workers([worker(f"{base}:{index}") for index in range(options["workers"])], options, logger,
                         wake_signal="outbox_wake", cooldown=scheduler_settings.drain_cooldown_ms / 1000)
