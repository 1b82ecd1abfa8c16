"""Modal through the `modal` client library (an optional extra: pip install '.[modal]').

The library speaks gRPC; MODAL_SERVER_URL points it elsewhere (tests use a
fake at the library boundary). Credentials are per workspace, chosen by the
sandbox's routing domain. poll() returning None means running, an exit code
means gone; NotFoundError means gone under the workspace's own credential.
"""

from __future__ import annotations

import importlib
from typing import Any

from scheduler.kinds import Provider
from scheduler.providers.base import DeleteOutcome, Inspection, ProviderError, ReadBack, SandboxProvider, SandboxRef, StartRequest

APP_NAME = "run-scheduler"


def sandbox_name(run_id: str, attempt: int) -> str:
    """One name per attempt (Modal keeps names unique among an app's running sandboxes)."""
    return f"{run_id}-attempt-{attempt}"


class ModalProvider(SandboxProvider):
    name = Provider.MODAL

    def __init__(self, tokens: dict[str, dict[str, str]], *, modal_module: Any = None, image: str | None = None):
        self._tokens = dict(tokens)
        self._modal = modal_module
        self._clients: dict[str, Any] = {}
        self.image = image

    @property
    def modal(self):
        if self._modal is None:
            try:
                self._modal = importlib.import_module("modal")
            except ImportError:
                raise ProviderError("the modal provider needs the optional extra: pip install '.[modal]'", permanent=True) from None
        return self._modal

    def _client(self, workspace: str | None):
        token = self._tokens.get(workspace or "")
        if not token:
            raise ProviderError(f"no Modal token for workspace {workspace!r}", permanent=True)
        if workspace not in self._clients:
            self._clients[workspace] = self.modal.Client.from_credentials(token["tokenId"], token["tokenSecret"])
        return self._clients[workspace]

    def _sandbox(self, ref: SandboxRef):
        client = self._client(ref.routing_domain)
        return self.modal.Sandbox.from_id(ref.sandbox_id, client=client)

    def _not_found(self, error: BaseException) -> bool:
        return isinstance(error, self.modal.exception.NotFoundError)

    def start(self, request: StartRequest) -> SandboxRef:
        client = self._client(request.routing_domain)
        try:
            app = self.modal.App.lookup(APP_NAME, create_if_missing=True, client=client)
            kwargs = {"app": app, "client": client, "secrets": [self.modal.Secret.from_dict(request.env)],
                      "cpu": request.cpu, "memory": request.memory_mb}
            if self.image:
                kwargs["image"] = self.modal.Image.from_registry(self.image)
            # The name is the tag find_started looks up: set by the create itself, so no window leaves it out.
            sandbox = self.modal.Sandbox.create(*request.command, name=sandbox_name(request.run_id, request.attempt), **kwargs)
        except self.modal.exception.Error as error:
            raise ProviderError(f"Modal sandbox create failed: {type(error).__name__}") from None
        return SandboxRef(self.name, sandbox.object_id, request.routing_domain)

    def find_started(self, run_id: str, attempt: int, routing_domain: str | None) -> list[SandboxRef]:
        client = self._client(routing_domain)
        try:
            sandbox = self.modal.Sandbox.from_name(APP_NAME, sandbox_name(run_id, attempt), client=client)
        except Exception as error:  # noqa: BLE001 - NotFound means none is running; the rest is unknown
            if self._not_found(error):
                return []
            raise ProviderError(f"Modal sandbox lookup failed: {type(error).__name__}") from None
        return [SandboxRef(self.name, sandbox.object_id, routing_domain)]

    def inspect(self, ref: SandboxRef) -> Inspection:
        try:
            code = self._sandbox(ref).poll()
        except Exception as error:  # noqa: BLE001 - the library's errors are all "unknown" except NotFound
            if self._not_found(error):
                return Inspection.GONE
            if isinstance(error, ProviderError):
                raise
            return Inspection.UNKNOWN
        return Inspection.RUNNING if code is None else Inspection.GONE

    def delete(self, ref: SandboxRef) -> DeleteOutcome:
        try:
            sandbox = self._sandbox(ref)
            if sandbox.poll() is not None:
                return DeleteOutcome.ALREADY_ABSENT
            sandbox.terminate()
            return DeleteOutcome.ACCEPTED
        except ProviderError:
            raise
        except Exception as error:  # noqa: BLE001
            if self._not_found(error):
                return DeleteOutcome.ALREADY_ABSENT
            raise ProviderError(f"Modal terminate failed: {type(error).__name__}") from None

    def read_back(self, ref: SandboxRef) -> ReadBack:
        try:
            code = self._sandbox(ref).poll()
        except ProviderError:
            return ReadBack.UNKNOWN
        except Exception as error:  # noqa: BLE001
            return ReadBack.DELETED if self._not_found(error) else ReadBack.UNKNOWN
        return ReadBack.STILL_PRESENT if code is None else ReadBack.DELETED
