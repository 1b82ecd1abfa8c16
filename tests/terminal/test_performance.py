"""TRM-5: terminal runtime performance facts: support matrix, body admission, invalid stats."""

import pytest

from tests import factories
from tests.factories import loads, one

pytestmark = pytest.mark.django_db

RESOURCES = {"cpuMs": 120, "wallMs": 300, "peakMemoryBytes": 4096}


def _terminal_payload(stats=None, output=None, performance_supported=True, body_admission_supported=None):
    compatibility = {"terminalRuntimePerformanceSupported": performance_supported}
    if body_admission_supported is not None:
        compatibility["terminalRuntimeBodyAdmissionSupported"] = body_admission_supported
    parked = factories.parked_run(launch={"contractSnapshot": {"compatibility": compatibility}})
    result = factories.completed_result(output)
    if stats is not None:
        result["stats"] = stats
    factories.report_terminal(parked.run_id, 1, parked.lease_token, result)
    return loads(one("SELECT payload_json FROM outbox WHERE event_id = %s", [f"{parked.run_id}:run.completed"]))


@pytest.mark.requirement("TRM-5")
def test_supported__valid_resources__bound_to_the_attempt():
    payload = _terminal_payload({"runtimeResources": RESOURCES})
    assert payload["terminalRuntimePerformance"] == {**RESOURCES, "attempt": 1}
    assert payload["terminalRuntimePerformanceUnavailableReason"] is None  # both keys, whenever supported


def test_unsupported__no_performance_keys_at_all():
    payload = _terminal_payload({"runtimeResources": {"cpuMs": -1}}, performance_supported=False)
    assert "terminalRuntimePerformance" not in payload
    assert "terminalRuntimePerformanceUnavailableReason" not in payload


@pytest.mark.parametrize("resources", [
    {"cpuMs": -1, "wallMs": 1, "peakMemoryBytes": 1},
    {"cpuMs": 1.5, "wallMs": 1, "peakMemoryBytes": 1},
    {"cpuMs": "1", "wallMs": 1, "peakMemoryBytes": 1},
    {"wallMs": 1, "peakMemoryBytes": 1},
    {**RESOURCES, "memoryAdmission": "big"},
    "not-an-object",
    None,
])
def test_invalid_runtime_resources__reason_invalid_runner_stats(resources):
    payload = _terminal_payload({"runtimeResources": resources})
    assert payload["terminalRuntimePerformance"] is None
    assert payload["terminalRuntimePerformanceUnavailableReason"] == "invalid_runner_stats"


def test_no_runtime_resources__neither_fact_nor_reason__both_keys_null():
    payload = _terminal_payload({"other": 1})
    assert payload["terminalRuntimePerformance"] is None
    assert payload["terminalRuntimePerformanceUnavailableReason"] is None


@pytest.mark.requirement("TRM-5")
def test_play_output_metadata__never_a_source():
    payload = _terminal_payload(stats=None, output={"metadata": {"runtimeResources": RESOURCES}, "stats": {"runtimeResources": RESOURCES}})
    assert payload["terminalRuntimePerformance"] is None


def test_what_the_runner_sent_is_kept__nulls_inside_memory_admission_included():
    admission = {"toolResponseBody": 10, "limitBytes": None, "nested": {"seen": None}}
    payload = _terminal_payload({"runtimeResources": {**RESOURCES, "memoryAdmission": admission}},
                                body_admission_supported=True)
    assert payload["terminalRuntimePerformance"] == {**RESOURCES, "attempt": 1, "memoryAdmission": admission}


@pytest.mark.parametrize("body_admission,admission,expected", [
    (True, {"toolResponseBody": 10, "other": 2}, {"toolResponseBody": 10, "other": 2}),
    (False, {"toolResponseBody": 10, "other": 2}, {"other": 2}),
    (None, {"toolResponseBody": 10, "other": 2}, {"other": 2}),
    (False, {"toolResponseBody": 10}, None),
    (True, {"toolResponseBody": 10}, {"toolResponseBody": 10}),
])
def test_body_admission__tool_response_body_kept_only_when_supported(body_admission, admission, expected):
    payload = _terminal_payload({"runtimeResources": {**RESOURCES, "memoryAdmission": admission}},
                                body_admission_supported=body_admission)
    performance = payload["terminalRuntimePerformance"]
    if expected is None:
        assert "memoryAdmission" not in performance
    else:
        assert performance["memoryAdmission"] == expected
