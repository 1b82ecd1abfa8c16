"""The cleanup sweep's provider calls, many at once (issue 47): a tick's time is the providers' latency.

A call thread only talks to the provider; it never touches the database,
so every write of the sweep stays on the tick's thread and connection, in
the order the answers arrive. With a concurrency of 1 the calls run on the
tick's thread, one after the other, a job's follow-up call before the next
job's first.
"""

from __future__ import annotations

import collections
import enum
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Callable, Iterator

from scheduler import call_pools, observability
from scheduler.cleanup.obligations import Job
from scheduler.providers import DeleteOutcome, ProviderError, ReadBack, SandboxProvider, SandboxRef


class Call(enum.Enum):
    DELETE = "delete"
    READ_BACK = "read_back"


@dataclass(frozen=True)
class Answer:
    """What the provider said to one call about one job: an outcome, or the error it raised."""

    job: Job
    outcome: DeleteOutcome | ReadBack | None = None
    error: ProviderError | None = None
    seen_domain: str | None = None  # the organization the answer named (CLN-6), when it says the sandbox is gone
    done_when_accepted: bool = True


def ask(job: Job, call: Call, provider_for: Callable[[str], SandboxProvider]) -> Answer:
    """One provider call for one job; a provider error is an answer, anything else a fault of the tick."""
    ref = SandboxRef(job.provider, job.sandbox_id, job.routing_domain)
    try:
        provider = provider_for(job.provider)
        if call is Call.DELETE:
            with observability.CLEANUP_DELETE_SECONDS.labels(job.provider).time():
                outcome: DeleteOutcome | ReadBack = provider.delete(ref)
        else:
            outcome = provider.read_back(ref)
    except ProviderError as error:
        return Answer(job, error=error)
    gone = outcome in (DeleteOutcome.ALREADY_ABSENT, ReadBack.DELETED)
    return Answer(job, outcome, seen_domain=provider.seen_domain(ref) if gone else None,
                  done_when_accepted=provider.delete_done_when_accepted)


class Calls:
    """A tick's provider calls: `ask` queues one, `arrived` yields the answers as they arrive."""

    def __init__(self, provider_for: Callable[[str], SandboxProvider], concurrency: int):
        self.provider_for = provider_for
        self.pool = call_pools.shared("cleanup-call", concurrency) if concurrency > 1 else None
        self.waiting: collections.deque[tuple[Job, Call]] = collections.deque()
        self.running: set[Future] = set()

    def ask(self, job: Job, call: Call, *, next: bool = False) -> None:
        if self.pool is not None:
            self.running.add(self.pool.submit(ask, job, call, self.provider_for))
        elif next:
            self.waiting.appendleft((job, call))
        else:
            self.waiting.append((job, call))

    def arrived(self) -> Iterator[list[Answer]]:
        """The answers as they arrive, those that arrived together in one list (one answer when called in turn)."""
        while self.waiting:
            yield [ask(*self.waiting.popleft(), self.provider_for)]
        while self.running:
            done, self.running = wait(self.running, return_when=FIRST_COMPLETED)
            yield [future.result() for future in done]
