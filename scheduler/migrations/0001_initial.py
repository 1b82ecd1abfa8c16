# Why safe during a deploy: every statement is CREATE ... IF NOT EXISTS (or
# CREATE OR REPLACE for the pure function), so an existing scheduler database
# is adopted without touching its rows and a fresh one is built; no index is
# built here (0003 builds them CONCURRENTLY).

from django.db import migrations, models
import django.db.models.deletion
import django.db.models.functions.datetime
from scheduler.schema.qualified import SchedulerMigration

V63_TABLES = [
    """
    CREATE TABLE IF NOT EXISTS runs (
        run_id text PRIMARY KEY,
        org_id text,
        play_name text NOT NULL,
        graph_hash text,
        runtime_profile text,
        definition_scope text CONSTRAINT runs_definition_scope_check CHECK (definition_scope IN ('org', 'system')),
        status text NOT NULL CONSTRAINT runs_status_check
            CHECK (status IN ('queued', 'running', 'waiting', 'completed', 'failed', 'cancelled')),
        launch_json jsonb NOT NULL DEFAULT '{}'::jsonb,
        input_json jsonb,
        suspension_json jsonb,
        terminal_result_json jsonb,
        runtime_resources_json jsonb NOT NULL DEFAULT '[]'::jsonb,
        runtime_timing_json jsonb,
        wait_deadline timestamptz,
        run_log_store text CONSTRAINT runs_run_log_store_check CHECK (run_log_store = 'planet_scale'),
        max_attempts integer NOT NULL DEFAULT 3 CONSTRAINT runs_max_attempts_check CHECK (max_attempts >= 1),
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        started_at timestamptz,
        finished_at timestamptz
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS attempts (
        run_id text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        attempt integer NOT NULL CONSTRAINT attempts_attempt_check CHECK (attempt >= 1),
        status text NOT NULL CONSTRAINT attempts_status_check
            CHECK (status IN ('claimed', 'running', 'waiting', 'completed', 'failed', 'cancelled', 'released')),
        lease_token text,
        lease_expires_at timestamptz,
        heartbeat_at timestamptz,
        runner_result_json jsonb,
        runner_log_payload_json jsonb,
        runner_terminal_received_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        finished_at timestamptz,
        CONSTRAINT attempts_pkey PRIMARY KEY (run_id, attempt)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS outbox (
        event_id text PRIMARY KEY,
        run_id text NOT NULL,
        event_type text NOT NULL,
        payload_json jsonb NOT NULL DEFAULT '{}'::jsonb,
        lane text NOT NULL DEFAULT 'ledger' CONSTRAINT outbox_lane_check CHECK (lane IN ('ledger', 'search')),
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        delivered_at timestamptz,
        lease_owner text,
        lease_expires_at timestamptz,
        next_attempt_at timestamptz,
        attempt_count integer NOT NULL DEFAULT 0,
        last_error text,
        failed_at timestamptz
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS control (
        key text PRIMARY KEY,
        value_json jsonb NOT NULL DEFAULT '{}'::jsonb,
        created_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS runtime_release_admission (
        release_id text PRIMARY KEY,
        accepting boolean NOT NULL,
        admission_epoch bigint NOT NULL CONSTRAINT runtime_release_admission_epoch_check
            CHECK (admission_epoch >= 0 AND admission_epoch <= 9007199254740991),
        updated_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS receipts (
        run_id text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        key text NOT NULL,
        status text NOT NULL CONSTRAINT receipts_status_check
            CHECK (status IN ('queued', 'running', 'completed', 'failed', 'skipped')),
        lease_id text,
        lease_expires_at timestamptz,
        run_attempt integer,
        output_json jsonb,
        error_json jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT receipts_pkey PRIMARY KEY (run_id, key)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS sandbox_cleanup_jobs (
        sandbox_id text PRIMARY KEY,
        run_id text NOT NULL,
        attempt integer NOT NULL,
        environment text NOT NULL,
        routing_domain text,
        status text NOT NULL DEFAULT 'pending' CONSTRAINT sandbox_cleanup_jobs_status_check
            CHECK (status IN ('pending', 'blocked', 'deleted')),
        attempt_count integer NOT NULL DEFAULT 0,
        failure_count integer NOT NULL DEFAULT 0,
        available_at timestamptz NOT NULL DEFAULT now(),
        lease_owner text,
        lease_expires_at timestamptz,
        last_error text,
        blocked_at timestamptz,
        block_reason text,
        deleted_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS sandbox_cleanup_jobs_v2 (
        provider text NOT NULL CONSTRAINT sandbox_cleanup_jobs_v2_provider_check
            CHECK (provider IN ('daytona', 'modal', 'local')),
        sandbox_id text NOT NULL,
        run_id text NOT NULL,
        attempt integer NOT NULL,
        environment text NOT NULL,
        routing_domain text,
        routing_domain_key text GENERATED ALWAYS AS (coalesce(routing_domain, '')) STORED,
        status text NOT NULL DEFAULT 'pending' CONSTRAINT sandbox_cleanup_jobs_v2_status_check
            CHECK (status IN ('pending', 'blocked', 'deleted')),
        attempt_count integer NOT NULL DEFAULT 0,
        failure_count integer NOT NULL DEFAULT 0,
        available_at timestamptz NOT NULL DEFAULT now(),
        lease_owner text,
        lease_expires_at timestamptz,
        last_error text,
        blocked_at timestamptz,
        block_reason text,
        deleted_at timestamptz,
        delete_confirmed_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT sandbox_cleanup_jobs_v2_pkey PRIMARY KEY (provider, sandbox_id, routing_domain_key)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS sandbox_cleanup_events_v2 (
        event_id text PRIMARY KEY,
        provider text NOT NULL CONSTRAINT sandbox_cleanup_events_v2_provider_check
            CHECK (provider IN ('daytona', 'modal', 'local')),
        sandbox_id text NOT NULL,
        run_id text NOT NULL,
        attempt integer NOT NULL,
        routing_domain text,
        event_type text NOT NULL,
        details_json jsonb NOT NULL DEFAULT '{}'::jsonb,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp()
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS compute_billing_jobs_v2 (
        run_id text PRIMARY KEY,
        status text NOT NULL DEFAULT 'pending' CONSTRAINT compute_billing_jobs_v2_status_check
            CHECK (status IN ('pending', 'finalized')),
        lease_owner text,
        lease_expires_at timestamptz,
        attempt_count integer NOT NULL DEFAULT 0,
        available_at timestamptz NOT NULL DEFAULT now(),
        last_error text,
        finalized_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS billing_items (
        adjustment_session_id text PRIMARY KEY,
        run_id text NOT NULL,
        org_id text,
        kind text NOT NULL CONSTRAINT billing_items_kind_check CHECK (kind IN ('resource', 'late_resource')),
        provider text NOT NULL,
        sandbox_id text NOT NULL,
        routing_domain text,
        billing_started_at timestamptz NOT NULL,
        billing_ended_at timestamptz NOT NULL,
        duration_ms bigint NOT NULL CONSTRAINT billing_items_duration_check CHECK (duration_ms >= 0),
        cpu double precision,
        memory_mb integer,
        created_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS scheduler_schema_migrations (
        version integer PRIMARY KEY,
        applied_at timestamptz NOT NULL DEFAULT now(),
        description text
    )
    """,
    # The dispatch launch (requirements §1.8): the allow-listed launch keys outbox
    # delivery needs, never the whole row. Pure, so CREATE OR REPLACE is safe.
    """
    CREATE OR REPLACE FUNCTION run_ledger_dispatch_launch(launch jsonb)
    RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $fn$
        SELECT CASE WHEN jsonb_typeof(launch) = 'object' THEN (
            SELECT coalesce(jsonb_object_agg(entry.key, entry.value), '{}'::jsonb)
            FROM jsonb_each(launch) AS entry
            WHERE entry.key = ANY (ARRAY[
                'absurdReleaseId', 'executorToken', 'coordinatorInternalToken',
                'baseUrl', 'runtimeApiBaseUrl',
                'arrayInputTerminalRetirementSupported', 'arrayInputTerminalProjectionOrigin',
                'vercelProtectionBypassToken', 'maxConcurrentExternalCalls'
            ])
        ) ELSE '{}'::jsonb END
    $fn$
    """,
]


class Migration(SchedulerMigration):
    initial = True

    dependencies = []

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(sql, reverse_sql=migrations.RunSQL.noop) for sql in V63_TABLES],
            state_operations=[
                migrations.CreateModel(
                    name='Attempt',
                    fields=[
                        ('pk', models.CompositePrimaryKey('run_id', 'attempt', blank=True, editable=False, primary_key=True, serialize=False)),
                        ('attempt', models.IntegerField()),
                        ('status', models.TextField()),
                        ('lease_token', models.TextField(null=True)),
                        ('lease_expires_at', models.DateTimeField(null=True)),
                        ('heartbeat_at', models.DateTimeField(null=True)),
                        ('runner_result_json', models.JSONField(null=True)),
                        ('runner_log_payload_json', models.JSONField(null=True)),
                        ('runner_terminal_received_at', models.DateTimeField(null=True)),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('finished_at', models.DateTimeField(null=True)),
                    ],
                    options={
                        'db_table': 'attempts',
                    },
                ),
                migrations.CreateModel(
                    name='CleanupJob',
                    fields=[
                        ('sandbox_id', models.TextField()),
                        ('run_id', models.TextField()),
                        ('attempt', models.IntegerField()),
                        ('environment', models.TextField()),
                        ('routing_domain', models.TextField(null=True)),
                        ('status', models.TextField(db_default='pending')),
                        ('attempt_count', models.IntegerField(db_default=0)),
                        ('failure_count', models.IntegerField(db_default=0)),
                        ('available_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('lease_owner', models.TextField(null=True)),
                        ('lease_expires_at', models.DateTimeField(null=True)),
                        ('last_error', models.TextField(null=True)),
                        ('blocked_at', models.DateTimeField(null=True)),
                        ('block_reason', models.TextField(null=True)),
                        ('deleted_at', models.DateTimeField(null=True)),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('pk', models.CompositePrimaryKey('provider', 'sandbox_id', 'routing_domain_key', blank=True, editable=False, primary_key=True, serialize=False)),
                        ('provider', models.TextField()),
                        ('routing_domain_key', models.TextField(editable=False)),
                        ('delete_confirmed_at', models.DateTimeField(null=True)),
                    ],
                    options={
                        'verbose_name': 'cleanup job',
                        'db_table': 'sandbox_cleanup_jobs_v2',
                    },
                ),
                migrations.CreateModel(
                    name='ControlKey',
                    fields=[
                        ('key', models.TextField(primary_key=True, serialize=False)),
                        ('value_json', models.JSONField(db_default={})),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                    ],
                    options={
                        'db_table': 'control',
                    },
                ),
                migrations.CreateModel(
                    name='LegacyCleanupJob',
                    fields=[
                        ('run_id', models.TextField()),
                        ('attempt', models.IntegerField()),
                        ('environment', models.TextField()),
                        ('routing_domain', models.TextField(null=True)),
                        ('status', models.TextField(db_default='pending')),
                        ('attempt_count', models.IntegerField(db_default=0)),
                        ('failure_count', models.IntegerField(db_default=0)),
                        ('available_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('lease_owner', models.TextField(null=True)),
                        ('lease_expires_at', models.DateTimeField(null=True)),
                        ('last_error', models.TextField(null=True)),
                        ('blocked_at', models.DateTimeField(null=True)),
                        ('block_reason', models.TextField(null=True)),
                        ('deleted_at', models.DateTimeField(null=True)),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('sandbox_id', models.TextField(primary_key=True, serialize=False)),
                    ],
                    options={
                        'verbose_name': 'cleanup job (legacy v12)',
                        'db_table': 'sandbox_cleanup_jobs',
                    },
                ),
                migrations.CreateModel(
                    name='OutboxEvent',
                    fields=[
                        ('event_id', models.TextField(primary_key=True, serialize=False)),
                        ('run_id', models.TextField()),
                        ('event_type', models.TextField()),
                        ('payload_json', models.JSONField(db_default={})),
                        ('lane', models.TextField(db_default='ledger')),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('delivered_at', models.DateTimeField(null=True)),
                        ('lease_owner', models.TextField(null=True)),
                        ('lease_expires_at', models.DateTimeField(null=True)),
                        ('next_attempt_at', models.DateTimeField(null=True)),
                        ('attempt_count', models.IntegerField(db_default=0)),
                        ('last_error', models.TextField(null=True)),
                        ('failed_at', models.DateTimeField(null=True)),
                    ],
                    options={
                        'verbose_name': 'outbox fact',
                        'db_table': 'outbox',
                    },
                ),
                migrations.CreateModel(
                    name='Receipt',
                    fields=[
                        ('pk', models.CompositePrimaryKey('run_id', 'key', blank=True, editable=False, primary_key=True, serialize=False)),
                        ('key', models.TextField()),
                        ('status', models.TextField()),
                        ('lease_id', models.TextField(null=True)),
                        ('lease_expires_at', models.DateTimeField(null=True)),
                        ('run_attempt', models.IntegerField(null=True)),
                        ('output_json', models.JSONField(null=True)),
                        ('error_json', models.JSONField(null=True)),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                    ],
                    options={
                        'db_table': 'receipts',
                    },
                ),
                migrations.CreateModel(
                    name='ReleaseAdmission',
                    fields=[
                        ('release_id', models.TextField(primary_key=True, serialize=False)),
                        ('accepting', models.BooleanField()),
                        ('admission_epoch', models.BigIntegerField()),
                        ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                    ],
                    options={
                        'db_table': 'runtime_release_admission',
                    },
                ),
                migrations.CreateModel(
                    name='Run',
                    fields=[
                        ('run_id', models.TextField(primary_key=True, serialize=False)),
                        ('org_id', models.TextField(null=True)),
                        ('play_name', models.TextField()),
                        ('graph_hash', models.TextField(null=True)),
                        ('runtime_profile', models.TextField(null=True)),
                        ('definition_scope', models.TextField(null=True)),
                        ('status', models.TextField()),
                        ('launch_json', models.JSONField(db_default={})),
                        ('input_json', models.JSONField(null=True)),
                        ('suspension_json', models.JSONField(null=True)),
                        ('terminal_result_json', models.JSONField(null=True)),
                        ('runtime_resources_json', models.JSONField(db_default=[])),
                        ('runtime_timing_json', models.JSONField(null=True)),
                        ('wait_deadline', models.DateTimeField(null=True)),
                        ('run_log_store', models.TextField(null=True)),
                        ('max_attempts', models.IntegerField(db_default=3)),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('started_at', models.DateTimeField(null=True)),
                        ('finished_at', models.DateTimeField(null=True)),
                    ],
                    options={
                        'db_table': 'runs',
                    },
                ),
                migrations.CreateModel(
                    name='SchemaVersion',
                    fields=[
                        ('version', models.IntegerField(primary_key=True, serialize=False)),
                        ('applied_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('description', models.TextField(null=True)),
                    ],
                    options={
                        'db_table': 'scheduler_schema_migrations',
                    },
                ),
                migrations.CreateModel(
                    name='BillingItem',
                    fields=[
                        ('adjustment_session_id', models.TextField(primary_key=True, serialize=False)),
                        ('run_id', models.TextField()),
                        ('org_id', models.TextField(null=True)),
                        ('kind', models.TextField()),
                        ('provider', models.TextField()),
                        ('sandbox_id', models.TextField()),
                        ('routing_domain', models.TextField(null=True)),
                        ('billing_started_at', models.DateTimeField()),
                        ('billing_ended_at', models.DateTimeField()),
                        ('duration_ms', models.BigIntegerField()),
                        ('cpu', models.FloatField(null=True)),
                        ('memory_mb', models.IntegerField(null=True)),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                    ],
                    options={
                        'db_table': 'billing_items',
                        'constraints': [models.CheckConstraint(condition=models.Q(('kind__in', ('resource', 'late_resource'))), name='billing_items_kind_check'), models.CheckConstraint(condition=models.Q(('duration_ms__gte', 0)), name='billing_items_duration_check')],
                    },
                ),
                migrations.CreateModel(
                    name='BillingJob',
                    fields=[
                        ('run_id', models.TextField(primary_key=True, serialize=False)),
                        ('status', models.TextField(db_default='pending')),
                        ('lease_owner', models.TextField(null=True)),
                        ('lease_expires_at', models.DateTimeField(null=True)),
                        ('attempt_count', models.IntegerField(db_default=0)),
                        ('available_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('last_error', models.TextField(null=True)),
                        ('finalized_at', models.DateTimeField(null=True)),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                        ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                    ],
                    options={
                        'verbose_name': 'compute billing job',
                        'db_table': 'compute_billing_jobs_v2',
                        'constraints': [models.CheckConstraint(condition=models.Q(('status__in', ('pending', 'finalized'))), name='compute_billing_jobs_v2_status_check')],
                    },
                ),
                migrations.CreateModel(
                    name='CleanupEvent',
                    fields=[
                        ('event_id', models.TextField(primary_key=True, serialize=False)),
                        ('provider', models.TextField()),
                        ('sandbox_id', models.TextField()),
                        ('run_id', models.TextField()),
                        ('attempt', models.IntegerField()),
                        ('routing_domain', models.TextField(null=True)),
                        ('event_type', models.TextField()),
                        ('details_json', models.JSONField(db_default={})),
                        ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                    ],
                    options={
                        'db_table': 'sandbox_cleanup_events_v2',
                        'constraints': [models.CheckConstraint(condition=models.Q(('provider__in', ('daytona', 'modal', 'local'))), name='sandbox_cleanup_events_v2_provider_check')],
                    },
                ),
                migrations.AddConstraint(
                    model_name='cleanupjob',
                    constraint=models.CheckConstraint(condition=models.Q(('status__in', ('pending', 'blocked', 'deleted'))), name='sandbox_cleanup_jobs_v2_status_check'),
                ),
                migrations.AddConstraint(
                    model_name='cleanupjob',
                    constraint=models.CheckConstraint(condition=models.Q(('provider__in', ('daytona', 'modal', 'local'))), name='sandbox_cleanup_jobs_v2_provider_check'),
                ),
                migrations.AddConstraint(
                    model_name='legacycleanupjob',
                    constraint=models.CheckConstraint(condition=models.Q(('status__in', ('pending', 'blocked', 'deleted'))), name='sandbox_cleanup_jobs_status_check'),
                ),
                migrations.AddConstraint(
                    model_name='outboxevent',
                    constraint=models.CheckConstraint(condition=models.Q(('lane__in', ('ledger', 'search'))), name='outbox_lane_check'),
                ),
                migrations.AddConstraint(
                    model_name='releaseadmission',
                    constraint=models.CheckConstraint(condition=models.Q(('admission_epoch__gte', 0), ('admission_epoch__lte', 9007199254740991)), name='runtime_release_admission_epoch_check'),
                ),
                migrations.AddConstraint(
                    model_name='run',
                    constraint=models.CheckConstraint(condition=models.Q(('status__in', ('queued', 'running', 'waiting', 'completed', 'failed', 'cancelled'))), name='runs_status_check'),
                ),
                migrations.AddConstraint(
                    model_name='run',
                    constraint=models.CheckConstraint(condition=models.Q(('definition_scope__in', ('org', 'system'))), name='runs_definition_scope_check'),
                ),
                migrations.AddConstraint(
                    model_name='run',
                    constraint=models.CheckConstraint(condition=models.Q(('run_log_store', 'planet_scale')), name='runs_run_log_store_check'),
                ),
                migrations.AddConstraint(
                    model_name='run',
                    constraint=models.CheckConstraint(condition=models.Q(('max_attempts__gte', 1)), name='runs_max_attempts_check'),
                ),
                migrations.AddField(
                    model_name='receipt',
                    name='run',
                    field=models.ForeignKey(db_column='run_id', db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='receipts', to='scheduler.run'),
                ),
                migrations.AddField(
                    model_name='attempt',
                    name='run',
                    field=models.ForeignKey(db_column='run_id', db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='attempts', to='scheduler.run'),
                ),
                migrations.AddConstraint(
                    model_name='receipt',
                    constraint=models.CheckConstraint(condition=models.Q(('status__in', ('queued', 'running', 'completed', 'failed', 'skipped'))), name='receipts_status_check'),
                ),
                migrations.AddConstraint(
                    model_name='attempt',
                    constraint=models.CheckConstraint(condition=models.Q(('attempt__gte', 1)), name='attempts_attempt_check'),
                ),
                migrations.AddConstraint(
                    model_name='attempt',
                    constraint=models.CheckConstraint(condition=models.Q(('status__in', ('claimed', 'running', 'waiting', 'completed', 'failed', 'cancelled', 'released'))), name='attempts_status_check'),
                ),
            ],
        ),
    ]
