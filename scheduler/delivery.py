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

from scheduler import db, outbox
from scheduler.conf import scheduler_settings
from scheduler.redaction import redact_text

STAGED_REFUSAL = "Staged array input has no immutable terminal projection receiver"
TOKEN_PATH = "/api/v2/internal/play-runtime/run-ledger-dispatch-token"
EVENTS_PATH = "/api/v2/internal/play-runtime/run-ledger/events"
TOKEN_REUSE_MARGIN_SECONDS = 30


class DeliveryError(Exception):
    """A delivery failed; the message is safe to store as last_error."""


# ---- ledger events (TRM-6) -------------------------------------------------

def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**53 - 1


def valid_performance(value) -> bool:
    return (isinstance(value, dict) and all(_count(value.get(key)) for key in ("cpuMs", "wallMs", "peakMemoryBytes"))
            and ("memoryAdmission" not in value or isinstance(value["memoryAdmission"], dict)))


def ledger_event(fact: outbox.Fact) -> dict:
    payload = dict(fact.payload or {})
    if fact.event_type in outbox.TERMINAL_EVENT_TYPES and "terminalRuntimePerformance" in payload:
        if not valid_performance(payload["terminalRuntimePerformance"]):
            payload.pop("terminalRuntimePerformance")
            payload["terminalRuntimePerformanceUnavailableReason"] = "invalid_terminal_performance"
    return {"eventId": fact.event_id, "type": fact.event_type,
            "occurredAt": fact.created_at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z"), "payload": payload}


# ---- routing (OBX-8) -------------------------------------------------------

def is_immutable_origin(origin) -> bool:
    """https, no path, query or fragment, and not a preview alias (a `-git-` deployment alias)."""
    if not isinstance(origin, str):
        return False
    parts = urlsplit(origin)
    if parts.scheme != "https" or not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
        return False
    return not any("-git-" in label for label in parts.hostname.split("."))


def plan_routes(prefix: outbox.Prefix) -> list[tuple[str | None, list[outbox.Fact]]]:
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
    first_terminal = next(i for i, fact in enumerate(prefix.facts) if fact.event_type in outbox.TERMINAL_EVENT_TYPES)
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
    def key(schema: str, launch: dict, receiver: str) -> str:
        authority = {k: v for k, v in sorted(launch.items()) if k != "executorToken"}
        return hashlib.sha256(json.dumps([schema, authority, receiver], sort_keys=True).encode()).hexdigest()

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
        return error.code, None
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise DeliveryError(redact_text(f"receiver unreachable: {reason}", secrets)) from None


def _dispatch_token(base: str, prefix: outbox.Prefix, launch: dict, secrets: list[str]) -> tuple[str, str]:
    key = TOKENS.key(scheduler_settings.SCHEMA, launch, base)
    cached = TOKENS.get(key)
    if cached:
        return cached, key
    coordinator = launch.get("coordinatorInternalToken")
    if not coordinator:
        raise DeliveryError("launch has no coordinatorInternalToken for its run-ledger receiver")
    status, body = _post(base.rstrip("/") + TOKEN_PATH, coordinator, {
        "runId": prefix.run_id, "eventId": prefix.head.event_id, "leaseOwner": prefix.lease_owner,
        "schedulerSchema": scheduler_settings.SCHEMA,
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


def deliver_http(base: str, prefix: outbox.Prefix, facts: list[outbox.Fact]) -> None:
    launch = prefix.dispatch_launch or {}
    secrets = [value for key, value in launch.items() if "token" in key.lower() and isinstance(value, str)]
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


def deliver_builtin(lease_owner: str, batch: list[tuple[outbox.Prefix, list[outbox.Fact]]]) -> set[str]:
    """Store in the built-in receiver and acknowledge, for several runs, in one statement (OBX-10).

    Returns the event ids acknowledged (a fact whose lease was lost is stored
    but not acknowledged by this drainer)."""
    events, event_ids = [], []
    for prefix, facts in batch:
        for fact in facts:
            event = ledger_event(fact)
            events.append({"event_id": event["eventId"], "run_id": prefix.run_id, "event_type": event["type"],
                           "occurred_at": event["occurredAt"], "payload": event["payload"]})
            event_ids.append(fact.event_id)
    if not events:
        return set()
    row = db.fetch_one("run_ledger_store_and_ack", {"events": json.dumps(events), "event_ids": event_ids,
                                                     "lease_owner": lease_owner})
    return set(row["acked_event_ids"])


@dataclass
class Outcome:
    prefix: outbox.Prefix
    acknowledged: int = 0
    released: int = 0
    error: Exception | None = None


def deliver_all(prefixes: list[outbox.Prefix]) -> list[Outcome]:
    """Deliver claimed prefixes: external receivers one run at a time (the protocol is per run),
    the built-in receiver and the search lane in one statement each."""
    outcomes = [Outcome(prefix) for prefix in prefixes]
    builtin: list[tuple[Outcome, list[outbox.Fact]]] = []
    search: list[Outcome] = []
    for outcome in outcomes:
        prefix = outcome.prefix
        if prefix.lane == "search":
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
                    deliver_http(base, prefix, facts)
                    outcome.acknowledged += outbox.acknowledge(prefix, [fact.event_id for fact in facts])
            if released:
                outcome.released = outbox.release(prefix, released)
        except Exception as error:  # noqa: BLE001 - settled by the caller through the failure policy
            outcome.error = error
    if builtin:
        acked = deliver_builtin(prefixes[0].lease_owner, [(outcome.prefix, facts) for outcome, facts in builtin])
        for outcome, facts in builtin:
            outcome.acknowledged += sum(1 for fact in facts if fact.event_id in acked)
    if search:
        acked = set(outbox.acknowledged_ids(search[0].prefix, [eid for outcome in search for eid in outcome.prefix.event_ids]))
        for outcome in search:
            outcome.acknowledged = sum(1 for event_id in outcome.prefix.event_ids if event_id in acked)
    return outcomes
