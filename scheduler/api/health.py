"""GET /healthz: 200 when the database answers, migrations are applied and the
schema shape is ready; 503 naming the cause otherwise."""

from __future__ import annotations

import logging

from django.db import DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from scheduler.conf import SCHEMA_VERSION, scheduler_settings
from scheduler.schema.shape import check_schema_shape

logger = logging.getLogger(__name__)


_migrations_applied = False


def _unapplied_migrations(connection) -> list[str]:
    """Loading the migration graph reads every migration file; once all are applied, remember it."""
    global _migrations_applied
    if _migrations_applied:
        return []
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    unapplied = [f"{migration.app_label}.{migration.name}" for migration, _ in plan]
    _migrations_applied = not unapplied
    return unapplied


@require_GET
def healthz(request):
    connection = connections["default"]
    try:
        connection.ensure_connection()
        unapplied = _unapplied_migrations(connection)
        report = check_schema_shape()
    except DatabaseError as exc:
        logger.warning("healthz: database unreachable: %s", exc.__class__.__name__)
        return JsonResponse({"status": "unavailable", "reason": "database unreachable"}, status=503)
    if unapplied:
        return JsonResponse(
            {"status": "unavailable", "reason": "migrations not applied", "unapplied": unapplied}, status=503
        )
    if not report.ready:
        return JsonResponse(
            {"status": "unavailable", "reason": "schema not ready", "problems": report.problems}, status=503
        )
    return JsonResponse({"status": "ok", "schema": scheduler_settings.schema, "schemaVersion": SCHEMA_VERSION})
