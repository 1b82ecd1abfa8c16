"""The scheduler's closed vocabularies, as enums shared by Python and the SQL parameters.

Each is a StrEnum, so a member is passed to PostgreSQL as its text and a
misspelt name fails in Python (`VerdictKind("runer_lost")` raises) instead of
reading as a silent non-match in SQL. Section numbers are those of
docs/requirements.md.
"""

from __future__ import annotations

import enum

from scheduler.sandbox import protocol


class RunStatus(enum.StrEnum):
    """§1.1: the statuses of a run; the last three are terminal and frozen."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_RUN_STATUSES


TERMINAL_RUN_STATUSES = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})


class QueuedBecause(enum.StrEnum):
    """FSH-9: why a queued run still waits (the fragment queued_because spells the same list)."""

    TURN = "turn"
    ORG_LIMIT = "org_limit"
    CONCURRENCY_KEY = "concurrency_key"
    RATE_LIMIT = "rate_limit"
    PAUSED = "paused"
    NOT_BEFORE = "not_before"
    # WAIT-6: not queued but waiting durably, for what (kinds.WaitKind's values).
    EVENT = "event"
    TIMER = "timer"


class HeldReason(enum.StrEnum):
    """RET-1: why a finished run past retention is kept (sql/fragments_retention.sql spells each)."""

    UNDELIVERED_FACTS = "undelivered_facts"
    CLEANUP_PENDING = "cleanup_pending"
    BILLING_UNFINALIZED = "billing_unfinalized"


class ScheduleOverlap(enum.StrEnum):
    """SCD-5: what a slot does while the schedule's previous run is not terminal."""

    ALLOW = "allow"
    SKIP = "skip"
    CANCEL_PREVIOUS = "cancel_previous"


class ScheduleCatchUp(enum.StrEnum):
    """SCD-4: which slots missed during downtime fire."""

    SKIP = "skip"
    LATEST = "latest"
    ALL = "all"


class FireOutcome(enum.StrEnum):
    """SCD-2: what became of one slot of a schedule."""

    LAUNCHED = "launched"
    SKIPPED_OVERLAP = "skipped_overlap"
    SKIPPED_CLOSED_RELEASE = "skipped_closed_release"
    SKIPPED_CATCH_UP = "skipped_catch_up"
    REFUSED = "refused"


class AttemptStatus(enum.StrEnum):
    """§1.2: the statuses of an attempt."""

    CLAIMED = "claimed"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RELEASED = "released"
    SUSPENDED = "suspended"  # WAIT-2: ended by a durable wait; not a failure, not counted against maxAttempts


# §1.2: "a newer attempt exists" means a higher attempt in one of these statuses
# (a released claim does not fence). The SQL fragment newer_attempt_exists spells
# the same list; a test holds the two together.
FENCING_ATTEMPT_STATUSES = (
    AttemptStatus.CLAIMED, AttemptStatus.RUNNING, AttemptStatus.WAITING, AttemptStatus.COMPLETED, AttemptStatus.FAILED,
    AttemptStatus.SUSPENDED,
)


class ReceiptStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"


class ReceiptOutcome(enum.StrEnum):
    """RCP-1: what a receipt call means for its caller, key by key."""

    CLAIMED = "claimed"      # the caller holds the lease: run the step
    COMPLETED = "completed"  # done (now or before): use the output, skip the step
    SKIPPED = "skipped"      # marked skipped: skip the step
    FAILED = "failed"        # failed (final, or in this attempt): nothing to run
    QUEUED = "queued"        # released or declared: claimable
    EXTENDED = "extended"    # the caller's lease was extended
    HELD = "held"            # another holder's live lease: try later
    LOST = "lost"            # the caller's lease no longer holds: its write was refused


RECEIPT_KEY_RESERVED_PREFIX = protocol.RESERVED_KEY_PREFIX  # RCP-2: immutable through every receipt call


class CleanupStatus(enum.StrEnum):
    PENDING = "pending"
    BLOCKED = "blocked"
    DELETED = "deleted"


class ResultStatus(enum.StrEnum):
    """The status of a runner terminal envelope."""

    COMPLETED = "completed"
    FAILED = "failed"
    SUSPENDED = "suspended"  # WAIT-2: the play waits (sql/waits.sql settles it, never attempts_settle)


class WaitKind(enum.StrEnum):
    """WAIT-2: what a durably waiting run waits for (its suspension_json.kind; the fragment durable_wait spells both)."""

    EVENT = "event"
    TIMER = "timer"


class WaitOutcome(enum.StrEnum):
    """WAIT-1: what beginning a wait answers the play."""

    COMPLETED = "completed"  # satisfied (now or before): the stored result is the wait's answer
    SUSPEND = "suspend"      # not yet: the play ends its attempt with a suspended result


class FailureCode(enum.StrEnum):
    """Error codes the scheduler itself writes into a terminal result."""

    RUNNER_LOST = "runner_lost"
    DISPATCH_LOST = "dispatch_lost"
    CANCELLED = "cancelled"
    WAIT_DEADLINE_EXCEEDED = "wait_deadline_exceeded"
    INVALID_LAUNCH = "invalid_launch"  # the dispatcher cannot start what the launch asks for; not retried
    # Written by the runner, inside the sandbox (scheduler/sandbox/protocol.py names them for both sides).
    PLAY_START_FAILED = protocol.PLAY_START_FAILED
    UNSTORABLE_OUTPUT = protocol.UNSTORABLE_OUTPUT


# TRM-5: losses that requeue the run while attempts remain.
RETRYABLE_CODES = (FailureCode.RUNNER_LOST, FailureCode.DISPATCH_LOST)


class VerdictKind(enum.StrEnum):
    """SWP-4, RUN-10, SWP-7: the verdicts the liveness sweep records on a parked attempt."""

    RUNNER_LOST = "runner_lost"
    CANCEL_UNACKNOWLEDGED = "cancel_unacknowledged"
    WAIT_DEADLINE_EXCEEDED = "wait_deadline_exceeded"


class Provider(enum.StrEnum):
    """§10: the sandbox providers."""

    DAYTONA = "daytona"
    MODAL = "modal"
    LOCAL = "local"


# §1.9: a suspension that names no provider was written by a Daytona-only release.
SUSPENSION_FALLBACK_PROVIDER = Provider.DAYTONA


class Lane(enum.StrEnum):
    """§1.3: the outbox lanes."""

    LEDGER = "ledger"
    SEARCH = "search"


class ReceiverKind(enum.StrEnum):
    """OBX-8, OBX-10: where a claimed prefix is delivered (outbox/receivers/: one module each)."""

    BUILTIN = "builtin"  # this database's run_ledger_events (a launch naming no receiver)
    SEARCH = "search"    # the search lane: the scheduler's own projection reads the outbox itself
    HTTP = "http"        # an external run-ledger receiver


# OBX-10: receivers inside this database, so a prefix bound for one is delivered inside its claim's transaction.
IN_DATABASE_RECEIVERS = frozenset({ReceiverKind.BUILTIN, ReceiverKind.SEARCH})


class HeadPriority(enum.StrEnum):
    """OBX-2: the orders in which a drainer lists ready runs."""

    ADMISSION_FIRST = "admission_first"
    OLDEST_READY = "oldest_ready"


class Environment(enum.StrEnum):
    """ADM-1: the deployment environments a release admission key may name."""

    PREVIEW = "preview"
    PRODUCTION = "production"


TERMINAL_FACT_TYPES = ("run.completed", "run.failed", "run.cancelled")


def values(kind: type[enum.StrEnum]) -> tuple[str, ...]:
    """The members' texts, in declaration order (for messages and choices)."""
    return tuple(member.value for member in kind)
