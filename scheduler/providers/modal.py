"""Modal through the `modal` client library (an optional extra: pip install '.[modal]').

The library speaks gRPC; MODAL_SERVER_URL points it elsewhere (tests use a
fake at the library boundary). Credentials are per workspace, chosen by the
sandbox's routing domain. poll() returning None means running, an exit code
means gone; NotFoundError means gone under the workspace's own credential.

PRV-5: a sandbox lives as long as its run may (the launch's timeout plus the
terminal grace, else SCHEDULER_MODAL_SANDBOX_TIMEOUT_SECONDS), at most Modal's
24 hours, never the library's 300 s default; its image is given the runner
package by the start (Image.add_local_dir of the runner's own files), so any
image with Python 3.12+ and the user's plays runs it.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from scheduler.kinds import Provider
from scheduler.providers import runner_bundle
from scheduler.providers.base import (DeleteOutcome, Inspection, ProviderCause, ProviderError, ReadBack,
                                      SandboxProvider, SandboxRef, StartRequest)

APP_NAME = "run-scheduler"
# Modal's own ceiling on a sandbox's lifetime (its sandbox guide: "up to 24 hours").
MAX_LIFETIME_SECONDS = 24 * 60 * 60
# Where the image carries the runner package; the runner's PYTHONPATH names it first.
RUNNER_ROOT = "/opt/scheduler-runner"


def sandbox_name(run_id: str, attempt: int) -> str:
    """One name per attempt (Modal keeps names unique among an app's running sandboxes)."""
    return f"{run_id}-attempt-{attempt}"


class ModalProvider(SandboxProvider):
    name = Provider.MODAL

    def __init__(self, tokens: dict[str, dict[str, str]], *, modal_module: Any = None, image: str | None = None,
                 image_definition: str | None = None, default_lifetime: int = 3600):
        self._tokens = dict(tokens)
        self._modal = modal_module
        self._clients: dict[str, Any] = {}
        self.image = image
        self.image_definition = image_definition
        self.default_lifetime = default_lifetime

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
            raise ProviderError(f"no Modal token for workspace {workspace!r}", permanent=True,
                                cause=ProviderCause.NOT_CONFIGURED)
        if workspace not in self._clients:
            try:
                self._clients[workspace] = self.modal.Client.from_credentials(token["tokenId"], token["tokenSecret"])
            except self.modal.exception.Error as error:
                # A client that cannot connect is retryable like any other provider failure (PRV-5).
                raise _provider_error("Modal client", error) from None
        return self._clients[workspace]

    def lifetime(self, request: StartRequest) -> int:
        return min(MAX_LIFETIME_SECONDS, request.lifetime_seconds or self.default_lifetime)

    def base_image(self):
        """The user's image: their definition (`module:function`), a registry image, or Modal's Debian slim."""
        if self.image_definition:
            module_name, _, function = self.image_definition.partition(":")
            try:
                image = getattr(importlib.import_module(module_name), function)()
            except Exception as error:  # noqa: BLE001 - whatever the user's definition raises is named, not raised
                raise ProviderError(f"SCHEDULER_MODAL_IMAGE_DEFINITION {self.image_definition} failed: "
                                    f"{type(error).__name__}: {error}", permanent=True,
                                    cause=ProviderCause.NOT_CONFIGURED) from None
            if not isinstance(image, self.modal.Image):
                raise ProviderError(f"SCHEDULER_MODAL_IMAGE_DEFINITION {self.image_definition} returned "
                                    f"{type(image).__name__}, not a modal.Image", permanent=True,
                                    cause=ProviderCause.NOT_CONFIGURED)
            return image
        return self.modal.Image.from_registry(self.image) if self.image else self.modal.Image.debian_slim()

    @functools.cached_property
    def runner_image(self):
        """The user's image with the runner package added, built once per provider rather than once per start (an
        Image is an immutable, lazy definition; Modal builds and caches it on first use). A definition that fails is
        not cached: the next start tries it again."""
        return self.base_image().add_local_dir(runner_bundle.unpacked_runner(), RUNNER_ROOT, copy=False)

    def _sandbox(self, ref: SandboxRef):
        client = self._client(ref.routing_domain)
        return self.modal.Sandbox.from_id(ref.sandbox_id, client=client)

    def _not_found(self, error: BaseException) -> bool:
        return isinstance(error, self.modal.exception.NotFoundError)

    def start(self, request: StartRequest) -> SandboxRef:
        client = self._client(request.routing_domain)
        command = ["sh", "-c", runner_bundle.modal_shell_command(request.command[0], RUNNER_ROOT)]
        try:
            app = self.modal.App.lookup(APP_NAME, create_if_missing=True, client=client)
            # The name is the tag find_started looks up: set by the create itself, so no window leaves it out.
            sandbox = self.modal.Sandbox.create(
                *command, app=app, client=client, image=self.runner_image,
                secrets=[self.modal.Secret.from_dict(request.env)], cpu=request.cpu, memory=request.memory_mb,
                timeout=self.lifetime(request), name=sandbox_name(request.run_id, request.attempt))
        except self.modal.exception.Error as error:
            raise _provider_error("Modal sandbox create", error) from None
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
            if isinstance(error, ProviderError) and error.permanent:
                raise
            return Inspection.UNKNOWN  # a client that cannot connect knows nothing either way
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


def _provider_error(what: str, error: BaseException) -> ProviderError:
    """The library's error as a provider error: its class names the cause; its text may carry a token, so never it."""
    kind = type(error).__name__
    if kind in ("AuthError", "PermissionDeniedError"):
        return ProviderError(f"{what} failed: {kind}", permanent=True, cause=ProviderCause.CREDENTIAL_REFUSED)
    if kind == "NotFoundError":
        return ProviderError(f"{what} failed: {kind}", permanent=True, cause=ProviderCause.NOT_FOUND)
    cause = ProviderCause.UNREACHABLE if kind == "ConnectionError" else ProviderCause.UNAVAILABLE
    return ProviderError(f"{what} failed: {kind}", cause=cause)
