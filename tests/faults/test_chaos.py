"""The chaos suite: the whole stack (scheduler_up: web, dispatch, sweep, drainers, cleanup, billing, local sandboxes)
on a PostgreSQL server of its own, through a clean restart, a crash, backend-termination storms and SIGKILLed workers.

Afterwards nothing is lost: no worker died of a fault, every run has one verdict, every fact reached the built-in
run ledger once and in per-run causal order, every sandbox was deleted, and each was billed once.
"""

import json
import random
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

import psutil
import pytest

from scheduler.providers.local import LocalProvider
from tests.faults.private_server import PrivateServer
from tests.support import PROJECT_DIR, free_port, manage_command, manage_env, wait_for

TOKEN = "chaos-internal-token"
WORKERS = ("dispatch_runs", "run_liveness_sweep", "drain_outbox", "run_sandbox_cleanup", "finalize_billing")


class Stack:
    """scheduler_up on `server` (a PrivateServer of its own unless given: a failover formation, say), whose `url` it
    is given as DATABASE_URL and whose `query` reads it."""

    def __init__(self, tmp_path, server=None):
        self.server = server or PrivateServer(tmp_path)
        self.sandboxes = tmp_path / "sandboxes"
        self.log_path = tmp_path / "scheduler_up.log"
        self.port = free_port()
        self.log = open(self.log_path, "w")
        env = manage_env(self.server.url, SCHEDULER_INTERNAL_TOKEN=TOKEN, SCHEDULER_SANDBOX_DIR=str(self.sandboxes),
                         SCHEDULER_CLAIM_LEASE_SECONDS="5", SCHEDULER_HEARTBEAT_TIMEOUT_MS="6000",
                         SCHEDULER_CLEANUP_LEASE_SECONDS="10", SCHEDULER_BILLING_LEASE_SECONDS="10")
        self.process = subprocess.Popen(manage_command("scheduler_up", "--no-demo", "--bind", f"127.0.0.1:{self.port}"),
                                        env=env, cwd=PROJECT_DIR, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.healthy(), "scheduler_up serving /healthz", seconds=120)

    def healthy(self, timeout: float = 2) -> bool:
        return self.health(timeout) == "ok"

    def health(self, timeout: float = 2) -> str:
        """"ok", or why not: "slow" (no answer within `timeout`), the HTTP status, or the connection's error."""
        assert self.process.poll() is None, self.log_path.read_text()[-3000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=timeout) as response:
                return "ok" if response.status == 200 else str(response.status)
        except urllib.error.HTTPError as error:
            return str(error.code)
        except TimeoutError:
            return "slow"
        except (urllib.error.URLError, OSError) as error:
            return "slow" if isinstance(getattr(error, "reason", None), TimeoutError) else type(error).__name__

    def launch(self, count: int) -> list[str]:
        body = json.dumps({"playName": "tests.plays:sleep", "orgId": "org-chaos", "input": {"seconds": 1},
                           "launch": {"sandboxProvider": "local"}}).encode()
        run_ids = []
        for _ in range(count):
            request = urllib.request.Request(f"http://127.0.0.1:{self.port}/internal/runs", data=body, method="POST",
                                             headers={"Authorization": f"Bearer {TOKEN}"})
            for _ in range(100):  # the database may be restarting: 503 means "retry"
                try:
                    with urllib.request.urlopen(request, timeout=10) as response:
                        run_ids.append(json.loads(response.read())["runId"])
                        break
                except urllib.error.HTTPError as error:
                    error.close()
                    assert error.code == 503, error.code
                    time.sleep(0.2)
        return run_ids

    def count(self, sql: str) -> int:
        for _ in range(100):
            try:
                return self.server.query(sql)[0][0]
            except Exception:  # noqa: BLE001 - the server may be restarting
                time.sleep(0.2)
        raise AssertionError("the private server never answered")

    def worker(self, command: str) -> psutil.Process:
        def find():
            for child in psutil.Process(self.process.pid).children():
                try:
                    if command in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                        return child
                except psutil.Error:  # a child that just exited, not yet reaped by the supervisor
                    continue
            return None

        return wait_for(find, f"a running {command} child", seconds=60)

    def restarts(self) -> int:
        return self.log_path.read_text().count(" exited with ")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        self.server.stop()


@pytest.fixture
def stack(tmp_path):
    built = Stack(tmp_path)
    try:
        yield built
    finally:
        built.close()


def _settled_everywhere(stack: Stack, total: int) -> bool:
    return (stack.count("SELECT count(*) FROM runtime_scheduler.runs WHERE status IN ('completed', 'failed', 'cancelled')") == total
            and stack.count("SELECT count(*) FROM runtime_scheduler.outbox WHERE delivered_at IS NULL") == 0
            and stack.count("SELECT count(*) FROM runtime_scheduler.sandbox_cleanup_jobs_v2 WHERE status <> 'deleted'") == 0
            and stack.count("SELECT count(*) FROM runtime_scheduler.compute_billing_jobs_v2 WHERE status <> 'finalized'") == 0)


def _what_is_left(stack: Stack) -> str:
    """What a chaos run that never settled left behind, so its failure says where to look."""
    query = stack.server.query
    parts = [
        ("runs by status", "SELECT status, count(*) FROM runtime_scheduler.runs GROUP BY status"),
        ("attempts by status", "SELECT status, count(*) FROM runtime_scheduler.attempts GROUP BY status"),
        ("undelivered facts", "SELECT run_id, event_type, attempt_count, left(coalesce(last_error, ''), 200) "
                              "FROM runtime_scheduler.outbox WHERE delivered_at IS NULL ORDER BY created_at LIMIT 20"),
        ("cleanup jobs not deleted", "SELECT provider, sandbox_id, status, attempt_count, left(coalesce(last_error, ''), 200) "
                                     "FROM runtime_scheduler.sandbox_cleanup_jobs_v2 WHERE status <> 'deleted' LIMIT 20"),
        ("billing jobs not finalized", "SELECT run_id, status FROM runtime_scheduler.compute_billing_jobs_v2 "
                                       "WHERE status <> 'finalized' LIMIT 20"),
    ]
    lines = []
    for title, sql in parts:
        try:
            lines.append(f"{title}: {query(sql)}")
        except Exception as error:  # noqa: BLE001 - a report of what is left must not hide the failure
            lines.append(f"{title}: unreadable ({error})")
    lines.append("log tail:\n" + stack.log_path.read_text()[-4000:])
    return "\n".join(lines)


def _kill_each_worker_once(stack: Stack, healthz_failures: list) -> int:
    """SIGKILL one worker of each kind at a random moment while runs flow; /healthz is polled throughout."""
    stop = threading.Event()

    def poll_health():
        while not stop.wait(0.2):
            answer = stack.health()
            if answer == "slow":
                # Two cores running 28 sandboxes, the restarting workers, gunicorn and PostgreSQL can queue a request
                # past 2 s: the server is up if it answers at all. Refused, or a 503, is a failure.
                answer = stack.health(timeout=15)
            if answer != "ok":
                healthz_failures.append((time.monotonic(), answer))

    poller = threading.Thread(target=poll_health)
    poller.start()
    try:
        for command in random.sample(WORKERS, len(WORKERS)):
            time.sleep(random.uniform(0.1, 0.8))
            stack.worker(command).kill()
    finally:
        stop.set()
        poller.join()
    return len(WORKERS)


def _check_the_promises(stack: Stack, run_ids: list[str]) -> dict:
    query = stack.server.query
    statuses = dict(query("SELECT run_id, status FROM runtime_scheduler.runs"))
    assert sorted(statuses) == sorted(run_ids) and set(statuses.values()) == {"completed"}, statuses
    verdicts = query("SELECT run_id, count(*) FROM runtime_scheduler.outbox WHERE event_type IN "
                     "('run.completed', 'run.failed', 'run.cancelled') GROUP BY run_id")
    assert sorted(verdicts) == sorted((run_id, 1) for run_id in run_ids)  # one verdict per run
    assert query("SELECT count(*) FROM runtime_scheduler.attempts WHERE status NOT IN ('completed', 'failed') "
                 "OR runner_result_json IS NULL")[0][0] == 0  # every attempt ended with a recorded result
    facts = {row[0] for row in query("SELECT event_id FROM runtime_scheduler.outbox")}
    received = {row[0] for row in query("SELECT event_id FROM runtime_scheduler.run_ledger_events")}
    assert facts == received  # every fact reached the run ledger (stored once per event id)
    disorder = query("""
        SELECT count(*) FROM (
            SELECT ledger.received_at < lag(ledger.received_at) OVER (PARTITION BY fact.run_id ORDER BY fact.created_at) AS late
            FROM runtime_scheduler.outbox AS fact
            JOIN runtime_scheduler.run_ledger_events AS ledger ON ledger.event_id = fact.event_id
        ) AS ordered WHERE late""")[0][0]
    assert disorder == 0  # per-run causal order
    resources = [row[0] for row in query("SELECT resource ->> 'sandboxId' FROM runtime_scheduler.runs, "
                                         "jsonb_array_elements(runtime_resources_json) AS resource")]
    deleted = {row[0] for row in query("SELECT sandbox_id FROM runtime_scheduler.sandbox_cleanup_jobs_v2 "
                                       "WHERE status = 'deleted'")}
    billed = [row[0] for row in query("SELECT sandbox_id FROM runtime_scheduler.billing_items")]
    assert set(resources) <= deleted  # every sandbox a run used was deleted (and confirmed)
    assert sorted(billed) == sorted(resources)  # each billed exactly once
    # A sandbox started for an attempt that never parked has no billing resource, but still an obligation;
    # none is left running.
    assert LocalProvider(stack.sandboxes).live_sandboxes() == []
    return {"runs": len(run_ids), "facts": len(facts), "sandboxes deleted": len(deleted), "billing_items": len(billed),
            "attempts": query("SELECT count(*) FROM runtime_scheduler.attempts")[0][0]}


def test_chaos__restart_crash_backend_storms_and_killed_workers__nothing_lost(stack):
    run_ids = stack.launch(12)
    wait_for(lambda: stack.count("SELECT count(*) FROM runtime_scheduler.runs WHERE status = 'waiting'") >= 2,
             "runners parked", seconds=60)
    stack.server.restart("fast")
    run_ids += stack.launch(8)
    stack.server.restart("immediate")
    terminated = 0
    for _ in range(3):
        time.sleep(0.5)
        terminated += stack.server.terminate_backends("run-scheduler")
    run_ids += stack.launch(8)
    healthz_failures: list = []
    kills = _kill_each_worker_once(stack, healthz_failures)
    try:
        wait_for(lambda: _settled_everywhere(stack, len(run_ids)), "every run settled, delivered, cleaned and billed",
                 seconds=180)
    except AssertionError as never:
        raise AssertionError(f"{never}\n{_what_is_left(stack)}") from None
    figures = _check_the_promises(stack, run_ids)
    # The runs can all be settled before the supervisor has noticed the last worker killed: wait until it logged
    # every kill, then count (a fault that ended another worker would log one exit more).
    wait_for(lambda: stack.restarts() >= kills, "the supervisor noticing every killed worker", seconds=30)
    restarts = stack.restarts()
    print(f"chaos: {figures} server restarts=1 crashes=1 backends terminated={terminated} "
          f"workers killed={kills} worker restarts={restarts} healthz failures while workers restarted={len(healthz_failures)}")
    assert stack.process.poll() is None
    assert restarts == kills, stack.log_path.read_text()[-3000:]  # only the killed workers restarted: no fault ended one
    assert healthz_failures == []  # the web server answered while the workers restarted
