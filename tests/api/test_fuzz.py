"""Random hostile bodies over every endpoint (seeded, bounded): nothing but a JSON 4xx or a success comes back."""

import json
import random

import pytest

from scheduler.runs.tokens import mint_runner_token
from tests import factories

pytestmark = pytest.mark.django_db
TOKEN = "internal-test-token"
NASTY_TEXT = ["", " ", "\u0000", "a\u0000b", "\ud800", "\udfff", "x" * 600, "🙂", "module:function", "-1", "null",
              "2026-01-01T00:00:00Z", "9999-12-31T23:59:59+14:00", "ftp://x", "http://127.0.0.1:9", "sys:key"]
NASTY_NUMBERS = [0, -1, 1, 2**31, 2**53, 2**64, 10**40, 1.5, -0.0, 1e308, float("nan"), float("inf")]
KEYS = ["playName", "orgId", "input", "launch", "maxAttempts", "runLogStore", "graphHash", "runtimeProfile",
        "definitionScope", "waitDeadline", "reason", "attempt", "accepting", "admissionEpoch", "environment", "runId",
        "leaseToken", "result", "status", "output", "error", "code", "message", "stats", "terminalProgressEvents",
        "events", "eventId", "type", "occurredAt", "payload", "heartbeatTimeoutMs", "sandboxProvider", "play",
        "runnerApiUrl", "callable", "command", "contractSnapshot", "absurdReleaseId"]


def nasty_value(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        return rng.choice(NASTY_TEXT)
    if roll < 0.5:
        return rng.choice(NASTY_NUMBERS)
    if roll < 0.6:
        return rng.choice([True, False, None])
    if roll < 0.8:
        return [nasty_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(KEYS + NASTY_TEXT): nasty_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def nasty_body(rng: random.Random) -> str:
    body = {key: nasty_value(rng) for key in rng.sample(KEYS, rng.randint(1, 8))}
    text = json.dumps(body)  # NaN and Infinity come out as JavaScript literals, as careless clients send them
    return text if rng.random() < 0.9 else text[: rng.randint(0, len(text))]  # now and then, cut short


def test_random_hostile_bodies__never_a_server_error(client, settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN
    parked = factories.parked_run()
    runner_token = mint_runner_token(parked.run_id, 1, parked.lease_token)
    endpoints = [("post", "/internal/runs", TOKEN), ("post", f"/internal/runs/{parked.run_id}/cancel", TOKEN),
                 ("post", f"/internal/runs/{parked.run_id}/array-input-intent", TOKEN),
                 ("put", "/internal/releases/rel-f/admission", TOKEN), ("post", "/internal/run-ledger/events", TOKEN),
                 ("post", "/internal/runner/heartbeat", runner_token), ("post", "/internal/runner/terminal", runner_token)]
    rng = random.Random(20261130)
    statuses = {}
    for _ in range(150):
        for method, path, token in endpoints:
            response = getattr(client, method)(path, data=nasty_body(rng), content_type="application/json",
                                               HTTP_AUTHORIZATION=f"Bearer {token}")
            assert response.status_code < 500, (path, response.status_code, response.content[:300])
            assert response["Content-Type"] == "application/json"
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
    print(f"fuzz: {sum(statuses.values())} requests, statuses {dict(sorted(statuses.items()))}")
