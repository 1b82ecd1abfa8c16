"""Build the configured providers once per process, by name."""

from __future__ import annotations

import functools
import os

from django.conf import settings

from scheduler.providers.base import ProviderError, SandboxProvider


def provider_names() -> tuple[str, ...]:
    return ("local", "daytona", "modal")


def sandbox_placement(launch: dict, org_id: str | None) -> tuple[str, str | None]:
    """The provider and routing domain (whose credential is used) of a run's sandboxes, from its launch."""
    provider_name = launch.get("sandboxProvider") or settings.SCHEDULER_DEFAULT_PROVIDER
    return provider_name, None if provider_name == "local" else (launch.get("routingDomain") or org_id)


@functools.cache
def get_provider(name: str) -> SandboxProvider:
    if name == "local":
        from scheduler.providers.local import LocalProvider

        return LocalProvider(settings.SCHEDULER_SANDBOX_DIR)
    if name == "daytona":
        from scheduler.providers.daytona import DaytonaProvider

        return DaytonaProvider(settings.SCHEDULER_DAYTONA_API_URL, settings.SCHEDULER_DAYTONA_API_KEYS,
                               snapshot=settings.SCHEDULER_DAYTONA_SNAPSHOT)
    if name == "modal":
        from scheduler.providers.modal import ModalProvider

        if settings.SCHEDULER_MODAL_SERVER_URL:
            os.environ.setdefault("MODAL_SERVER_URL", settings.SCHEDULER_MODAL_SERVER_URL)
        return ModalProvider(settings.SCHEDULER_MODAL_TOKENS, image=settings.SCHEDULER_MODAL_IMAGE)
    raise ProviderError(f"unknown sandbox provider {name!r}", permanent=True)
