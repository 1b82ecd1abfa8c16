"""Dispatch (RUN-2, RUN-3): claim queued runs, start each in its sandbox, park it.

Starts run concurrently (DispatchPool): a dispatcher keeps up to
SCHEDULER_DISPATCH_STARTS starts in flight, parks each as soon as its start
returns, and claims only as many runs as it has free start slots, so no claim
waits behind another's start while its claim lease runs. The start threads
park through one group parker: the parks that finished meanwhile share one
statement (each fenced on its own), as the web process's terminals share a
settle.

The runner token handed to the sandbox is scoped to the claim's lease. A
sandbox that started but could not park (its runner already settled, or the
claim was lost) keeps its billing resource and gets a cleanup obligation, so
it is never leaked.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.db import connection, connections

from scheduler import db, outbound
from scheduler.cleanup.billing import TERMINAL_GRACE_SECONDS
from scheduler.conf import scheduler_settings
from scheduler.kinds import FailureCode, ResultStatus
from scheduler.faults import describe
from scheduler.tick import Tick
from scheduler.providers import ProviderError, get_provider, sandbox_placement
from scheduler.providers.base import StartRequest
from scheduler.runs import launch_rules, lifecycle, settlement
from scheduler.runs.batcher import StatementBatcher
from scheduler.runs.tokens import mint_runner_token

logger = logging.getLogger("scheduler.dispatch")


@dataclass
class DispatchTick:
    counts: dict = field(default_factory=lambda: {"claimed": 0, "parked": 0, "start_failed": 0, "unparked": 0,
                                                  "invalid_launch": 0})

    def as_tick(self, limit: int) -> Tick:
        """A tick that claimed its whole limit goes again at once: the queue may hold more."""
        return Tick(self.counts, again=self.counts["claimed"] >= limit)


def refuse_launch(claim: lifecycle.Claim, problem: str, result: DispatchTick) -> None:
    """Settle the attempt failed with the non-retryable invalid_launch: the next claim goes on."""
    result.counts["invalid_launch"] += 1
    logger.warning("dispatch run=%s attempt=%s refused: %s", claim.run_id, claim.attempt, problem)
    refused = {"status": ResultStatus.FAILED, "error": {"code": FailureCode.INVALID_LAUNCH, "message": problem},
               "verdict": FailureCode.INVALID_LAUNCH}
    settlement.settle_attempt(claim.run_id, claim.attempt, claim.lease_token, refused)


def _play_spec(claim: lifecycle.Claim) -> dict:
    play = claim.launch.get("play")
    if isinstance(play, dict):
        return play
    return {"callable": claim.play_name}


def runner_env(claim: lifecycle.Claim, heartbeat_timeout_ms: int) -> dict[str, str]:
    """What the runner needs to know; PATH and PYTHONPATH are the sandbox's own (a remote image keeps its own)."""
    return {
        "LC_ALL": "C.UTF-8",
        "SCHEDULER_API_URL": claim.launch.get("runnerApiUrl") or scheduler_settings.public_api_url,
        "SCHEDULER_RUNNER_TOKEN": mint_runner_token(claim.run_id, claim.attempt, claim.lease_token),
        "SCHEDULER_RUN_ID": claim.run_id,
        "SCHEDULER_ATTEMPT": str(claim.attempt),
        "SCHEDULER_LEASE_TOKEN": claim.lease_token,
        "SCHEDULER_PLAY": json.dumps(_play_spec(claim)),
        "SCHEDULER_PLAY_INPUT": json.dumps(claim.input),
        "SCHEDULER_HEARTBEAT_TIMEOUT_MS": str(heartbeat_timeout_ms),
    }


def sandbox_lifetime(launch: dict) -> int | None:
    """PRV-5: the launch's sandbox timeout plus the terminal grace (the most a run may bill), when it names one."""
    sandbox = (launch.get("contractSnapshot") or {}).get("sandbox") or {}
    seconds = sandbox.get("timeoutSeconds") if isinstance(sandbox, dict) else None
    if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0:
        return seconds + TERMINAL_GRACE_SECONDS
    return None


def dispatch_claim(claim: lifecycle.Claim, result: DispatchTick, park: Callable[[lifecycle.Park], bool]) -> None:
    launch = claim.launch
    provider_name, routing_domain = sandbox_placement(launch, claim.org_id)
    timeout_ms = int(launch.get("heartbeatTimeoutMs") or scheduler_settings.heartbeat_timeout_ms)
    request = StartRequest(claim.run_id, claim.attempt, routing_domain, runner_env(claim, timeout_ms),
                           ["python3", "-m", "scheduler.sandbox.runner"], lifetime_seconds=sandbox_lifetime(launch))
    try:
        provider = get_provider(provider_name)
        request.command[0] = provider.runner_python
        ref = provider.start(request)
    except ProviderError as error:
        result.counts["start_failed"] += 1
        logger.warning("dispatch run=%s attempt=%s provider=%s start failed: %s", claim.run_id, claim.attempt, provider_name, error)
        # A retryable loss: the run goes back to the queue while attempts remain.
        lost = {"status": ResultStatus.FAILED, "error": {"code": FailureCode.DISPATCH_LOST, "message": str(error)[:500]},
                "verdict": FailureCode.DISPATCH_LOST}
        settlement.settle_attempt(claim.run_id, claim.attempt, claim.lease_token, lost)
        _keep_what_a_failed_start_left(claim, request, provider_name, error)
        return
    now_ms = int(time.time() * 1000)
    resource = _resource(ref, request, now_ms)
    parked = park(lifecycle.Park(claim.run_id, claim.attempt, claim.lease_token, ref.as_json(), timeout_ms, now_ms,
                                 resource))
    if parked:
        result.counts["parked"] += 1
        logger.info("dispatch run=%s attempt=%s provider=%s sandbox=%s parked", claim.run_id, claim.attempt,
                    provider_name, ref.sandbox_id)
        return
    result.counts["unparked"] += 1
    _keep_for_cleanup(claim, ref, resource)
    logger.info("dispatch run=%s attempt=%s sandbox=%s could not park; cleanup obligation written",
                claim.run_id, claim.attempt, ref.sandbox_id)


def _resource(ref, request: StartRequest, now_ms: int) -> dict:
    return {**ref.as_json(), "billingStartedAt": now_ms, "cpu": request.cpu, "memoryMb": request.memory_mb}


def _keep_for_cleanup(claim: lifecycle.Claim, ref, resource: dict) -> None:
    """A sandbox its attempt will never use: keep its billing resource and give it a cleanup obligation."""
    db.run("runs_record_unparked_sandbox", {
        "run_id": claim.run_id, "attempt": claim.attempt, "provider": ref.provider, "sandbox_id": ref.sandbox_id,
        "routing_domain": ref.routing_domain, "resource": json.dumps(resource),
    })


def _keep_what_a_failed_start_left(claim: lifecycle.Claim, request: StartRequest, provider_name: str,
                                   error: ProviderError) -> None:
    """A start can fail half-way (a Daytona sandbox created, never started): the sandbox its error names gets its
    obligation now, and so does whatever its tags find. When no answer named one and the failure was not a refusal
    (a create that timed out may still be made), the sweep is left a hint to list the attempt's sandboxes again."""
    left = [error.sandbox] if error.sandbox is not None else []
    try:
        left += [ref for ref in get_provider(provider_name).find_started(claim.run_id, claim.attempt,
                                                                          request.routing_domain) if ref not in left]
    except ProviderError as listing:
        logger.warning("dispatch run=%s attempt=%s provider=%s could not list what the failed start left: %s",
                       claim.run_id, claim.attempt, provider_name, listing)
    if error.sandbox is None and not error.permanent:
        db.run("control_hint_failed_start", {"run_id": claim.run_id, "attempt": claim.attempt})
    now_ms = int(time.time() * 1000)
    for ref in left:
        _keep_for_cleanup(claim, ref, _resource(ref, request, now_ms))
        logger.info("dispatch run=%s attempt=%s sandbox=%s left by a failed start; cleanup obligation written",
                    claim.run_id, claim.attempt, ref.sandbox_id)


def start_claim(claim: lifecycle.Claim, result: DispatchTick,
                park: Callable[[lifecycle.Park], bool] = lifecycle.park_one) -> None:
    """One claimed run: refused when its launch cannot start, else started and parked (by `park`)."""
    problem = launch_rules.problem(claim.launch)
    if problem:
        refuse_launch(claim, problem, result)
    else:
        dispatch_claim(claim, result, park)


class DispatchPool:
    """Up to `max_starts` starts in flight; each tick claims only free slots and hands each claim to a thread."""

    def __init__(self, max_starts: int | None = None):
        self.max_starts = max_starts or scheduler_settings.dispatch_starts
        self._executor = ThreadPoolExecutor(self.max_starts, thread_name_prefix="dispatch-start")
        self._lock = threading.Lock()
        self._in_flight = 0
        self._finished = DispatchTick()
        self._slot_freed = threading.Event()
        self._looked_again = False  # the last tick was a look again after a claim that skipped locked runs
        # At most one park per start slot can be waiting, so a batch never needs to be larger.
        self._parker = StatementBatcher(lifecycle.park_all, max_batch=self.max_starts, name="dispatch-parker")

    def tick(self, limit: int, *, slot_wait: float = 1.0) -> Tick:
        """Claim min(limit, free slots) runs and start them; with no free slot, wait (bounded) for one."""
        free = self.max_starts - self._in_flight
        if free <= 0:
            self._slot_freed.wait(slot_wait)
            self._slot_freed.clear()
            return Tick(self._take_counts(0), again=True)
        wanted = min(limit, free)
        claims = lifecycle.claim_queued_runs(wanted)
        for claim in claims:
            with self._lock:
                self._in_flight += 1
            self._executor.submit(self._start, claim)
        # A tick that claimed anything looks again at once, not only a full one: launches that come faster than a
        # tick then keep the dispatcher claiming, where arming its wake signal and waiting for the NOTIFY cost each
        # launch two more statements and a notifying commit (paced p50 22 -> 12 ms at 80% of its start rate). The
        # first look that finds nothing arms the signal. A partial claim's next look waits out the loop's cooldown
        # (SCHEDULER_DISPATCH_COOLDOWN_MS), so the launches of those milliseconds share one claim. A claim that
        # chose runs and took none, each locked for a moment (claims.skipped), looks again once after the cooldown:
        # the NOTIFY that woke it is spent, so the run would otherwise wait for the next launch or the interval.
        # Once only: a lock held long (a stuck transaction) must not keep the dispatcher looking every cooldown.
        look_again = claims.skipped and not self._looked_again
        self._looked_again = look_again
        return Tick(self._take_counts(len(claims)), again=bool(claims),
                    partial=0 < len(claims) < wanted or look_again)

    def _start(self, claim: lifecycle.Claim) -> None:
        partial = DispatchTick()
        try:
            start_claim(claim, partial, self._parker.submit)
        except Exception as error:  # noqa: BLE001 - the claim lease expires and the sweep recovers it (RUN-9)
            logger.warning("dispatch run=%s attempt=%s start failed in its thread: %s", claim.run_id, claim.attempt,
                           describe(error))
            # A connection the failure broke (a database restart) is closed here, or every later start of this
            # thread would fail on it: no request or tick boundary checks the start threads' connections.
            for thread_connection in connections.all(initialized_only=True):
                thread_connection.close_if_unusable_or_obsolete()
        finally:
            # The thread keeps whatever connection its own statements opened (a failed start's settlement, a
            # cleanup obligation) for its next start; parks go through the parker's; close() closes them all.
            with self._lock:
                self._in_flight -= 1
                for key, value in partial.counts.items():
                    self._finished.counts[key] += value
            self._slot_freed.set()

    def _take_counts(self, claimed: int) -> dict:
        with self._lock:
            counts, self._finished = self._finished.counts, DispatchTick()
        counts["claimed"] = claimed
        return counts

    def close(self) -> dict:
        """Wait for the starts in flight (each parks or is settled), close every start thread's connection, stop."""
        every_thread = threading.Barrier(self.max_starts)

        def close_this_threads_connection() -> None:
            connections.close_all()
            outbound.close_thread_transports()  # the provider's kept HTTP connections too
            every_thread.wait(60)  # so each of the pool's threads runs exactly one of these

        for _ in range(self.max_starts):
            self._executor.submit(close_this_threads_connection)
        self._executor.shutdown(wait=True)
        self._parker.close()  # after the starts: each of them parks through it
        return self._take_counts(0)


def run_once(limit: int = 10, max_starts: int | None = None) -> DispatchTick:
    """One claim of up to `limit` runs, started concurrently; returns once every start has parked or failed.

    Inside a caller's transaction the starts run in this thread instead: other threads could not see it.
    """
    result = DispatchTick()
    if connection.in_atomic_block:
        claims = lifecycle.claim_queued_runs(limit)
        result.counts["claimed"] = len(claims)
        for claim in claims:
            start_claim(claim, result)
        return result
    pool = DispatchPool(max_starts or min(limit, scheduler_settings.dispatch_starts))
    claimed = pool.tick(limit).counts["claimed"]
    result.counts.update(pool.close())
    result.counts["claimed"] = claimed
    return result
