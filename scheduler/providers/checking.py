"""PRV-7, `manage.py check_provider`: what a user with a real account runs first.

It creates a minimal sandbox through the provider's own start (so the runner is carried in as for any run),
with the built-in probe play, and waits for the runner to reach the scheduler's API at SCHEDULER_PUBLIC_API_URL
(its heartbeat, then its terminal); then it deletes the sandbox and reads it back gone. The check is no run: its
run id (`check_<hex>`) names no row, its runner token is minted for it like any other, and the runner endpoints
keep what such a runner says under one control key (provider_check_record) that the check reads and forgets.
Every step is timed; a failure is one line naming its cause. Whatever happens, even an interrupt, the sandbox it
created (or that its start's labels find) is deleted and the control key removed.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import connections

from scheduler import db
from scheduler.conf import scheduler_settings
from scheduler.providers.base import (DeleteOutcome, ProviderCause, ProviderError, ReadBack, SandboxProvider,
                                      SandboxRef, StartRequest)
from scheduler.runs.tokens import mint_runner_token

CHECK_PREFIX = "check_"
PROBE_PLAY = {"callable": "scheduler.sandbox.probe:hello"}
# A third of it is the runner's heartbeat interval; the probe holds longer than that, so one heartbeat comes.
HEARTBEAT_TIMEOUT_MS, PROBE_HOLD_SECONDS = 1500, 1.0


def is_check(run_id: str) -> bool:
    return run_id.startswith(CHECK_PREFIX)


def record(run_id: str, said: str, body: dict) -> bool:
    """Keep what a check's runner said (called by the runner endpoints once its token is verified); False when its
    check is over (or never opened), so the runner stops and nothing outlives the check."""
    kept = db.fetch_one("provider_check_record", {"check_id": run_id.removeprefix(CHECK_PREFIX), "said": said,
                                                  "body": json.dumps(body)})
    return kept is not None


class CheckFailed(Exception):
    def __init__(self, step: str, cause: str, detail: str):
        super().__init__(f"{step}: {cause}: {detail}")
        self.step, self.cause, self.detail = step, cause, detail


@dataclass
class ProviderCheck:
    provider: SandboxProvider
    routing_domain: str | None
    wait_seconds: float = 120.0
    say: Callable[[str], None] = print
    check_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    sandbox: SandboxRef | None = None

    @property
    def run_id(self) -> str:
        return f"{CHECK_PREFIX}{self.check_id}"

    def request(self) -> StartRequest:
        lease = uuid.uuid4().hex
        env = {"LC_ALL": "C.UTF-8", "SCHEDULER_API_URL": scheduler_settings.public_api_url,
               "SCHEDULER_RUNNER_TOKEN": mint_runner_token(self.run_id, 1, lease), "SCHEDULER_RUN_ID": self.run_id,
               "SCHEDULER_ATTEMPT": "1", "SCHEDULER_LEASE_TOKEN": lease, "SCHEDULER_PLAY": json.dumps(PROBE_PLAY),
               "SCHEDULER_PLAY_INPUT": json.dumps({"name": "check_provider", "holdSeconds": PROBE_HOLD_SECONDS}),
               "SCHEDULER_HEARTBEAT_TIMEOUT_MS": str(HEARTBEAT_TIMEOUT_MS)}
        return StartRequest(self.run_id, 1, self.routing_domain, env,
                            [self.provider.runner_python, "-m", "scheduler.sandbox.runner"],
                            lifetime_seconds=int(self.wait_seconds) * 2 + 60)

    def run(self) -> dict:
        """Every step in order; raises CheckFailed naming the first that failed. Always cleans up."""
        db.run("provider_check_open", {"check_id": self.check_id})
        try:
            self._step("create the sandbox and start its runner", self._start)
            self._step(f"runner heartbeat through {scheduler_settings.public_api_url}", lambda: self._said("heartbeat"))
            result = self._step("the probe play's result", lambda: self._said("terminal"))
            self._step("delete the sandbox", self._delete)
            self._step("read it back gone", self._gone)
            return result
        except KeyboardInterrupt:
            # Ctrl-C may land inside a statement (the wait polls the database): that connection is left mid-command,
            # so the clean-up's statement goes on a fresh one.
            connections["default"].close()
            raise
        finally:
            self.clean_up()

    def _step(self, name: str, action: Callable[[], object]):
        began = time.monotonic()
        try:
            outcome = action()
        except ProviderError as error:
            raise CheckFailed(name, error.cause.value, str(error)) from None
        self.say(f"  {name}: ok ({time.monotonic() - began:.2f} s)")
        return outcome

    def _start(self) -> None:
        try:
            self.sandbox = self.provider.start(self.request())
        except ProviderError as error:
            self.sandbox = error.sandbox
            raise

    def _said(self, what: str) -> dict:
        deadline = time.monotonic() + self.wait_seconds
        while time.monotonic() < deadline:
            kept = db.fetch_value("provider_check_read", {"check_id": self.check_id})
            if kept and what in kept:
                return kept[what]
            time.sleep(0.2)
        cause = ("API not reachable from the sandbox (or the runner did not start)" if what == "heartbeat"
                 else "no result from the probe play")
        raise CheckFailed(f"wait for the runner's {what}", cause,
                          f"nothing arrived within {self.wait_seconds:g} s; the sandbox must reach "
                          f"SCHEDULER_PUBLIC_API_URL={scheduler_settings.public_api_url}")

    def _delete(self) -> None:
        outcome = self.provider.delete(self.sandbox)
        if outcome is DeleteOutcome.ALREADY_ABSENT:
            self.say("  (the sandbox was already gone)")

    def _gone(self) -> None:
        deadline = time.monotonic() + self.wait_seconds
        while self.provider.read_back(self.sandbox) is not ReadBack.DELETED:
            if time.monotonic() > deadline:
                raise ProviderError(f"sandbox {self.sandbox.sandbox_id} still present {self.wait_seconds:g} s after "
                                    "its delete was accepted", cause=ProviderCause.UNAVAILABLE)
            time.sleep(0.5)
        self.sandbox = None

    def clean_up(self) -> None:
        """Delete what the check created (the sandbox it knows, and any its labels find), forget its control key."""
        try:
            left = [self.sandbox] if self.sandbox else []
            try:
                left += [ref for ref in self.provider.find_started(self.run_id, 1, self.routing_domain)
                         if ref not in left]
            except (ProviderError, NotImplementedError):
                pass
            for ref in left:
                try:
                    self.provider.delete(ref)
                    self.say(f"  cleaned up sandbox {ref.sandbox_id}")
                except ProviderError as error:
                    self.say(f"  could not delete sandbox {ref.sandbox_id}: {error} (delete it by hand)")
        finally:
            db.run("provider_check_forget", {"check_id": self.check_id})
