"""The floor under the cost bench's runs: the rows those runs wrote, written again by plain statements (an INSERT
per row, an UPDATE per change of state, nothing read, no fence, no CTE) in the production's fourteen write
transactions, on the same tables with the same indexes and triggers. What is left between the floor and the
production is what the scheduler's statements add; the floor itself is what this schema's rows and indexes cost,
which no statement can go below (issue 47).

Each phase's writes are a model of what the production's statements write, row for row and state for state (the
index entries the two make are printed by the cost bench side by side); run ids, sandbox ids and event ids are
renamed, so every write lands as the production's did, on rows of its own. Its statements run on a connection
of their own under force_generic_plan (prepared once, as the production's generic statements are).
"""

from __future__ import annotations

import json

import psycopg

SCHEMA = "runtime_scheduler"
# Every statement names its table so (an alias nothing reads): how pg_stat_statements tells them apart.
MARK = "AS cost_floor"
TABLES = ("runs", "attempts", "outbox", "sandbox_cleanup_jobs_v2", "sandbox_cleanup_events_v2",
          "compute_billing_jobs_v2", "billing_items")
MANY = ("outbox", "sandbox_cleanup_events_v2")  # the tables a run has several rows in


def run_rows(cursor, run_ids: list[str]) -> list[dict]:
    """Every kept row of each of `run_ids`, per run: {table: row, or rows for MANY}."""
    runs: dict[str, dict] = {run_id: {table: [] for table in MANY} for run_id in run_ids}
    for table in TABLES:
        cursor.execute(f"SELECT row_to_json(kept)::text FROM {SCHEMA}.{table} AS kept WHERE kept.run_id = ANY (%s)",
                       [run_ids])
        for (text,) in cursor.fetchall():
            row = json.loads(text)
            if table in MANY:
                runs[row["run_id"]][table].append(row)
            else:
                runs[row["run_id"]][table] = row
    return list(runs.values())


def renamed(rows: dict, index: int) -> dict:
    """`rows` with the run's id and its sandbox's id replaced (event ids are built from both)."""
    run_id, sandbox_id = rows["runs"]["run_id"], rows["sandbox_cleanup_jobs_v2"]["sandbox_id"]
    text = json.dumps(rows).replace(run_id, f"run_floor{index:028d}")
    return json.loads(text.replace(f'"{sandbox_id}"', f'"floor-{index}"').replace(f"{sandbox_id}:", f"floor-{index}:"))


def _write(table: str, row: dict, columns: tuple[str, ...]) -> tuple[str, list]:
    values = [json.dumps(row[column]) if isinstance(row[column], (dict, list)) else row[column] for column in columns]
    return (f"INSERT INTO {SCHEMA}.{table} {MARK} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",
            values)


def _set(table: str, assignments: str, key: dict, values: tuple = ()) -> tuple[str, list]:
    """An UPDATE of the row `key` names; `values` fill the assignments' own placeholders."""
    where = " AND ".join(f"{column} = %s" for column in key)
    return f"UPDATE {SCHEMA}.{table} {MARK} SET {assignments} WHERE {where}", [*values, *key.values()]


class Run:
    """One run's writes, transaction by transaction, under the cost bench's phase names."""

    def __init__(self, rows: dict):
        self.run, self.attempt = rows["runs"], rows["attempts"]
        self.job, self.item = rows["sandbox_cleanup_jobs_v2"], rows["billing_items"]
        self.facts = {fact["event_type"]: fact for fact in rows["outbox"]}
        self.events = {event["event_type"]: event for event in rows["sandbox_cleanup_events_v2"]}
        self.of_run = {"run_id": self.run["run_id"]}
        self.of_attempt = {"run_id": self.run["run_id"], "attempt": self.attempt["attempt"]}
        self.of_job = {column: self.job[column] for column in ("provider", "sandbox_id", "routing_domain_key")}
        self.resources = json.dumps(self.run["runtime_resources_json"])

    def phases(self) -> list[tuple[str, list[tuple[str, list]]]]:
        return [*self.admitted(), *self.settled(), *self.cleaned()]

    def fact(self, kind: str) -> tuple[str, list]:
        return _write("outbox", self.facts[kind], ("event_id", "run_id", "event_type", "payload_json", "lane"))

    def event(self, kind: str) -> tuple[str, list]:
        return _write("sandbox_cleanup_events_v2", self.events[kind], (
            "event_id", "provider", "sandbox_id", "run_id", "attempt", "routing_domain", "event_type", "details_json"))

    def admitted(self) -> list:
        """Launch, claim, park, three heartbeats."""
        run, of_run, of_attempt = self.run, self.of_run, self.of_attempt
        return [
            ("launch", [_write("runs", {**run, "status": "queued"},
                               ("run_id", "org_id", "play_name", "status", "launch_json", "max_attempts")),
                        self.fact("run.created")]),
            ("claim", [_set("runs", "status = 'running', started_at = now(), updated_at = now()", of_run),
                       _write("attempts", {**self.attempt, "status": "claimed"},
                              ("run_id", "attempt", "status", "lease_token", "lease_expires_at")),
                       self.fact("run.started")]),
            ("park", [_set("runs", "status = 'waiting', suspension_json = %s, runtime_resources_json = %s, "
                           "updated_at = now()", of_run, (json.dumps(run["suspension_json"]), self.resources)),
                      _set("attempts", "status = 'waiting', heartbeat_at = now(), liveness_deadline = now() + "
                           "interval '60 s', updated_at = now()", of_attempt),
                      self.fact("run.waiting")]),
            *[("heartbeats x3", [_set("attempts", "heartbeat_at = now()", of_attempt)])] * 3,
        ]

    def settled(self) -> list:
        """The settlement (its fact and both obligations) and the delivery of the run's facts (lease, then ack)."""
        run_id = self.run["run_id"]
        return [
            ("settle", [_set("attempts", "status = 'completed', runner_result_json = %s, finished_at = now(), "
                             "runner_terminal_received_at = now(), updated_at = now()", self.of_attempt,
                             (json.dumps(self.attempt["runner_result_json"]),)),
                        _set("runs", "status = 'completed', terminal_result_json = %s, finished_at = now(), "
                             "updated_at = now()", self.of_run, (json.dumps(self.run["terminal_result_json"]),)),
                        self.fact("run.completed"),
                        _write("sandbox_cleanup_jobs_v2", self.job,
                               ("provider", "sandbox_id", "run_id", "attempt", "environment", "routing_domain")),
                        (f"INSERT INTO {SCHEMA}.compute_billing_jobs_v2 {MARK} (run_id, available_at) "
                         "VALUES (%s, now() + interval '1 day')", [run_id])]),
            ("deliver 4 facts", [_set("outbox", "lease_owner = 'floor', lease_expires_at = now() + interval '30 s'",
                                      self.of_run)]),
            ("deliver 4 facts", [_set("outbox", "delivered_at = now(), lease_owner = NULL, lease_expires_at = NULL",
                                      self.of_run)]),
        ]

    def cleaned(self) -> list:
        """The cleanup's claim, acceptance, second claim and confirmation; billing."""
        of_job, leased = self.of_job, ("lease_owner = 'floor', lease_expires_at = now() + interval '30 s', "
                                       "attempt_count = attempt_count + 1, updated_at = now()")
        return [
            ("cleanup", [_set("sandbox_cleanup_jobs_v2", leased, of_job), self.event("provider_delete_requested")]),
            ("cleanup", [_set("sandbox_cleanup_jobs_v2", "deleted_at = now(), available_at = now() + interval '2 s', "
                              "lease_owner = NULL, lease_expires_at = NULL, updated_at = now()", of_job),
                         self.event("provider_delete_accepted"),
                         _set("runs", "runtime_resources_json = %s", self.of_run, (self.resources,))]),
            ("cleanup", [_set("sandbox_cleanup_jobs_v2", leased, of_job)]),
            ("cleanup", [_set("sandbox_cleanup_jobs_v2", "status = 'deleted', delete_confirmed_at = now(), "
                              "lease_owner = NULL, lease_expires_at = NULL, updated_at = now()", of_job),
                         self.event("provider_delete_confirmed"),
                         _set("runs", "updated_at = now()", self.of_run),
                         _set("compute_billing_jobs_v2", "available_at = now(), updated_at = now()", self.of_run)]),
            ("billing", [_set("compute_billing_jobs_v2", "status = 'finalized', finalized_at = now(), "
                              "attempt_count = 1, updated_at = now()", self.of_run),
                         _write("billing_items", self.item, (
                             "adjustment_session_id", "run_id", "org_id", "kind", "provider", "sandbox_id",
                             "routing_domain", "billing_started_at", "billing_ended_at", "duration_ms", "cpu",
                             "memory_mb"))]),
        ]


COUNTERS = f"""SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint,
                      (SELECT coalesce(sum(total_plan_time + total_exec_time), 0) FROM pg_stat_statements
                        WHERE query LIKE '%% {MARK} %%' AND query NOT LIKE '%%pg_stat_statements%%'),
                      {{own_wal}}"""
# PostgreSQL 18 counts WAL per backend: the floor's own statements', without autovacuum's and checkpoints'.
OWN_WAL = "(SELECT wal_bytes FROM pg_stat_get_backend_wal(pg_backend_pid()))::bigint"


def measure(conninfo: str, sources: list[dict], runs: int) -> dict[str, list]:
    """Per phase, the summed (commits, WAL bytes, statement ms, WAL bytes this connection wrote (0 before
    PostgreSQL 18)) of `runs` runs' plain writes (`sources` reused in turn, renamed), on a connection of its own."""
    totals: dict[str, list] = {}
    options = f"-c search_path={SCHEMA},public -c plan_cache_mode=force_generic_plan"
    with psycopg.connect(conninfo, autocommit=True, options=options) as conn:
        query = COUNTERS.format(own_wal=OWN_WAL if conn.info.server_version >= 180000 else "0")

        def counters():
            conn.execute("SELECT pg_stat_force_next_flush()")
            wal, statements, own = conn.execute(query).fetchone()
            return int(wal), float(statements), int(own)

        for index in range(runs):
            for phase, statements in Run(renamed(sources[index % len(sources)], index)).phases():
                before = counters()
                with conn.transaction():
                    for text, values in statements:
                        conn.execute(text, values, prepare=True)
                after = counters()
                total = totals.setdefault(phase, [0, 0, 0.0, 0])
                total[0] += 1
                for slot in (1, 2, 3):
                    total[slot] += after[slot - 1] - before[slot - 1]
    return totals
