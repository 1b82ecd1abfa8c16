"""A local run-ledger receiver speaking the seed's receiver protocol, with scripted failures.

It grants or withholds prefix batching, issues dispatch tokens with an `expiresAt`, as a JWT whose lifetime
is readable, or opaque; accepts a dispatch token for the run it was minted for (or, told so, for any run) and
the launch's pre-minted executor tokens it is told about; answers 401 once when asked; and records every
request's path, headers and body.
"""

from __future__ import annotations

import base64
import json
import random
import time
import threading

from tests.quiet_http import QuietHandler, QuietHTTPServer

COORDINATOR_TOKEN = "coordinator-secret"


class FakeReceiver:
    def __init__(self, failure_rate: float = 0.0, seed: int = 7, always_fail=None, tls=None):
        self.failure_rate = failure_rate
        self.random = random.Random(seed)
        self.always_fail = always_fail or set()  # event ids whose batch is always refused
        self.sightings: list[tuple[str, str]] = []  # (run_id, event_id) in arrival order
        self.token_requests = 0
        self.hold = None  # a threading.Event the events endpoint waits on
        self.meeting = None  # a threading.Barrier each events request waits at (503 when it breaks)
        self.in_flight = self.most_in_flight = 0  # events requests being answered now, and at most at once
        self.grant_batching = False
        self.token_style = "expires_at"  # or "jwt" (a readable exp), "opaque" (no lifetime to read)
        self.token_scope = "run"  # a dispatch token serves the run it was minted for; or "deployment": any run
        self.executor_tokens: set[str] = set()  # pre-minted tokens the events endpoint accepts
        self.unauthorized_once: set[str] = set()  # "token" / "events" / a bearer token: answered 401 once
        self.requests: list[dict] = []  # every request: path, headers (lower-case names), body
        self.lock = threading.Lock()
        self._server = QuietHTTPServer(("127.0.0.1", 0), self._handler())
        # With `tls` (a server ssl.SSLContext) the receiver is an https origin, as a deployed runtime is: the only
        # kind a drainer may send a whole prefix to in one request (OBX-6).
        self.scheme = "http" if tls is None else "https"
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.scheme == "http" else "localhost"
        return f"{self.scheme}://{host}:{self._server.server_address[1]}"

    def close(self):
        self._server.shutdown()
        self._server.server_close()

    def dispatch_token(self, run_id: str) -> dict:
        answer = {"token": f"dispatch-{run_id}"}
        if self.token_style == "expires_at":
            answer["expiresAt"] = "2999-01-01T00:00:00Z"
        elif self.token_style == "jwt":
            answer["token"] = f"dispatch-{run_id}." + jwt_part({"exp": time.time() + 3600}) + ".sig"
        if self.grant_batching:
            answer["runLedgerIngressPrefixBatching"] = True
        return answer

    def dispatch_token_accepted(self, bearer: str, run_id) -> bool:
        """A dispatch token serves the run it was minted for; with token_scope "deployment", any run."""
        if self.token_scope == "deployment":
            return bearer.startswith("dispatch-")
        return bearer == f"dispatch-{run_id}" or bearer.startswith(f"dispatch-{run_id}.")

    def event_requests(self) -> list[dict]:
        return [request for request in self.requests if request["path"].endswith("/run-ledger/events")]

    def first_sightings(self, run_id: str) -> list[str]:
        seen: list[str] = []
        for sighted_run, event_id in self.sightings:
            if sighted_run == run_id and event_id not in seen:
                seen.append(event_id)
        return seen

    def _handler(self):
        fake = self

        class Handler(QuietHandler):
            def _answer(self, status, body=None):
                self.answer(status, json.dumps(body or {}).encode())

            def _once(self, what: str) -> bool:
                with fake.lock:
                    if what in fake.unauthorized_once:
                        fake.unauthorized_once.discard(what)
                        return True
                return False

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                auth = self.headers.get("Authorization", "")
                with fake.lock:
                    fail = fake.random.random() < fake.failure_rate
                    fake.requests.append({"path": self.path, "body": body, "client_port": self.client_address[1],
                                          "headers": {name.lower(): value for name, value in self.headers.items()}})
                if self.path.endswith("/run-ledger-dispatch-token"):
                    if auth != f"Bearer {COORDINATOR_TOKEN}" or self._once("token"):
                        return self._answer(401)
                    with fake.lock:
                        fake.token_requests += 1
                    if fail:
                        return self._answer(503)
                    return self._answer(200, fake.dispatch_token(body["runId"]))
                if self.path.endswith("/run-ledger/events"):
                    bearer = auth.removeprefix("Bearer ")
                    accepted = bearer in fake.executor_tokens or fake.dispatch_token_accepted(bearer, body.get("runId"))
                    if not accepted or self._once("events") or self._once(bearer):
                        return self._answer(401)
                    if fake.hold is not None:
                        fake.hold.wait(60)
                    with fake.lock:
                        fake.in_flight += 1
                        fake.most_in_flight = max(fake.most_in_flight, fake.in_flight)
                    try:
                        if fake.meeting is not None:
                            fake.meeting.wait()
                    except threading.BrokenBarrierError:
                        return self._answer(503)
                    finally:
                        with fake.lock:
                            fake.in_flight -= 1
                    ids = [event["eventId"] for event in body["events"]]
                    if fail or fake.always_fail.intersection(ids):
                        return self._answer(500)
                    with fake.lock:
                        fake.sightings.extend((body["runId"], event_id) for event_id in ids)
                    return self._answer(200, {"accepted": len(ids)})
                return self._answer(404)

        return Handler


def jwt_part(claims: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")


def jwt(claims: dict) -> str:
    """A token shaped like a JWT (header.claims.signature); the scheduler reads only its lifetime."""
    return f"{jwt_part({'alg': 'none'})}.{jwt_part(claims)}.signature"
