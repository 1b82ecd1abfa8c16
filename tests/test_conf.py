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
    ("SCHEDULER_BATCH_LINGER_MS", "250", "SCHEDULER_BATCH_LINGER_MS must be between 0 and 100"),
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


@pytest.mark.requirement("APP-3")
def test_a_django_setting_given_as_text_or_value_is_parsed_as_its_variable(settings):
    """APP-3: a user's settings.py may write SCHEDULER_* as values or as text; both read as the environment's."""
    settings.SCHEDULER_SETTLE_BATCH_SIZE = "7"
    settings.SCHEDULER_PREPARE_STATEMENTS = "false"
    settings.SCHEDULER_DAYTONA_API_KEYS = {"org": "key"}
    assert scheduler_settings.settle_batch_size == 7
    assert scheduler_settings.prepare_statements is False
    assert scheduler_settings.daytona_api_keys == {"org": "key"}


@pytest.mark.requirement("APP-3")
@pytest.mark.parametrize(("name", "value", "message"), [
    ("SCHEDULER_STATEMENT_TIMEOUT_MS", -3, "SCHEDULER_STATEMENT_TIMEOUT_MS must be between"),
    ("SCHEDULER_PREPARE_STATEMENTS", "maybe", "SCHEDULER_PREPARE_STATEMENTS must be true or false"),
    ("SCHEDULER_SCHEMA", "Bad-Name", "SCHEDULER_SCHEMA must be a plain lower-case identifier"),
    ("SCHEDULER_DEFAULT_PROVIDER", "ec2", "SCHEDULER_DEFAULT_PROVIDER must be one of"),
])
def test_check_names_a_bad_django_setting(settings, name, value, message):
    """APP-3: `manage.py check` reports a bad SCHEDULER_* value, naming it (scheduler.E003)."""
    from scheduler.system_checks import scheduler_settings_values

    assert scheduler_settings_values() == []
    setattr(settings, name, value)
    errors = scheduler_settings_values()
    assert [error.id for error in errors] == ["scheduler.E003"]
    assert message in errors[0].msg
