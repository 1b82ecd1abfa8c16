"""A local fake of Daytona's control plane (under /api) and its toolbox proxy (under /toolbox/{sandboxId}).

It answers in the shapes of Daytona's own OpenAPI documents (tests/contract/daytona/, v0.190.0: the contract
test puts Stoplight Prism in front of it, which refuses any answer the documents do not allow) and follows the
server's rules the documents cannot express (apps/api's sandbox controller and service at the same tag):
- a create from a snapshot that names cpu, gpu, memory or disk answers 400 "Cannot specify Sandbox resources when
  using a snapshot"; a snapshot with buildInfo answers 400; an unknown snapshot answers 400 "... not found";
- a create answers `starting` (a build: `pending_build`) and the sandbox is `started` after `start_after` reads;
- a DELETE keeps the state and sets desiredState `destroyed` (the next read after it answers 404; or, with
  gone_after_seconds, every read from that long after it); a DELETE while
  a state change is pending (starting, or a sandbox marked busy) answers 409;
- only the organization's own key sees its sandboxes: another key gets 404; no key gets 401.
Scripted answers (401, 429, 5xx, a body without id) are queued per method and path.
"""

from __future__ import annotations

import json
import threading
import time
from urllib.parse import parse_qs, unquote, urlsplit

from tests.providers.fake_daytona_toolbox import Toolbox
from tests.quiet_http import QuietHandler, QuietHTTPServer

RESOURCE_FIELDS = ("cpu", "gpu", "memory", "disk")


class _Server(QuietHTTPServer):
    request_queue_size = 256  # many starts in flight at once connect together; the default 5 resets them
    daemon_threads = True


def _refusal(status: int, message: str) -> tuple[int, dict]:
    return status, {"statusCode": status, "message": message, "error": {400: "Bad Request", 401: "Unauthorized",
                                                                      404: "Not Found", 409: "Conflict"}.get(status, "")}


class FakeDaytona:
    def __init__(self, keys: dict[str, str], *, keep_alive: bool = False, run_commands: bool = False,
                 snapshots: tuple[str, ...] = ("daytona-small",), start_after: int = 1,
                 gone_after_seconds: float | None = None):
        self.keys = keys  # api key -> organization
        self.keep_alive = keep_alive  # HTTP/1.1: a pooling client may reuse its connection
        self.snapshots = set(snapshots)
        self.start_after = start_after  # reads of a new sandbox before it is `started`
        # A deleted sandbox leaves reads this long after its DELETE (Daytona's runner reconciles the delete on its own
        # time); None: at the second read after it, whenever that is.
        self.gone_after_seconds = gone_after_seconds
        self.client_ports: list[int] = []
        self.sandboxes: dict[str, dict] = {}
        self.scripted: list[tuple[str, int, object, dict, str]] = []
        self.requests: list[tuple[str, str]] = []
        self.bodies: list[tuple[str, str, object]] = []
        self.busy: set[str] = set()
        self.create_gate = None  # called before a sandbox create answers (a barrier, an event to wait on)
        self.after_create = None  # called with a new sandbox before its create answers (to set a state, say)
        self.stalls: list[tuple[str, str, threading.Event]] = []  # (method, path part, released): answer late
        self.toolbox = Toolbox(run_commands)
        self.toolbox_url: str | None = None  # what sandboxes name as toolboxProxyUrl (the contract's proxy, say)
        self._ids = iter(range(1, 10**9))
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"{self.root}/api"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        self.toolbox.stop_all()

    def add(self, sandbox_id: str, organization: str, state: str = "started", **fields):
        self.sandboxes[sandbox_id] = {
            "id": sandbox_id, "organizationId": organization, "name": sandbox_id, "user": "daytona", "env": {},
            "labels": {}, "public": False, "networkBlockAll": False, "target": "us", "cpu": 1, "gpu": 0,
            "memory": 1, "disk": 3, "state": state, "desiredState": "started", "autoStopInterval": 0,
            "toolboxProxyUrl": self.toolbox_url or f"{self.root}/toolbox", **fields}
        self.sandboxes[sandbox_id]["_reads"] = 0
        return self.sandboxes[sandbox_id]

    def stall(self, method: str, path_contains: str) -> threading.Event:
        """The next matching request answers only once the returned event is set (a provider that hangs)."""
        released = threading.Event()
        self.stalls.append((method, path_contains, released))
        return released

    def script(self, method: str, status: int, body=None, headers=None, path_contains: str = ""):
        self.scripted.append((method, status, body, headers or {}, path_contains))

    def public(self, sandbox: dict) -> dict:
        return {key: value for key, value in sandbox.items() if not key.startswith("_")}

    # -- the control plane -------------------------------------------------------------------------------------

    def create(self, organization: str, payload: dict) -> tuple[int, object]:
        if not isinstance(payload, dict):
            return _refusal(400, "body must be an object")
        if payload.get("buildInfo"):
            if payload.get("snapshot"):
                return _refusal(400, "Cannot specify a snapshot when using a build info entry")
            state = "pending_build"
        else:
            if any(payload.get(field) for field in RESOURCE_FIELDS):
                return _refusal(400, "Cannot specify Sandbox resources when using a snapshot")
            snapshot = payload.get("snapshot")
            if snapshot is not None and snapshot not in self.snapshots:
                return _refusal(400, f"Snapshot {snapshot} not found. Did you add it through the Daytona Dashboard?")
            state = "starting"
        if self.create_gate is not None:
            self.create_gate()
        with self._lock:
            sandbox_id = f"dt-{next(self._ids)}"
        sandbox = self.add(sandbox_id, organization, state, env=dict(payload.get("env") or {}),
                           labels=dict(payload.get("labels") or {}),
                           autoStopInterval=payload.get("autoStopInterval", 15))
        if payload.get("buildInfo"):
            sandbox.update({field: payload[field] for field in RESOURCE_FIELDS if field in payload})
        sandbox["_pending"] = self.start_after > 0
        if self.start_after == 0:
            sandbox["state"] = "started"
        if self.after_create is not None:
            self.after_create(sandbox)
        return 200, self.public(sandbox)

    def read(self, sandbox: dict) -> tuple[int, object]:
        if sandbox["desiredState"] == "destroyed" and self.gone_after_seconds is not None:
            sandbox["_read_after_delete"] = time.monotonic() - sandbox["_deleted_at"] >= self.gone_after_seconds
        if sandbox["desiredState"] == "destroyed" and sandbox.get("_read_after_delete"):
            sandbox["state"] = "destroyed"  # the runner reconciled the delete: gone from every read
            return _refusal(404, f"Sandbox with ID or name {sandbox['id']} not found")
        if sandbox["desiredState"] == "destroyed":
            sandbox["_read_after_delete"] = self.gone_after_seconds is None
        elif sandbox.get("_pending") and sandbox["state"] in ("starting", "pending_build"):
            sandbox["_reads"] += 1
            if sandbox["_reads"] >= self.start_after:
                sandbox["state"], sandbox["_pending"] = "started", False
        return 200, self.public(sandbox)

    def delete(self, sandbox: dict) -> tuple[int, object]:
        if sandbox["id"] in self.busy or (sandbox.get("_pending") and sandbox["state"] != "pending_build"):
            return _refusal(409, "Sandbox state change in progress")
        sandbox["desiredState"], sandbox["_pending"], sandbox["_deleted_at"] = "destroyed", True, time.monotonic()
        self.toolbox.stop(sandbox["id"])
        return 200, self.public(sandbox)

    def listing(self, organization: str, query: dict) -> tuple[int, object]:
        wanted = json.loads(query.get("labels", ["{}"])[0])
        errored_deleted = query.get("includeErroredDeleted", ["false"])[0] == "true"
        # A copy first (one step under the GIL): creates on other request threads add sandboxes meanwhile.
        items = [self.public(sandbox) for sandbox in list(self.sandboxes.values())
                 if sandbox["organizationId"] == organization and sandbox["state"] != "destroyed"
                 and (errored_deleted or sandbox["desiredState"] != "destroyed")
                 and wanted.items() <= sandbox.get("labels", {}).items()]
        return 200, {"items": items, "nextCursor": None}

    def route(self, method: str, path: str, organization: str, payload, raw: bytes, headers) -> tuple[int, object]:
        url = urlsplit(path)
        if url.path.startswith("/toolbox/"):
            sandbox_id, _, rest = url.path[len("/toolbox/"):].partition("/")
            sandbox = self.sandboxes.get(unquote(sandbox_id))
            if sandbox is None or sandbox["organizationId"] != organization or sandbox["desiredState"] == "destroyed":
                return _refusal(404, "Sandbox not found")
            if sandbox["state"] != "started":
                return _refusal(400, f"Sandbox is not running (state {sandbox['state']})")
            return self.toolbox.handle(method, sandbox, "/" + rest, parse_qs(url.query), payload, raw, headers)
        if not url.path.startswith("/api/"):
            return _refusal(404, "no route")
        parts = [unquote(part) for part in url.path[len("/api/"):].split("/")]
        if parts == ["sandbox"] and method == "POST":
            return self.create(organization, payload)
        if parts == ["sandbox"] and method == "GET":
            return self.listing(organization, parse_qs(url.query))
        if parts[0] != "sandbox" or len(parts) != 2:
            return _refusal(404, "no route")
        sandbox = self.sandboxes.get(parts[1])
        if sandbox is None or sandbox["organizationId"] != organization or sandbox["state"] == "destroyed" or (
                sandbox["state"] in ("error", "build_failed") and sandbox["desiredState"] == "destroyed"):
            return _refusal(404, f"Sandbox with ID or name {parts[1]} not found")
        if method == "GET":
            return self.read(sandbox)
        if method == "DELETE":
            return self.delete(sandbox)
        return 405, {"message": "method"}

    def _handler(self):
        fake = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1" if fake.keep_alive else "HTTP/1.0"

            def _send(self, status, body=None, headers=None):
                data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
                if body is not None and not isinstance(body, bytes):
                    headers = {**(headers or {}), "Content-Type": "application/json"}
                self.answer(status, data, headers)

            def _route(self, method):
                fake.requests.append((method, self.path))
                fake.client_ports.append(self.client_address[1])
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if len(raw) < length:
                    return  # the client went away mid-request (killed): an API does not act on half a request
                payload = None
                if length and (self.headers.get("Content-Type") or "").startswith("application/json"):
                    try:
                        payload = json.loads(raw)
                    except ValueError:
                        return self._send(*_refusal(400, "malformed JSON"))
                fake.bodies.append((method, self.path, payload))
                for index, (stalled_method, path_part, released) in enumerate(fake.stalls):
                    if stalled_method == method and path_part in self.path:
                        del fake.stalls[index]
                        released.wait(30)  # the client's read timeout passes first; then the call goes on
                        break
                for index, (scripted_method, status, body, headers, path_part) in enumerate(fake.scripted):
                    if scripted_method == method and path_part in self.path:
                        del fake.scripted[index]
                        return self._send(status, body, headers)
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                organization = fake.keys.get(token)
                if organization is None:
                    return self._send(*_refusal(401, "Unauthorized"))
                self._send(*fake.route(method, self.path, organization, payload, raw, self.headers))

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_DELETE(self):
                self._route("DELETE")

        return Handler
