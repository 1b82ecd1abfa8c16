"""One typed settings object: defaults in one place, parsed and validated from the environment, read live."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from scheduler.conf import SchedulerSettings, scheduler_settings


def test_environment__defaults_when_unset():
    values = SchedulerSettings.environment({})
    assert values["SCHEDULER_SCHEMA"] == "runtime_scheduler"
    assert values["SCHEDULER_SETTLE_BATCH_SIZE"] == 32
    assert values["SCHEDULER_PREPARE_STATEMENTS"] is True
    assert values["SCHEDULER_DAYTONA_SNAPSHOT"] is None
    assert "SCHEDULER_EMBEDDED_DATABASE" not in values  # derived, never read from the environment


def test_environment__values_parsed_to_their_types():
    values = SchedulerSettings.environment({"SCHEDULER_SETTLE_BATCH_SIZE": "8", "SCHEDULER_PREPARE_STATEMENTS": "false",
                                            "SCHEDULER_DAYTONA_API_KEYS": '{"org": "k"}'})
    assert (values["SCHEDULER_SETTLE_BATCH_SIZE"], values["SCHEDULER_PREPARE_STATEMENTS"]) == (8, False)
    assert values["SCHEDULER_DAYTONA_API_KEYS"] == {"org": "k"}


@pytest.mark.parametrize("name,value,message", [
    ("SCHEDULER_SETTLE_BATCH_SIZE", "0", "SCHEDULER_SETTLE_BATCH_SIZE must be between 1 and 500"),
    ("SCHEDULER_CLAIM_LEASE_SECONDS", "soon", "SCHEDULER_CLAIM_LEASE_SECONDS must be an integer"),
    ("SCHEDULER_PREPARE_STATEMENTS", "maybe", "SCHEDULER_PREPARE_STATEMENTS must be true or false"),
    ("SCHEDULER_PLAN_CACHE_MODE", "always", "SCHEDULER_PLAN_CACHE_MODE must be one of"),
    ("SCHEDULER_SCHEMA", "Bad-Name", "SCHEDULER_SCHEMA must be a plain lower-case identifier"),
])
def test_environment__a_bad_value_names_its_variable(name, value, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        SchedulerSettings.environment({name: value})


def test_reads_are_live_and_fall_back_to_the_default(settings):
    settings.SCHEDULER_SETTLE_BATCH_SIZE = 3
    assert scheduler_settings.settle_batch_size == 3
    del settings.SCHEDULER_SETTLE_BATCH_SIZE
    assert scheduler_settings.settle_batch_size == 32
