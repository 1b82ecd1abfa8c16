"""Build the configured providers once per process, by name."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Callable

from scheduler.conf import scheduler_settings
from scheduler.kinds import Provider
from scheduler.providers.base import ProviderError, SandboxProvider


def sandbox_placement(launch: dict, org_id: str | None) -> tuple[str, str | None]:
    """The provider and routing domain (whose credential is used) of a run's sandboxes, from its launch."""
    provider_name = launch.get("sandboxProvider") or scheduler_settings.default_provider
    return provider_name, None if provider_name == Provider.LOCAL else (launch.get("routingDomain") or org_id)


LOOPBACK_HOSTS = ("localhost", "::1")


def local_start_refusal() -> str | None:
    """Why the local provider must not start plays here, or None.

    A local sandbox runs its play as the scheduler's own user, with the
    scheduler's files and process list in reach: fine on a developer's
    loopback, not on a server others can reach.
    """
    from django.conf import settings

    if scheduler_settings.allow_local_sandboxes or settings.DEBUG:
        return None
    host = scheduler_settings.bind.rsplit(":", 1)[0].strip("[]")
    if host in LOOPBACK_HOSTS or host.startswith("127."):
        return None
    return (f"local sandboxes are for development: refused with the API bound to {host} and DEBUG off "
            "(set SCHEDULER_ALLOW_LOCAL_SANDBOXES=true to allow)")


def _local() -> SandboxProvider:
    from scheduler.providers.local import LocalProvider

    return LocalProvider(scheduler_settings.sandbox_dir, refuse_starts=local_start_refusal(),
                         run_as=scheduler_settings.local_sandbox_user)


def _daytona() -> SandboxProvider:
    from scheduler.providers.daytona import DaytonaProvider

    dockerfile = scheduler_settings.daytona_dockerfile
    return DaytonaProvider(scheduler_settings.daytona_api_url, scheduler_settings.daytona_api_keys,
                           snapshot=scheduler_settings.daytona_snapshot,
                           dockerfile=Path(dockerfile).read_text() if dockerfile else None,
                           disk_gb=scheduler_settings.daytona_disk_gb,
                           start_timeout=scheduler_settings.daytona_start_timeout_seconds)


def _modal() -> SandboxProvider:
    from scheduler.providers.modal import ModalProvider

    if scheduler_settings.modal_server_url:
        os.environ.setdefault("MODAL_SERVER_URL", scheduler_settings.modal_server_url)
    return ModalProvider(scheduler_settings.modal_tokens, image=scheduler_settings.modal_image,
                         image_definition=scheduler_settings.modal_image_definition,
                         default_lifetime=scheduler_settings.modal_sandbox_timeout_seconds)


# One builder per member of kinds.Provider, the one list of providers (a test holds the two together; the
# cleanup tables' CHECK constraints and SCHEDULER_DEFAULT_PROVIDER's choices derive from the enum too).
BUILDERS: dict[Provider, Callable[[], SandboxProvider]] = {
    Provider.LOCAL: _local, Provider.DAYTONA: _daytona, Provider.MODAL: _modal,
}


@functools.cache
def get_provider(name: str) -> SandboxProvider:
    try:
        return BUILDERS[Provider(name)]()
    except ValueError:
        raise ProviderError(f"unknown sandbox provider {name!r}", permanent=True) from None
