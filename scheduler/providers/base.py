"""The sandbox provider interface: start, inspect, delete, read back.

Credentials are chosen by the ref's routing domain (the organization). A
provider answers "not found" to a request made with another organization's
credential, so "not found" means gone only under the organization's own
credential; with no credential for that organization the call is not made
and the answer is a permanent error.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from scheduler.kinds import SUSPENSION_FALLBACK_PROVIDER


class Inspection(enum.Enum):
    RUNNING = "running"
    GONE = "gone"
    UNKNOWN = "unknown"


class DeleteOutcome(enum.Enum):
    ACCEPTED = "accepted"
    ALREADY_ABSENT = "already_absent"


class ReadBack(enum.Enum):
    DELETED = "deleted"
    STILL_PRESENT = "still_present"
    UNKNOWN = "unknown"


class ProviderCause(enum.StrEnum):
    """Why a provider call failed, in the words `check_provider` gives a user (PRV-7)."""

    CREDENTIAL_REFUSED = "credential refused"
    NOT_FOUND = "snapshot, image or sandbox not found"
    UNREACHABLE = "provider API not reachable"
    REQUEST_REFUSED = "request refused by the provider"
    RATE_LIMITED = "rate-limited by the provider"
    UNAVAILABLE = "provider unavailable"
    MALFORMED_ANSWER = "provider answered something it does not document"
    SANDBOX_FAILED = "sandbox failed to start"
    START_TIMEOUT = "sandbox did not start in time"
    NOT_CONFIGURED = "provider not configured"


class ProviderError(Exception):
    """A provider call failed. `permanent` errors are not retried (CLN-7 blocks the job);
    `retry_after` (seconds, from a rate limit's Retry-After) is the earliest the cleanup backoff retries.
    `sandbox` names the sandbox a start created before it failed (it still needs its cleanup obligation)."""

    def __init__(self, message: str, *, permanent: bool = False, retry_after: float | None = None,
                 cause: ProviderCause = ProviderCause.UNAVAILABLE):
        super().__init__(message)
        self.permanent = permanent
        self.retry_after = retry_after
        self.cause = cause
        self.sandbox: SandboxRef | None = None


@dataclass(frozen=True)
class SandboxRef:
    provider: str
    sandbox_id: str
    routing_domain: str | None = None

    def as_json(self) -> dict:
        return {"provider": self.provider, "sandboxId": self.sandbox_id, "routingDomain": self.routing_domain}

    @classmethod
    def from_suspension(cls, suspension: dict) -> "SandboxRef":
        """requirements §1.9: runtimeSandboxRef.provider, then sandboxProvider, then the fallback provider."""
        ref = suspension.get("runtimeSandboxRef") or {}
        provider = ref.get("provider") or suspension.get("sandboxProvider") or SUSPENSION_FALLBACK_PROVIDER.value
        return cls(provider, ref.get("sandboxId") or "", ref.get("routingDomain") or None)


@dataclass
class StartRequest:
    run_id: str
    attempt: int
    routing_domain: str | None
    env: dict[str, str]
    command: list[str]
    cpu: float = 1.0
    memory_mb: int = 512
    # PRV-5: how long the sandbox may live (the launch's timeoutSeconds plus the terminal grace), when it says.
    lifetime_seconds: int | None = None


class SandboxProvider:
    name = "base"
    # The interpreter a sandbox runs `python -m scheduler.sandbox.runner` with.
    runner_python = "python3"
    # Whether a read-back right after an accepted delete can see it done; a provider whose deletes finish later
    # is read back after the sweep's delay instead (a read at once only costs a request and a write).
    delete_done_when_accepted = True

    def start(self, request: StartRequest) -> SandboxRef:
        raise NotImplementedError

    def inspect(self, ref: SandboxRef) -> Inspection:
        raise NotImplementedError

    def delete(self, ref: SandboxRef) -> DeleteOutcome:
        raise NotImplementedError

    def read_back(self, ref: SandboxRef) -> ReadBack:
        raise NotImplementedError

    def seen_domain(self, ref: SandboxRef) -> str | None:
        """The organization the provider's last answer about this sandbox named (CLN-6), or None.

        A job whose routing domain is unknown (a legacy row) learns it from
        here when cleanup completes.
        """
        return None

    def find_started(self, run_id: str, attempt: int, routing_domain: str | None) -> list[SandboxRef]:
        """Sandboxes a start for this attempt left behind (found by the tags `start` gave them).

        The recovery of a claim whose dispatcher died between start and park
        (RUN-9) asks, so that sandbox still gets its cleanup obligation.
        """
        raise NotImplementedError
