"""Cleanup rows and events written directly, in the shapes old and new workers leave them."""

import json

from tests.factories import query


def legacy(sandbox_id, run_id="run-1", attempt=1, environment="production", routing_domain=None, status="pending"):
    query("INSERT INTO sandbox_cleanup_jobs (sandbox_id, run_id, attempt, environment, routing_domain, status) "
          "VALUES (%s, %s, %s, %s, %s, %s)", [sandbox_id, run_id, attempt, environment, routing_domain, status])


def v2(sandbox_id, provider="daytona", run_id="run-1", attempt=1, environment="production", routing_domain=None,
       status="pending", deleted_at=None):
    query("INSERT INTO sandbox_cleanup_jobs_v2 (provider, sandbox_id, run_id, attempt, environment, routing_domain, status, deleted_at) "
          "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
          [provider, sandbox_id, run_id, attempt, environment, routing_domain, status, deleted_at])


def event(sandbox_id, event_type, created_at, provider="daytona", run_id="run-1", attempt=1, routing_domain=None, **details):
    query("INSERT INTO sandbox_cleanup_events_v2 (event_id, provider, sandbox_id, run_id, attempt, routing_domain, event_type, details_json, created_at) "
          "VALUES (gen_random_uuid()::text, %s, %s, %s, %s, %s, %s, %s::jsonb, %s)",
          [provider, sandbox_id, run_id, attempt, routing_domain, event_type, json.dumps(details), created_at])


def v2_rows():
    return query("SELECT provider, sandbox_id, routing_domain, status, deleted_at FROM sandbox_cleanup_jobs_v2 ORDER BY 2, 3 NULLS FIRST")


def legacy_rows():
    return query("SELECT sandbox_id, routing_domain, status, deleted_at FROM sandbox_cleanup_jobs ORDER BY 1")
