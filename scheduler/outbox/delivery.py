"""Deliver a claimed prefix to its run-ledger receiver (OBX-6, OBX-8, OBX-10, TRM-6).

The receiver is the launch's runtimeApiBaseUrl, or the built-in receiver
(this database) when the launch names none. Terminal facts of a run whose
array input started go to the launch's immutable
arrayInputTerminalProjectionOrigin instead, and a nonterminal prefix is never
batched into a terminal bound for another receiver. The `search` lane only
feeds the scheduler's own projection: it is validated and acknowledged
without contacting any receiver or reading launch credentials.

Receiver protocol: POST {base}/api/v2/internal/play-runtime/run-ledger-dispatch-token
(Bearer coordinatorInternalToken; {runId, eventId, leaseOwner, schedulerSchema}
-> {token, expiresAt}), then POST {base}/api/v2/internal/play-runtime/run-ledger/events
(Bearer dispatch token; {runId, events: [{eventId, type, occurredAt, payload}]}).
Any 2xx acknowledges the prefix; a 401 drops the cached token and retries once.
No credential ever reaches an error message or a log line.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

from scheduler import observability
from scheduler.conf import scheduler_settings
from scheduler.kinds import TERMINAL_FACT_TYPES, Lane
from scheduler.outbox import claims, receiver
from scheduler.outbox.claims import Fact, Prefix
from scheduler.outbox.receiver import ledger_event
from scheduler.redaction import launch_secrets, redact_text

STAGED_REFUSAL = "Staged array input has no immutable terminal projection receiver"
TOKEN_PATH = "/api/v2/internal/play-runtime/run-ledger-dispatch-token"
EVENTS_PATH = "/api/v2/internal/play-runtime/run-ledger/events"
TOKEN_REUSE_MARGIN_SECONDS = 30


class DeliveryError(Exception):
    """A delivery failed; the message is safe to store as last_error."""


# ---- routing (OBX-8) -------------------------------------------------------

def is_immutable_origin(origin) -> bool:
    """https, no path, query or fragment, and not a preview alias (a `-git-` deployment alias)."""
    if not isinstance(origin, str):
        return False
    parts = urlsplit(origin)
    if parts.scheme != "https" or not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
        return False
    return not any("-git-" in label for label in parts.hostname.split("."))


def goes_over_http(prefix: Prefix) -> bool:
    """Whether delivering this prefix may call an external receiver."""
    launch = prefix.dispatch_launch or {}
    return prefix.lane == Lane.LEDGER and bool(launch.get("runtimeApiBaseUrl") or prefix.array_input_started)


def plan_routes(prefix: Prefix) -> list[tuple[str | None, list[Fact]]]:
    """The receiver of each part of the prefix, in causal order; None is the built-in receiver.

    Returns at most one batch when the whole prefix shares a receiver; else
    the facts before the first terminal (the rest is released for the next
    claim, which then starts at the terminal).
    """
    launch = prefix.dispatch_launch or {}
    ordinary = launch.get("runtimeApiBaseUrl") or None
    if not prefix.has_terminal or not prefix.array_input_started:
        return [(ordinary, prefix.facts)]
    origin = launch.get("arrayInputTerminalProjectionOrigin")
    if launch.get("arrayInputTerminalRetirementSupported") is not True or not is_immutable_origin(origin):
        raise DeliveryError(STAGED_REFUSAL)
    first_terminal = next(i for i, fact in enumerate(prefix.facts) if fact.event_type in TERMINAL_FACT_TYPES)
    if first_terminal > 0 and ordinary != origin:
        return [(ordinary, prefix.facts[:first_terminal])]
    return [(origin, prefix.facts)]


# ---- the receiver protocol -------------------------------------------------

class TokenCache:
    """Dispatch tokens keyed by schema, dispatch authority and receiver URL."""

    def __init__(self):
        self._tokens: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(schema: str, launch: dict, receiver_url: str) -> str:
        authority = {k: v for k, v in sorted(launch.items()) if k != "executorToken"}
        return hashlib.sha256(json.dumps([schema, authority, receiver_url], sort_keys=True).encode()).hexdigest()

    def get(self, key: str) -> str | None:
        with self._lock:
            found = self._tokens.get(key)
            if found and found[1] > time.time() + TOKEN_REUSE_MARGIN_SECONDS:
                return found[0]
            self._tokens.pop(key, None)
            return None

    def put(self, key: str, token: str, expires_at: float) -> None:
        with self._lock:
            self._tokens[key] = (token, expires_at)

    def drop(self, key: str) -> None:
        with self._lock:
            self._tokens.pop(key, None)


TOKENS = TokenCache()


def _post(url: str, bearer: str, body: dict, secrets: list[str], timeout: float = 15.0) -> tuple[int, object]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", f"Bearer {bearer}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            return response.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as error:
        error.close()
        return error.code, None
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise DeliveryError(redact_text(f"receiver unreachable: {reason}", secrets)) from None


def _dispatch_token(base: str, prefix: Prefix, launch: dict, secrets: list[str]) -> tuple[str, str]:
    key = TOKENS.key(scheduler_settings.schema, launch, base)
    cached = TOKENS.get(key)
    if cached:
        return cached, key
    coordinator = launch.get("coordinatorInternalToken")
    if not coordinator:
        raise DeliveryError("launch has no coordinatorInternalToken for its run-ledger receiver")
    status, body = _post(base.rstrip("/") + TOKEN_PATH, coordinator, {
        "runId": prefix.run_id, "eventId": prefix.head.event_id, "leaseOwner": prefix.lease_owner,
        "schedulerSchema": scheduler_settings.schema,
    }, secrets)
    if not 200 <= status < 300 or not isinstance(body, dict) or not isinstance(body.get("token"), str):
        raise DeliveryError(f"dispatch token request answered {status}")
    expires = body.get("expiresAt")
    try:
        expires_at = dt.datetime.fromisoformat(str(expires).replace("Z", "+00:00")).timestamp()
    except ValueError:
        expires_at = time.time() + 60
    TOKENS.put(key, body["token"], expires_at)
    return body["token"], key


def deliver_http(base: str, prefix: Prefix, facts: list[Fact]) -> None:
    launch = prefix.dispatch_launch or {}
    secrets = launch_secrets(launch)
    events = {"runId": prefix.run_id, "events": [ledger_event(fact) for fact in facts]}
    for attempt in range(2):
        token, key = _dispatch_token(base, prefix, launch, secrets)
        status, _ = _post(base.rstrip("/") + EVENTS_PATH, token, events, secrets + [token])
        if 200 <= status < 300:
            return
        if status == 401 and attempt == 0:
            TOKENS.drop(key)
            continue
        raise DeliveryError(f"run-ledger receiver answered {status}")


def _timed_http(base: str, prefix: Prefix, facts: list[Fact]) -> None:
    """deliver_http, timed and counted per receiver origin."""
    label = observability.receiver_label(base)
    try:
        with observability.DELIVERY_SECONDS.labels(label).time():
            deliver_http(base, prefix, facts)
    except Exception:
        observability.DELIVERY_FAILURES.labels(label).inc()
        raise


@dataclass
class Outcome:
    prefix: Prefix
    acknowledged: int = 0
    released: int = 0
    error: Exception | None = None


def deliver_all(prefixes: list[Prefix]) -> list[Outcome]:
    """Deliver claimed prefixes: external receivers one run at a time (the protocol is per run),
    the built-in receiver and the search lane in one statement each."""
    outcomes = [Outcome(prefix) for prefix in prefixes]
    builtin: list[tuple[Outcome, list[Fact]]] = []
    search: list[Outcome] = []
    for outcome in outcomes:
        prefix = outcome.prefix
        if prefix.lane == Lane.SEARCH:
            for fact in prefix.facts:
                ledger_event(fact)  # validated; the search projection reads the outbox itself
            search.append(outcome)
            continue
        try:
            routes = plan_routes(prefix)
            sent = {fact.event_id for _, facts in routes for fact in facts}
            released = [fact.event_id for fact in prefix.facts if fact.event_id not in sent]
            for base, facts in routes:
                if base is None:
                    builtin.append((outcome, facts))
                else:
                    _timed_http(base, prefix, facts)
                    outcome.acknowledged += len(claims.acknowledge(prefix.lease_owner, [fact.event_id for fact in facts]))
            if released:
                outcome.released = claims.release(prefix, released)
        except Exception as error:  # noqa: BLE001 - settled by the caller through the failure policy
            outcome.error = error
    if builtin:
        with observability.DELIVERY_SECONDS.labels("builtin").time():
            acked = receiver.store_and_acknowledge(prefixes[0].lease_owner,
                                                   [(outcome.prefix, facts) for outcome, facts in builtin])
        for outcome, facts in builtin:
            outcome.acknowledged += sum(1 for fact in facts if fact.event_id in acked)
    if search:
        acked = claims.acknowledge(search[0].prefix.lease_owner, [eid for outcome in search for eid in outcome.prefix.fact_ids])
        for outcome in search:
            outcome.acknowledged = sum(1 for event_id in outcome.prefix.fact_ids if event_id in acked)
    return outcomes
