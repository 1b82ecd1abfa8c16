"""Daytona over its public REST API (SCHEDULER_DAYTONA_API_URL, default https://app.daytona.io/api).

Request paths are relative to that base. The API key is chosen by the
sandbox's routing domain (the organization); keys never reach a log or an
error message. Delete is asynchronous: 200 with desiredState "destroyed",
later state "destroying", then 404. A DELETE while a state change is pending
answers 409 and is followed up with a GET. 429 carries Retry-After. A 2xx
without a JSON body naming the sandbox `id` means the base URL is wrong.
Calls go through outbound.py: a pooled connection per thread (dispatch starts run on a pool of threads), so a
start's three calls and the next start's reuse one connection instead of a TLS handshake each.
"""

from __future__ import annotations

import json
import shlex
import urllib.parse
from typing import Any

import httpx

from scheduler import outbound
from scheduler.kinds import Provider
from scheduler.providers.base import DeleteOutcome, Inspection, ProviderError, ReadBack, SandboxProvider, SandboxRef, StartRequest

GONE_STATES = {"destroyed", "destroying", "stopped", "stopping", "error", "build_failed", "archived", "archiving"}
RUNNING_STATES = {"started", "starting", "creating", "restoring", "pulling_snapshot", "pending_build", "building_snapshot", "resizing"}


class _Response:
    def __init__(self, status: int, body: Any, retry_after: float | None):
        self.status, self.body, self.retry_after = status, body, retry_after


class DaytonaProvider(SandboxProvider):
    name = Provider.DAYTONA

    def __init__(self, api_url: str, api_keys: dict[str, str], *, timeout: float = 15.0, snapshot: str | None = None):
        self.api_url = api_url.rstrip("/")
        self._api_keys = dict(api_keys)
        # Sandbox id -> the organization the last answer about it named (seen_domain pops it).
        self._seen_domains: dict[str, str] = {}
        self.timeout = httpx.Timeout(timeout, connect=min(5.0, timeout))
        self.snapshot = snapshot

    def _key(self, routing_domain: str | None) -> str:
        key = self._api_keys.get(routing_domain or "")
        if not key:
            raise ProviderError(f"no Daytona API key for organization {routing_domain!r}", permanent=True)
        return key

    def _call(self, method: str, path: str, routing_domain: str | None, body: Any = None) -> _Response:
        key = self._key(routing_domain)
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            response = outbound.request(method, f"{self.api_url}{path}", content=data, headers=headers,
                                        timeout=self.timeout)
        except httpx.HTTPError as error:
            raise ProviderError(f"Daytona unreachable: {type(error).__name__}: {error}") from None
        retry_after = response.headers.get("Retry-After")
        return _Response(response.status_code, _json(response.content),
                         float(retry_after) if retry_after and retry_after.isdigit() else None)

    def _sandbox(self, response: _Response, what: str) -> dict:
        """A 2xx body must be a sandbox object; anything else means a wrong base URL."""
        if not isinstance(response.body, dict) or "id" not in response.body:
            raise ProviderError(f"Daytona {what} answered {response.status} without a sandbox: check SCHEDULER_DAYTONA_API_URL", permanent=True)
        if isinstance(response.body.get("organizationId"), str) and response.body["organizationId"]:
            self._seen_domains[str(response.body["id"])] = response.body["organizationId"]
        return response.body

    def seen_domain(self, ref: SandboxRef) -> str | None:
        return self._seen_domains.pop(ref.sandbox_id, None)

    def _raise_for(self, response: _Response, what: str) -> None:
        if response.status in (401, 403):
            raise ProviderError(f"Daytona refused the credential for {what} ({response.status})", permanent=True)
        if response.status == 429:
            raise ProviderError(f"Daytona rate-limited {what}", retry_after=response.retry_after)
        raise ProviderError(f"Daytona {what} failed with {response.status}", permanent=400 <= response.status < 500)

    def start(self, request: StartRequest) -> SandboxRef:
        body = {"envVars": request.env, "labels": {"runId": request.run_id, "attempt": str(request.attempt)},
                "cpu": request.cpu, "memory": max(1, request.memory_mb // 1024), "autoStopInterval": 0}
        if self.snapshot:
            body["snapshot"] = self.snapshot
        created = self._call("POST", "/sandbox", request.routing_domain, body)
        if not 200 <= created.status < 300:
            self._raise_for(created, "sandbox create")
        sandbox_id = self._sandbox(created, "sandbox create")["id"]
        command = " ".join(shlex.quote(part) for part in request.command)
        for path, payload in (
            (f"/toolbox/{sandbox_id}/toolbox/process/session", {"sessionId": "runner"}),
            (f"/toolbox/{sandbox_id}/toolbox/process/session/runner/exec", {"command": command, "runAsync": True}),
        ):
            answer = self._call("POST", path, request.routing_domain, payload)
            if not 200 <= answer.status < 300:
                self._raise_for(answer, "runner start")
        return SandboxRef(self.name, sandbox_id, request.routing_domain)

    def find_started(self, run_id: str, attempt: int, routing_domain: str | None) -> list[SandboxRef]:
        labels = json.dumps({"runId": run_id, "attempt": str(attempt)}, separators=(",", ":"))
        response = self._call("GET", "/sandbox?" + urllib.parse.urlencode({"labels": labels}), routing_domain)
        if not 200 <= response.status < 300:
            self._raise_for(response, "sandbox list")
        body = response.body
        items = body.get("items") if isinstance(body, dict) else body
        if not isinstance(items, list):
            raise ProviderError(f"Daytona sandbox list answered {response.status} without a list: check SCHEDULER_DAYTONA_API_URL",
                                permanent=True)
        return [SandboxRef(self.name, item["id"], routing_domain) for item in items
                if isinstance(item, dict) and item.get("id") and item.get("state") != "destroyed"]

    def inspect(self, ref: SandboxRef) -> Inspection:
        try:
            response = self._call("GET", f"/sandbox/{ref.sandbox_id}", ref.routing_domain)
        except ProviderError as error:
            if error.permanent:
                raise
            return Inspection.UNKNOWN
        if response.status == 404:
            return Inspection.GONE  # under the organization's own key: really gone
        if not 200 <= response.status < 300:
            if response.status in (401, 403):
                self._raise_for(response, "sandbox inspect")
            return Inspection.UNKNOWN
        state = str(self._sandbox(response, "sandbox inspect").get("state", "")).lower()
        if state in GONE_STATES:
            return Inspection.GONE
        return Inspection.RUNNING if state in RUNNING_STATES else Inspection.UNKNOWN

    def delete(self, ref: SandboxRef) -> DeleteOutcome:
        response = self._call("DELETE", f"/sandbox/{ref.sandbox_id}", ref.routing_domain)
        if response.status == 404:
            return DeleteOutcome.ALREADY_ABSENT
        if 200 <= response.status < 300:
            self._sandbox(response, "sandbox delete")
            return DeleteOutcome.ACCEPTED
        if response.status == 409:
            # A state change is in progress: ask where it is going.
            follow_up = self._call("GET", f"/sandbox/{ref.sandbox_id}", ref.routing_domain)
            if follow_up.status == 404:
                return DeleteOutcome.ALREADY_ABSENT
            if 200 <= follow_up.status < 300:
                sandbox = self._sandbox(follow_up, "sandbox inspect")
                if sandbox.get("state") in ("destroying", "destroyed") or sandbox.get("desiredState") == "destroyed":
                    return DeleteOutcome.ACCEPTED
                raise ProviderError("Daytona sandbox state change in progress; delete again later")
            self._raise_for(follow_up, "sandbox inspect")
        self._raise_for(response, "sandbox delete")

    def read_back(self, ref: SandboxRef) -> ReadBack:
        try:
            response = self._call("GET", f"/sandbox/{ref.sandbox_id}", ref.routing_domain)
        except ProviderError:
            return ReadBack.UNKNOWN
        if response.status == 404:
            return ReadBack.DELETED
        if 200 <= response.status < 300 and isinstance(response.body, dict):
            self._sandbox(response, "sandbox read-back")
            return ReadBack.DELETED if response.body.get("state") == "destroyed" else ReadBack.STILL_PRESENT
        return ReadBack.UNKNOWN


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
