"""PRV-6: every request the Daytona provider makes, and every answer the fake gives, validated by Stoplight Prism
against Daytona's own OpenAPI documents (strict: no unknown properties), over the provider's whole cycle."""

import pytest
import re
from pathlib import Path

import httpx

from scheduler.providers import DeleteOutcome, Inspection, ReadBack, SandboxRef
from scheduler.providers.base import StartRequest
from scheduler.providers.daytona import DaytonaProvider

KEYS = {"org-contract": "key-contract"}
RECIPES = Path(__file__).resolve().parent.parent.parent / "docs" / "recipes"


@pytest.mark.requirement("PRV-6")
def test_the_whole_cycle_passes_the_documents(contract):
    provider = DaytonaProvider(contract.api_url, KEYS, timeout=10, snapshot="daytona-small")
    env = {"SCHEDULER_API_URL": "http://127.0.0.1:9", "SCHEDULER_PLAY": '{"command": ["true"]}'}
    ref = provider.start(StartRequest("contract-run", 1, "org-contract", env, ["python3"]))
    assert provider.find_started("contract-run", 1, "org-contract") == [ref]
    assert provider.inspect(ref) is Inspection.RUNNING
    assert provider.delete(ref) is DeleteOutcome.ACCEPTED
    assert provider.read_back(ref) is ReadBack.STILL_PRESENT
    assert provider.read_back(ref) is ReadBack.DELETED
    assert provider.inspect(SandboxRef("daytona", ref.sandbox_id, "org-contract")) is Inspection.GONE
    forwarded = [path.split("?")[0] for _, path in contract.fake.requests if ref.sandbox_id in path]
    assert f"/toolbox/{ref.sandbox_id}/process/session/scheduler-runner/exec" in forwarded


def test_a_declarative_build_passes_the_documents(contract):
    """With the docs' recipe for a declarative build (docs/recipes/daytona-build.Dockerfile)."""
    recipe = (RECIPES / "daytona-build.Dockerfile").read_text()
    assert not re.search(r"^\s*(COPY|ADD)\b", recipe, re.M)  # sent as text with no build context
    provider = DaytonaProvider(contract.api_url, KEYS, timeout=10, dockerfile=recipe)
    ref = provider.start(StartRequest("contract-build", 1, "org-contract", {}, ["python3"], cpu=1, memory_mb=1024))
    assert provider.delete(ref) is DeleteOutcome.ACCEPTED


@pytest.mark.requirement("PRV-6")
def test_prism_refuses_what_the_documents_refuse(daytona_contract):
    """The mock is not a pass-through: the old client's `envVars` and a fractional `cpu` never reach the fake."""
    before = len(daytona_contract.fake.requests)
    for body in ({"envVars": {"A": "1"}}, {"cpu": 1.5}, {"labels": {"runId": 5}}):
        answer = httpx.post(f"{daytona_contract.api_url}/sandbox", json=body, timeout=10,
                            headers={"Authorization": "Bearer key-contract"})
        assert answer.status_code == 422, body
    old_path = httpx.post(f"{daytona_contract.toolbox.url}/dt-1/toolbox/process/session", json={"sessionId": "s"},
                          headers={"Authorization": "Bearer key-contract"}, timeout=10)
    assert old_path.status_code == 404  # the deprecated proxy paths are not in the documents
    assert len(daytona_contract.fake.requests) == before
