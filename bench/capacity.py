"""Capacity (issue 32): the highest rate of whole runs one primary sustains, and that rate held under faults.

A whole run: launched here at the offered rate, dispatched by `dispatch_runs` through an instant fake Daytona,
three heartbeats and its terminal sent here as its runner would, its facts delivered by `drain_outbox` to an
external receiver on loopback, its sandbox deleted by `run_sandbox_cleanup` and its billing finalized by
`finalize_billing` (`run_liveness_sweep` beside them). The fakes run in processes of their own, so this one's
GIL is not theirs. Used by `./dev bench soak --find-max`.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import capacity_fakes
import harness
from worker_logs import WorkerLogs

ORG = capacity_fakes.ORG
KINDS = {"dispatch": ["dispatch_runs", "--interval", "0.5"], "drain": ["drain_outbox", "--interval", "0.5"],
         "cleanup": ["run_sandbox_cleanup", "--providers", "daytona", "--interval", "0.5"],
         "billing": ["finalize_billing", "--interval", "0.5"], "liveness": ["run_liveness_sweep", "--interval", "1"]}
# Runners' requests in flight at once: as many request threads of one web process, each serving one runner's
# heartbeats and terminal through the process's group heartbeater and group settler (what gunicorn's threads do).
RUNNER_CLIENTS = 8
LAUNCH_CLIENTS = 8  # launches in flight at once, as many API clients of one web process
RESULT = {"status": "completed", "output": {"ok": True},
          "stats": {"runtimeResources": {"cpuMs": 1, "wallMs": 1, "peakMemoryBytes": 1}}}


def process_cpu(pid: int, children: bool = False) -> float:
    """CPU seconds (user and system) a process has used, with `children` that of its children that ended; 0 once
    it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def server_cpu(pgdata: Path) -> float:
    """CPU seconds of the private server's postmaster and every process it started (ended backends included)."""
    postmaster = int(Path(pgdata, "postmaster.pid").read_text().split()[0])
    total = process_cpu(postmaster, children=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent == postmaster:
                total += process_cpu(int(entry.name))
    return total


class Stack:
    """The worker processes, one of each kind, restarted when killed; their CPU kept across restarts."""

    def __init__(self, env: dict, project_dir: Path = harness.PROJECT_DIR):
        self.env = env
        self.project_dir = project_dir  # another release's tree runs the workers of that release
        self.spent = dict.fromkeys(KINDS, 0.0)
        self.logs = WorkerLogs()
        self.processes = {kind: self._start(kind) for kind in KINDS}

    def _start(self, kind: str) -> subprocess.Popen:
        with self.logs.open(kind) as log:
            return subprocess.Popen([sys.executable, str(self.project_dir / "manage.py"), *KINDS[kind]],
                                    cwd=self.project_dir, env=self.env, stdout=log, stderr=log)

    def kill(self, kind: str) -> None:
        process = self.processes[kind]
        self.spent[kind] += process_cpu(process.pid)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        self.processes[kind] = self._start(kind)

    def cpu(self) -> dict[str, float]:
        return {kind: self.spent[kind] + process_cpu(process.pid) for kind, process in self.processes.items()}

    def stop(self) -> None:
        for process in self.processes.values():
            process.terminate()
        for process in self.processes.values():
            process.wait(60)
        self.logs.discard_if_quiet()


def _survive(work, stop: threading.Event) -> None:
    """Run `work` until stopped; a database fault (a restart under chaos) drops the connection and goes on."""
    from django.db import connections

    seen: set[str] = set()
    while not stop.is_set():
        try:
            if not work():
                stop.wait(0.02)
        except Exception as error:  # noqa: BLE001 - the server restarts under chaos; the runners and launches go on
            if type(error).__name__ not in seen:  # each kind once: a bench whose load never runs says why
                seen.add(type(error).__name__)
                print(f"  load: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
            connections.close_all()
            stop.wait(0.2)
    connections.close_all()


class Load:
    """The offered launches (paced, the rate may change) and the runners (heartbeats, then the terminal)."""

    def __init__(self, receiver_url: str):
        from tests.outbox.fake_receiver import COORDINATOR_TOKEN

        self.rate = 0.0
        self.launched = 0
        self.stop = threading.Event()
        self.launch = {"sandboxProvider": "daytona", "runtimeApiBaseUrl": receiver_url,
                       "coordinatorInternalToken": COORDINATOR_TOKEN}
        self._paced_from, self._paced_count = time.monotonic(), 0
        self._launcher = ThreadPoolExecutor(LAUNCH_CLIENTS, thread_name_prefix="client")
        self._clients = threading.BoundedSemaphore(LAUNCH_CLIENTS)
        self._launch_faults: set[str] = set()
        # Each API call's (kind, epoch s at its end, seconds it took), for the stage latencies (stage_latency.py);
        self.calls: list[tuple[str, float, float]] = []
        self.threads = [threading.Thread(target=_survive, args=(self._launch_due, self.stop))]
        # One poller reads the parked attempts (what runners would report on) and hands each to a runner client
        # once: the bench's own reads stay a few dozen a second, not one per runner client per look.
        self._parked: queue.SimpleQueue = queue.SimpleQueue()
        self._handed: set[tuple[str, int]] = set()
        self._handed_lock = threading.Lock()
        self.threads.append(threading.Thread(target=_survive, args=(self._poll_parked, self.stop)))
        self.threads += [threading.Thread(target=_survive, args=(self._run_parked, self.stop))
                         for _ in range(RUNNER_CLIENTS)]
        for thread in self.threads:
            thread.start()

    def offer(self, rate: float) -> None:
        self.rate, self._paced_from, self._paced_count = rate, time.monotonic(), 0

    def _launch_due(self) -> bool:
        """The launches due by now, each a client's request to one web process: up to LAUNCH_CLIENTS at once, through
        the process's group launcher, as gunicorn's threads launch."""
        due = int((time.monotonic() - self._paced_from) * self.rate)
        if self._paced_count >= due:
            return False
        while self._paced_count < due:
            self._clients.acquire()
            self._paced_count += 1
            self.launched += 1
            self._launcher.submit(self._launch_one)
        return True

    def _launch_one(self) -> None:
        from django.db import connections

        from scheduler.runs import launches

        try:
            began = time.monotonic()
            launches.launch(launches.LaunchRequest(play_name="capacity:play", org_id=ORG, launch=self.launch,
                                                   max_attempts=1))
            self._timed("launch", began)
        except Exception as error:  # noqa: BLE001 - under chaos the server restarts; the client's launch is lost
            if type(error).__name__ not in self._launch_faults:  # each kind once, as _survive says them
                self._launch_faults.add(type(error).__name__)
                print(f"  load: a launch failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
            connections.close_all()
        finally:
            self._clients.release()

    def _poll_parked(self) -> bool:
        import psycopg
        from django.db import connection

        connection.ensure_connection()
        # psycopg's own cursor, prepared: Django's binds client-side, so each of the poller's few dozen looks a
        # second was parsed and planned again, the bench's cost counted as the runs' (real runners do not poll).
        with psycopg.Cursor(connection.connection) as cursor:
            # The parked attempts without a terminal, through the sweep's own partial index (a scan of every
            # attempt here would be this bench's cost, not the scheduler's).
            cursor.execute("SELECT run_id, attempt, lease_token FROM attempts WHERE status = 'waiting' "
                           "AND runner_result_json IS NULL AND liveness_deadline IS NOT NULL "
                           "ORDER BY liveness_deadline LIMIT 256", prepare=True)
            parked = cursor.fetchall()
        with self._handed_lock:
            fresh = [row for row in parked if (row[0], row[1]) not in self._handed]
            self._handed.update((run_id, attempt) for run_id, attempt, _ in fresh)
        for row in fresh:
            self._parked.put(row)
        self.stop.wait(0.02)
        return True

    def _run_parked(self) -> bool:
        """One runner's requests: three heartbeats, then its terminal, each as the runner API's view makes it (the
        group heartbeater and group settler join it with the requests other threads have in flight)."""
        from scheduler.runs import beats, settlement, settler

        try:
            run_id, attempt, lease = self._parked.get(timeout=0.1)
        except queue.Empty:
            return False
        try:
            for _ in range(3):
                began = time.monotonic()
                beats.beat(run_id, attempt, lease)
                self._timed("heartbeat", began)
            began = time.monotonic()
            settler.settle(settlement.Settlement(run_id, attempt, lease, RESULT, from_runner=True))
            self._timed("terminal", began)
        finally:
            with self._handed_lock:  # settled (or failed under chaos: the poller hands it out again)
                self._handed.discard((run_id, attempt))
        return True

    def _timed(self, kind: str, began: float) -> None:
        self.calls.append((kind, time.time(), time.monotonic() - began))

    def close(self) -> None:
        from scheduler.runs.batcher import ProcessShared

        self.stop.set()
        for thread in self.threads:
            thread.join(60)
        self._launcher.shutdown(wait=True)
        ProcessShared.close_all()


def window(since: float) -> dict:
    """What happened since `since` (epoch seconds): runs finished, and the delivery lag's p99 (s), overall and by
    kind of fact."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runs WHERE finished_at >= to_timestamp(%s)", [since])
        finished = cursor.fetchone()[0]
        # The delivery lag's p99 overall and per kind of fact, in one pass: past saturation admissions go first
        # (OBX-4), so the terminals' lag grows first.
        cursor.execute("SELECT GROUPING(event_type) = 1, event_type, percentile_cont(0.99) WITHIN GROUP (ORDER BY "
                       "extract(epoch FROM delivered_at - created_at)) FROM outbox "
                       "WHERE delivered_at >= to_timestamp(%s) GROUP BY GROUPING SETS ((), (event_type))", [since])
        lags = cursor.fetchall()
    lag = next((float(p99 or 0.0) for overall, _, p99 in lags if overall), 0.0)  # no facts: one row, NULL
    by_fact = {event_type.removeprefix("run."): float(p99) for overall, event_type, p99 in sorted(lags) if not overall}
    return {"finished": finished, "lag_s": lag, "lag_by_fact_s": by_fact}


def statement_time() -> tuple[float, list[tuple]]:
    """pg_stat_statements' total (planning and execution, ms) and its ten largest statements (calls, ms, text:
    statement_names names them, after the step, so that its work is not the step's)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(total_plan_time + total_exec_time), 0) FROM pg_stat_statements")
        total = float(cursor.fetchone()[0])
        cursor.execute("SELECT calls, total_plan_time + total_exec_time, query FROM pg_stat_statements "
                       "ORDER BY 2 DESC LIMIT 10")
        return total, cursor.fetchall()


def commits_and_wal() -> tuple[int, int, int]:
    """The database's commits so far (pg_stat_database), the WAL insert position (bytes) and the server's full-page
    images so far (pg_stat_wal): read before and after a step, their differences per run are what a run costs in
    commits and WAL (each backend reports its commits within a second of making them: a step of 10 s or more reads
    them to within a tenth), and how much of that WAL a checkpoint's full-page images were."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT xact_commit, pg_current_wal_insert_lsn() - '0/0'::pg_lsn, "
                       "(SELECT wal_fpi FROM pg_stat_wal) FROM pg_stat_database WHERE datname = current_database()")
        commits, wal, images = cursor.fetchone()
    return int(commits), int(wal), int(images)


def reset_statements() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_statements_reset()")


# What a worker SIGKILLed while holding a claim, a cleanup job or a billing job leaves to the others after this
# long (the defaults are 300, 120 and 300 s): the soak's end waits for every run to settle.
LEASE_SECONDS = "30"


def worker_env(fake_url: str) -> dict:
    """What the workers need beside DATABASE_URL: the fake Daytona, its key, quiet logs and short leases."""
    return {"SCHEDULER_DAYTONA_API_URL": fake_url, "SCHEDULER_DAYTONA_API_KEYS": json.dumps({ORG: "key-capacity"}),
            "LOG_LEVEL": "WARNING", "SSL_CERT_FILE": str(capacity_fakes.receiver_certificate()), "SCHEDULER_CLAIM_LEASE_SECONDS": LEASE_SECONDS,
            "SCHEDULER_CLEANUP_LEASE_SECONDS": LEASE_SECONDS, "SCHEDULER_BILLING_LEASE_SECONDS": LEASE_SECONDS}
