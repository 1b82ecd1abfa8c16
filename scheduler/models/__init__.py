"""The import surface of the scheduler's models (tables in SCHEDULER_SCHEMA), one module per room."""

from scheduler.models.admin_views import AttemptRow, CleanupJobRow, ReceiptRow, ScheduleFireRow  # noqa: F401
from scheduler.models.billing_tables import BillingItem, BillingJob  # noqa: F401
from scheduler.models.cleanup_tables import CleanupEvent, CleanupJob, LegacyCleanupJob  # noqa: F401
from scheduler.models.fairshare_tables import OrgClaimTurn, OrgLimit, OrgStart  # noqa: F401
from scheduler.models.operations_tables import OperatorAction  # noqa: F401
from scheduler.models.outbox_tables import OutboxFact, RunLedgerEvent, WakeSignal  # noqa: F401
from scheduler.models.schedule_tables import Schedule, ScheduleFire  # noqa: F401
from scheduler.models.wait_tables import RunEvent, RunWait  # noqa: F401
from scheduler.models.run_tables import (  # noqa: F401
    Attempt,
    ControlKey,
    LateRunnerResult,
    Receipt,
    ReleaseAdmission,
    Run,
    SchemaVersion,
)
