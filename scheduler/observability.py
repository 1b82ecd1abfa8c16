"""The scheduler's Prometheus instruments: what an operator alerts on.

Workers and web threads record into these; `GET /metrics` reports them with
the database gauges. With PROMETHEUS_MULTIPROC_DIR set (scheduler_up sets it
for its children) every process of one machine writes there and /metrics
aggregates them (prometheus-client's multiprocess mode); without it each
process reports its own.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from prometheus_client import Counter, Histogram

WORKER_TICK_SECONDS = Histogram("scheduler_worker_tick_seconds", "Duration of one worker loop tick.", ["worker"])
WORKER_TICK_FAILURES = Counter("scheduler_worker_tick_failures", "Worker ticks that failed (and were retried).",
                               ["worker"])
SETTLE_BATCH_SIZE = Histogram("scheduler_settle_batch_size", "Attempts settled per settlement statement.",
                              buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 500))
LAUNCH_BATCH_SIZE = Histogram("scheduler_launch_batch_size",
                              "Runs inserted per launch statement (a web process's group launcher).",
                              buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 500))
HEARTBEAT_BATCH_SIZE = Histogram("scheduler_heartbeat_batch_size",
                                 "Runner heartbeats bumped per heartbeat statement (a web process's group heartbeater).",
                                 buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 500))
PARK_BATCH_SIZE = Histogram("scheduler_park_batch_size",
                            "Attempts parked per park statement (a dispatcher's group parker).",
                            buckets=(1, 2, 4, 8, 16, 32, 64, 128))
DELIVERY_SECONDS = Histogram("scheduler_delivery_seconds", "Delivery of one prefix to its run-ledger receiver.",
                             ["receiver"])
DELIVERY_FAILURES = Counter("scheduler_delivery_failures", "Prefixes whose delivery failed.", ["receiver"])
CLEANUP_DELETE_SECONDS = Histogram("scheduler_cleanup_delete_seconds", "A provider's answer to a sandbox delete.",
                                   ["provider"])


def receiver_label(base_url: str | None) -> str:
    """A receiver's origin (scheme://host:port), or `builtin`: never a path, a query or a credential."""
    if not base_url:
        return "builtin"
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"
