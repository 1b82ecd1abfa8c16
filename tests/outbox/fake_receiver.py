"""A local run-ledger receiver speaking the receiver protocol, with scripted failures."""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COORDINATOR_TOKEN = "coordinator-secret"


class FakeReceiver:
    def __init__(self, failure_rate: float = 0.0, seed: int = 7, always_fail=None):
        self.failure_rate = failure_rate
        self.random = random.Random(seed)
        self.always_fail = always_fail or set()  # event ids whose batch is always refused
        self.sightings: list[tuple[str, str]] = []  # (run_id, event_id) in arrival order
        self.token_requests = 0
        self.hold = None  # a threading.Event the events endpoint waits on
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self):
        self._server.shutdown()
        self._server.server_close()

    def first_sightings(self, run_id: str) -> list[str]:
        seen: list[str] = []
        for sighted_run, event_id in self.sightings:
            if sighted_run == run_id and event_id not in seen:
                seen.append(event_id)
        return seen

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status, body=None):
                data = json.dumps(body or {}).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                auth = self.headers.get("Authorization", "")
                with fake.lock:
                    fail = fake.random.random() < fake.failure_rate
                if self.path.endswith("/run-ledger-dispatch-token"):
                    if auth != f"Bearer {COORDINATOR_TOKEN}":
                        return self._answer(401)
                    with fake.lock:
                        fake.token_requests += 1
                    if fail:
                        return self._answer(503)
                    return self._answer(200, {"token": f"dispatch-{body['runId']}", "expiresAt": "2999-01-01T00:00:00Z"})
                if self.path.endswith("/run-ledger/events"):
                    if auth != f"Bearer dispatch-{body.get('runId')}":
                        return self._answer(401)
                    if fake.hold is not None:
                        fake.hold.wait(60)
                    ids = [event["eventId"] for event in body["events"]]
                    if fail or fake.always_fail.intersection(ids):
                        return self._answer(500)
                    with fake.lock:
                        fake.sightings.extend((body["runId"], event_id) for event_id in ids)
                    return self._answer(200, {"accepted": len(ids)})
                return self._answer(404)

        return Handler
