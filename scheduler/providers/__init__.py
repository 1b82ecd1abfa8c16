"""Sandbox providers behind one interface (requirements §10): local, daytona, modal."""

from scheduler.providers.base import (  # noqa: F401
    DeleteOutcome,
    Inspection,
    ProviderError,
    ReadBack,
    SandboxRef,
    SandboxProvider,
)
from scheduler.providers.registry import get_provider, sandbox_placement  # noqa: F401
