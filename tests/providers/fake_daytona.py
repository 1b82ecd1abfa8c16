"""A local fake of Daytona's REST surface under /api, with its delete state machine.

DELETE answers 200 with desiredState "destroyed" and moves the sandbox to
"destroying"; the next GET after that finds it gone (404). A sandbox marked
busy answers DELETE with 409. Scripted failures (401, 429, 5xx, a body
without id) are queued per path. Only the organization's own key sees its
sandboxes; another key gets 404, as the real API answers.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # many starts in flight at once connect together; the default 5 resets them
    daemon_threads = True


class FakeDaytona:
    def __init__(self, keys: dict[str, str], *, keep_alive: bool = False):
        self.keys = keys  # api key -> organization
        self.keep_alive = keep_alive  # HTTP/1.1: a pooling client may reuse its connection
        self.client_ports: list[int] = []
        self.sandboxes: dict[str, dict] = {}
        self.scripted: list[tuple[str, int, object, dict, str]] = []
        self.requests: list[tuple[str, str]] = []
        self.busy: set[str] = set()
        self.create_gate = None  # called before a sandbox create answers (a barrier, an event to wait on)
        self._ids = iter(range(1, 10**9))
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/api"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    def add(self, sandbox_id: str, organization: str, state: str = "started"):
        self.sandboxes[sandbox_id] = {"id": sandbox_id, "organizationId": organization, "state": state,
                                      "desiredState": state}

    def script(self, method: str, status: int, body=None, headers=None, path_contains: str = ""):
        self.scripted.append((method, status, body, headers or {}, path_contains))

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if fake.keep_alive else "HTTP/1.0"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _send(self, status, body=None, headers=None):
                data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method):
                fake.requests.append((method, self.path))
                fake.client_ports.append(self.client_address[1])
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if len(raw) < length:
                    return  # the client went away mid-request (killed): an API does not act on half a request
                payload = json.loads(raw or b"null") if length else None
                for index, (scripted_method, status, body, headers, path_part) in enumerate(fake.scripted):
                    if scripted_method == method and path_part in self.path:
                        del fake.scripted[index]
                        return self._send(status, body, headers)
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                organization = fake.keys.get(token)
                if organization is None:
                    return self._send(401, {"message": "Unauthorized"})
                if not self.path.startswith("/api/"):
                    return self._send(404, {"message": "no route"})
                url = urlsplit(self.path)
                parts = url.path[len("/api/"):].split("/")
                if parts[0] == "sandbox" and len(parts) == 1 and method == "POST":
                    if fake.create_gate is not None:
                        fake.create_gate()
                    with fake._lock:
                        sandbox_id = f"dt-{next(fake._ids)}"
                        fake.add(sandbox_id, organization)
                    fake.sandboxes[sandbox_id]["env"] = (payload or {}).get("envVars")
                    fake.sandboxes[sandbox_id]["labels"] = (payload or {}).get("labels") or {}
                    return self._send(200, fake.sandboxes[sandbox_id])
                if parts[0] == "sandbox" and len(parts) == 1 and method == "GET":
                    wanted = json.loads(parse_qs(url.query).get("labels", ["{}"])[0])
                    return self._send(200, [sandbox for sandbox in fake.sandboxes.values()
                                            if sandbox["organizationId"] == organization
                                            and wanted.items() <= sandbox.get("labels", {}).items()])
                if parts[0] == "toolbox":
                    return self._send(200, {"ok": True})
                if parts[0] != "sandbox" or len(parts) != 2:
                    return self._send(404, {"message": "no route"})
                sandbox = fake.sandboxes.get(parts[1])
                if sandbox is None or sandbox["organizationId"] != organization:
                    return self._send(404, {"message": "Sandbox not found"})
                if method == "GET":
                    if sandbox["state"] == "destroying" and sandbox.get("gone_after_get"):
                        del fake.sandboxes[parts[1]]
                        return self._send(404, {"message": "Sandbox not found"})
                    if sandbox["state"] == "destroying":
                        sandbox["gone_after_get"] = True
                    return self._send(200, sandbox)
                if method == "DELETE":
                    if parts[1] in fake.busy:
                        return self._send(409, {"message": "Sandbox state change in progress"})
                    sandbox["desiredState"], sandbox["state"] = "destroyed", "destroying"
                    return self._send(200, sandbox)
                return self._send(405, {"message": "method"})

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_DELETE(self):
                self._route("DELETE")

        return Handler
