"""Daytona over its public REST API, as its OpenAPI documents (v0.190.0) and its server's rules define it.

SCHEDULER_DAYTONA_API_URL (default https://app.daytona.io/api) is the control plane's base; the toolbox of a
sandbox is at the `toolboxProxyUrl` its own answer names, with the sandbox id first in the path (as Daytona's SDK
calls it). The API key is chosen by the sandbox's routing domain (the organization); keys never reach a log or an
error message.

A start (PRV-1..3): create from a snapshot with no resource fields (the server refuses them), or from a
declarative build with them; wait until the sandbox is `started`; upload the runner package; start it in a
session. A start that fails after the create names its sandbox on the error, so the dispatcher gives it its
cleanup obligation. Delete is asynchronous: 200 keeps the state and sets desiredState "destroyed", a later read
answers 404. A DELETE while a state change is pending answers 409 and is followed up with a GET. 429 carries
Retry-After. A 2xx without a JSON body naming the sandbox `id` means the base URL is wrong.
Calls go through outbound.py: a pooled connection per thread and origin.
"""

from __future__ import annotations

import json
import math
import time
import urllib.parse
import uuid
from typing import Any

import httpx

from scheduler import outbound
from scheduler.bounded_map import BoundedMap
from scheduler.kinds import Provider
from scheduler.providers import daytona_states, runner_bundle
from scheduler.providers.base import (DeleteOutcome, Inspection, ProviderCause, ProviderError, ReadBack,
                                      SandboxProvider, SandboxRef, StartRequest)
from scheduler.providers.daytona_states import StartProgress

RUNNER_SESSION = "scheduler-runner"
# The start's wait for `started`: first look at once, then back off to at most this many seconds a look.
MAX_POLL_SECONDS = 2.0
# The organizations named by answers a process remembers (seen_domain): one per sandbox answered, and a dispatcher
# answered about every sandbox it starts, so the oldest leave past this many.
SEEN_DOMAINS_KEPT = 10_000


class _Response:
    def __init__(self, status: int, body: Any, retry_after: float | None):
        self.status, self.body, self.retry_after = status, body, retry_after

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class DaytonaProvider(SandboxProvider):
    name = Provider.DAYTONA
    # PRV-4: an accepted delete sets desiredState "destroyed"; the sandbox leaves reads only once its runner did it.
    delete_done_when_accepted = False

    def __init__(self, api_url: str, api_keys: dict[str, str], *, timeout: float = 15.0, snapshot: str | None = None,
                 dockerfile: str | None = None, disk_gb: int = 3, start_timeout: float = 120.0):
        self.api_url = api_url.rstrip("/")
        self._api_keys = dict(api_keys)
        # Sandbox id -> the organization the last answer about it named (seen_domain pops it).
        self._seen_domains = BoundedMap(SEEN_DOMAINS_KEPT)
        self.timeout = httpx.Timeout(timeout, connect=min(5.0, timeout))
        self.snapshot = snapshot
        self.dockerfile = dockerfile
        self.disk_gb = disk_gb
        self.start_timeout = start_timeout

    def _key(self, routing_domain: str | None) -> str:
        key = self._api_keys.get(routing_domain or "")
        if not key:
            raise ProviderError(f"no Daytona API key for organization {routing_domain!r}", permanent=True,
                                cause=ProviderCause.NOT_CONFIGURED)
        return key

    def _call(self, method: str, url: str, routing_domain: str | None, body: Any = None, *,
              content: bytes | None = None, content_type: str = "application/json") -> _Response:
        headers = {"Authorization": f"Bearer {self._key(routing_domain)}", "Accept": "application/json"}
        if body is not None:
            content = json.dumps(body).encode()
        if content is not None:
            headers["Content-Type"] = content_type
        try:
            response = outbound.request(method, url, content=content, headers=headers, timeout=self.timeout)
        except httpx.HTTPError as error:
            raise ProviderError(f"Daytona unreachable: {type(error).__name__}: {error}",
                                cause=ProviderCause.UNREACHABLE) from None
        retry_after = response.headers.get("Retry-After")
        return _Response(response.status_code, _json(response.content),
                         float(retry_after) if retry_after and retry_after.isdigit() else None)

    def _api(self, method: str, path: str, routing_domain: str | None, body: Any = None) -> _Response:
        return self._call(method, f"{self.api_url}{path}", routing_domain, body)

    def _sandbox(self, response: _Response, what: str) -> dict:
        """A 2xx body must be a sandbox object; anything else means a wrong base URL."""
        if not isinstance(response.body, dict) or "id" not in response.body:
            raise ProviderError(f"Daytona {what} answered {response.status} without a sandbox: check "
                                "SCHEDULER_DAYTONA_API_URL", permanent=True, cause=ProviderCause.MALFORMED_ANSWER)
        if isinstance(response.body.get("organizationId"), str) and response.body["organizationId"]:
            self._seen_domains.put(str(response.body["id"]), response.body["organizationId"])
        return response.body

    def seen_domain(self, ref: SandboxRef) -> str | None:
        return self._seen_domains.pop(ref.sandbox_id)

    def _raise_for(self, response: _Response, what: str) -> None:
        if response.status in (401, 403):
            raise ProviderError(f"Daytona refused the credential for {what} ({response.status})", permanent=True,
                                cause=ProviderCause.CREDENTIAL_REFUSED)
        if response.status == 429:
            raise ProviderError(f"Daytona rate-limited {what}", retry_after=response.retry_after,
                                cause=ProviderCause.RATE_LIMITED)
        said = _message(response.body)
        # The server answers an unknown snapshot with 400 "Snapshot ... not found" (its sandbox service).
        missing = response.status == 404 or (response.status == 400 and "not found" in said.lower())
        cause = (ProviderCause.NOT_FOUND if missing else ProviderCause.REQUEST_REFUSED
                 if 400 <= response.status < 500 else ProviderCause.UNAVAILABLE)
        raise ProviderError(f"Daytona {what} failed with {response.status}{': ' + said if said else ''}",
                            permanent=400 <= response.status < 500, cause=cause)

    # -- start (PRV-1..3) --------------------------------------------------------------------------------------

    def create_body(self, request: StartRequest) -> dict:
        """PRV-1: a snapshot's sandbox names no resources (the server refuses them); a declarative build does."""
        body: dict[str, Any] = {"env": dict(request.env), "autoStopInterval": 0,
                                "labels": {"runId": request.run_id, "attempt": str(request.attempt)}}
        if self.dockerfile:
            body["buildInfo"] = {"dockerfileContent": self.dockerfile}
            body.update(cpu=max(1, math.ceil(request.cpu)), memory=max(1, math.ceil(request.memory_mb / 1024)),
                        disk=self.disk_gb)
        elif self.snapshot:
            body["snapshot"] = self.snapshot
        return body

    def start(self, request: StartRequest) -> SandboxRef:
        created = self._api("POST", "/sandbox", request.routing_domain, self.create_body(request))
        if not created.ok:
            self._raise_for(created, "sandbox create")
        sandbox = self._sandbox(created, "sandbox create")
        ref = SandboxRef(self.name, str(sandbox["id"]), request.routing_domain)
        try:
            sandbox = self._wait_started(ref, sandbox)
            self._start_runner(ref, sandbox, request)
        except ProviderError as error:
            error.sandbox = ref
            raise
        return ref

    def _wait_started(self, ref: SandboxRef, sandbox: dict) -> dict:
        """PRV-2: read the sandbox until it is started, bounded by the start timeout, backing off between looks."""
        deadline, pause = time.monotonic() + self.start_timeout, 0.0
        while True:
            progress = daytona_states.start_progress(sandbox)
            state = sandbox.get("state")
            if progress is StartProgress.STARTED:
                return sandbox
            if progress is StartProgress.FAILED:
                reason = sandbox.get("errorReason") or "no reason given"
                raise ProviderError(f"Daytona sandbox {ref.sandbox_id} is {state}: {str(reason)[:300]}",
                                    permanent=True, cause=ProviderCause.SANDBOX_FAILED)
            if progress is StartProgress.UNDOCUMENTED:
                raise ProviderError(f"Daytona sandbox {ref.sandbox_id} answered the undocumented state {state!r}",
                                    cause=ProviderCause.MALFORMED_ANSWER)
            if progress is StartProgress.ENDED:
                raise ProviderError(f"Daytona sandbox {ref.sandbox_id} went {state} (desiredState "
                                    f"{sandbox.get('desiredState')}) before it started", cause=ProviderCause.SANDBOX_FAILED)
            if time.monotonic() + pause > deadline:
                raise ProviderError(f"Daytona sandbox {ref.sandbox_id} did not start within {self.start_timeout:g} s "
                                    f"(last state {state})", cause=ProviderCause.START_TIMEOUT)
            if pause:
                time.sleep(pause)  # not sleep(0): under 32 start threads that hands the GIL away for nothing
            pause = min(MAX_POLL_SECONDS, max(0.05, pause * 2))
            answer = self._api("GET", f"/sandbox/{_quoted(ref.sandbox_id)}", ref.routing_domain)
            if not answer.ok:
                self._raise_for(answer, "sandbox read while starting")
            sandbox = self._sandbox(answer, "sandbox read while starting")

    def _start_runner(self, ref: SandboxRef, sandbox: dict, request: StartRequest) -> None:
        """PRV-3: upload the runner package through the toolbox, then run it in a session of its own."""
        proxy = sandbox.get("toolboxProxyUrl")
        if not isinstance(proxy, str) or not proxy.startswith(("http://", "https://")):
            raise ProviderError(f"Daytona sandbox {ref.sandbox_id} has no toolboxProxyUrl", permanent=True,
                                cause=ProviderCause.MALFORMED_ANSWER)
        toolbox = f"{proxy.rstrip('/')}/{_quoted(ref.sandbox_id)}"
        bootstrap = runner_bundle.bootstrap_path()
        content, content_type = _multipart_file("file", bootstrap.rsplit("/", 1)[-1], runner_bundle.bootstrap())
        command = runner_bundle.shell_command(request.command[0], bootstrap)
        for what, url, kwargs in (
            ("runner upload", f"{toolbox}/files/upload?{urllib.parse.urlencode({'path': bootstrap})}",
             {"content": content, "content_type": content_type}),
            ("runner session", f"{toolbox}/process/session", {"body": {"sessionId": RUNNER_SESSION}}),
            ("runner start", f"{toolbox}/process/session/{RUNNER_SESSION}/exec",
             {"body": {"command": command, "runAsync": True}}),
        ):
            answer = self._call("POST", url, request.routing_domain, **kwargs)
            if not answer.ok:
                self._raise_for(answer, what)

    # -- what the sweep and cleanup ask (PRV-4) ----------------------------------------------------------------

    def find_started(self, run_id: str, attempt: int, routing_domain: str | None) -> list[SandboxRef]:
        labels = json.dumps({"runId": run_id, "attempt": str(attempt)}, separators=(",", ":"))
        response = self._api("GET", "/sandbox?" + urllib.parse.urlencode({"labels": labels}), routing_domain)
        if not response.ok:
            self._raise_for(response, "sandbox list")
        body = response.body
        items = body.get("items") if isinstance(body, dict) else body
        if not isinstance(items, list):
            raise ProviderError(f"Daytona sandbox list answered {response.status} without a list: check "
                                "SCHEDULER_DAYTONA_API_URL", permanent=True, cause=ProviderCause.MALFORMED_ANSWER)
        return [SandboxRef(self.name, item["id"], routing_domain) for item in items
                if isinstance(item, dict) and item.get("id") and not daytona_states.delete_accepted(item)]

    def inspect(self, ref: SandboxRef) -> Inspection:
        try:
            response = self._api("GET", f"/sandbox/{_quoted(ref.sandbox_id)}", ref.routing_domain)
        except ProviderError as error:
            if error.permanent:
                raise
            return Inspection.UNKNOWN
        if response.status == 404:
            return Inspection.GONE  # under the organization's own key: really gone
        if not response.ok:
            if response.status in (401, 403):
                self._raise_for(response, "sandbox inspect")
            return Inspection.UNKNOWN
        return daytona_states.inspection(self._sandbox(response, "sandbox inspect"))

    def delete(self, ref: SandboxRef) -> DeleteOutcome:
        path = f"/sandbox/{_quoted(ref.sandbox_id)}"
        response = self._api("DELETE", path, ref.routing_domain)
        if response.status == 404:
            return DeleteOutcome.ALREADY_ABSENT
        if response.ok:
            self._sandbox(response, "sandbox delete")
            return DeleteOutcome.ACCEPTED
        if response.status == 409:
            # A state change is in progress: ask where it is going.
            follow_up = self._api("GET", path, ref.routing_domain)
            if follow_up.status == 404:
                return DeleteOutcome.ALREADY_ABSENT
            if follow_up.ok:
                if daytona_states.delete_accepted(self._sandbox(follow_up, "sandbox inspect")):
                    return DeleteOutcome.ACCEPTED
                raise ProviderError("Daytona sandbox state change in progress; delete again later")
            self._raise_for(follow_up, "sandbox inspect")
        self._raise_for(response, "sandbox delete")

    def read_back(self, ref: SandboxRef) -> ReadBack:
        try:
            response = self._api("GET", f"/sandbox/{_quoted(ref.sandbox_id)}", ref.routing_domain)
        except ProviderError:
            return ReadBack.UNKNOWN
        if response.status == 404:
            return ReadBack.DELETED
        if response.ok and isinstance(response.body, dict):
            return daytona_states.read_back(self._sandbox(response, "sandbox read-back"))
        return ReadBack.UNKNOWN


def _quoted(sandbox_id: str) -> str:
    return urllib.parse.quote(sandbox_id, safe="")


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _message(body: Any) -> str:
    """The provider's own words about a refusal (its `message`, one line, bounded): never the request's."""
    said = body.get("message") if isinstance(body, dict) else None
    if isinstance(said, list):
        said = "; ".join(str(part) for part in said)
    return " ".join(str(said).split())[:300] if said else ""


def _multipart_file(field: str, filename: str, data: bytes) -> tuple[bytes, str]:
    """One file as multipart/form-data (the toolbox's upload takes nothing else)."""
    boundary = uuid.uuid4().hex
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{filename}\"\r\n"
            "Content-Type: text/x-python\r\n\r\n").encode()
    return head + data + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"
