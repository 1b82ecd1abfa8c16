"""The import surface of the scheduler's models (tables in SCHEDULER_SCHEMA)."""

from scheduler.models_cleanup import (  # noqa: F401
    BillingItem,
    BillingJob,
    CleanupEvent,
    CleanupJob,
    LegacyCleanupJob,
)
from scheduler.models_runs import (  # noqa: F401
    Attempt,
    ControlKey,
    OutboxEvent,
    ReleaseAdmission,
    Receipt,
    Run,
    RunLedgerEvent,
    SchemaVersion,
)
from scheduler.models_admin import AttemptRow, CleanupJobRow, ReceiptRow  # noqa: F401,E402
