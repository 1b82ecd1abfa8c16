"""Durable waits (issue 45, WAIT-4..6): what 100,000 runs waiting with their sandboxes released cost the loops that
run beside them, how fast 10,000 timers due in one minute are resumed, and how long an event takes to reach the
resumed play, beside how long a launch takes to reach it (the same path: a claim, a sandbox, a runner, the play).
Run: ./dev bench waits [--quick] [--check]
"""

from __future__ import annotations

import datetime as dt
import json
import signal
import statistics
import time
import urllib.request

import harness
import lifecycle as lifecycle_bench
import tasks as tasks_bench
import terminal_latency

# The reference database: as many runs, finished instead of waiting, so a comparison shows what waiting costs and not
# what a larger table costs (every index probe of a 100,000-run table is a level deeper than an empty one's).
HISTORY_DB = "scheduler_bench_history"
CLAIM = 32
ORG = "org-w"
TIMER_LOOPS = 2


def seed_waiting(count: int, prefix: str, kind: str, deadline: dt.datetime | None) -> None:
    """`count` runs of ORG waiting durably (as attempts_suspend leaves them), each with its suspended attempt."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json, suspension_json, wait_deadline,
                              updated_at)
            SELECT %(prefix)s || i, %(org)s, 'scheduler.plays:approval_order', 'waiting', '{}',
                   jsonb_build_object('kind', %(kind)s::text, 'key', 'approval', 'event', 'approved', 'attempt', 1,
                                      'until', %(deadline)s::timestamptz),
                   %(deadline)s::timestamptz, now()
            FROM generate_series(1, %(count)s) AS i;
            INSERT INTO attempts (run_id, attempt, status, runner_result_json, finished_at)
            SELECT %(prefix)s || i, 1, 'suspended', '{"status": "suspended", "wait": {"key": "approval"}}', now()
            FROM generate_series(1, %(count)s) AS i;
            """, {"prefix": prefix, "org": ORG, "kind": kind, "deadline": deadline, "count": count})


def seed_finished(count: int) -> None:
    """`count` runs of ORG finished long ago, each with its attempt: the reference database's history."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json, finished_at)
            SELECT 'done-' || i, %(org)s, 'scheduler.plays:approval_order', 'completed', '{}', now()
            FROM generate_series(1, %(count)s) AS i;
            INSERT INTO attempts (run_id, attempt, status, runner_result_json, finished_at)
            SELECT 'done-' || i, 1, 'completed', '{"status": "completed"}', now()
            FROM generate_series(1, %(count)s) AS i;
            """, {"org": ORG, "count": count})


def use_database(name: str) -> None:
    """Point Django's connection at another database of the same server (closed now, opened on first use)."""
    from django.db import connection

    connection.close()
    connection.settings_dict["NAME"] = name


def tick_ms(tick, repeats: int = 200) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        tick()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def idle_ticks() -> tuple[float, float]:
    """The wait-timer loop's tick with none due, and the liveness sweep's whole tick, beside the waiting runs."""
    from scheduler.runs import liveness
    from scheduler.waits import wakeups

    def timers():
        assert wakeups.wake_due(1000).counts["woken"] == 0

    def sweep():
        assert liveness.run_once().counts["verdicts"] == 0

    return tick_ms(timers), tick_ms(sweep, 100)


def claim_ms(repeats: int) -> float:
    """Median time of one claim of CLAIM runs of ORG (capped, so counted) from a queue of CLAIM runs; each batch is
    launched untimed before and finished after, so every claim sees the same queue."""
    from django.db import connection
    from scheduler.runs import lifecycle

    samples = []
    for _ in range(repeats + 5):
        for _ in range(CLAIM):
            lifecycle.launch_run(lifecycle.LaunchRequest(play_name="scheduler.plays:hello", org_id=ORG))
        started = time.perf_counter()
        claimed = lifecycle.claim_queued_runs(CLAIM)
        samples.append((time.perf_counter() - started) * 1000)
        assert len(claimed) == CLAIM, len(claimed)
        with connection.cursor() as cursor:
            cursor.execute("UPDATE runs SET status = 'completed', finished_at = now() WHERE status = 'running'")
    return statistics.median(samples[5:])


def idle_claim_ms(repeats: int = 200) -> float:
    """Median time of a claim of CLAIM that finds the queue empty (what an idle dispatcher polls)."""
    from scheduler.runs import lifecycle

    def claim():
        assert lifecycle.claim_queued_runs(CLAIM) == []

    return tick_ms(claim, repeats)


def claims_beside_waiting(bench_db: str, repeats: int) -> dict[str, list[float]]:
    """The idle claim and the counted claim in the database holding the waiting runs and in the one holding as
    many finished runs, interleaved, three repetitions each."""
    def measure(database: str, claim):
        def run(_repetition):
            use_database(database)
            return claim()
        return run

    results = harness.interleaved({
        "idle beside": measure(bench_db, idle_claim_ms), "idle history": measure(HISTORY_DB, idle_claim_ms),
        "beside": measure(bench_db, lambda: claim_ms(repeats)), "history": measure(HISTORY_DB, lambda: claim_ms(repeats)),
    })
    use_database(bench_db)
    return results


def timers_due_in_a_minute(count: int) -> tuple[float, float]:
    """`count` timers due at the next whole minute, resumed by TIMER_LOOPS loops from the moment it comes: the last
    resume behind the deadline (s), and resumes per second."""
    from django.db import connection
    from scheduler.waits import wakeups

    due = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
    seed_waiting(count, "due-", "timer", due)
    harness.quiesce(harness_url[0])
    time.sleep(max(0.0, (due - dt.datetime.now(dt.UTC)).total_seconds()))

    def loop(_index):
        while wakeups.wake_due(1000).again:
            pass

    elapsed = lifecycle_bench.run_workers(TIMER_LOOPS, loop)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), extract(epoch FROM max(updated_at) - %s) FROM runs "
                       "WHERE run_id LIKE 'due-%%' AND status = 'queued'", [due])
        resumed, latest = cursor.fetchone()
        cursor.execute("UPDATE runs SET status = 'cancelled', finished_at = now() WHERE run_id LIKE 'due-%%'")
    assert resumed == count, (resumed, count)
    return float(latest), count / elapsed


def _post(port: int, path: str, body: dict) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _poll(query: str, params: list, seconds: float = 60):
    from django.db import connection

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(query, params)
            row = cursor.fetchone()
        if row and row[0] is not None:
            return row[0]
        time.sleep(0.01)
    raise SystemExit(f"never happened: {query} {params}")


def event_to_resumed(bench_url: str, trips: int) -> tuple[list[float], list[float]]:
    """With the API under gunicorn and a dispatcher starting instant local sandboxes: launch -> the play at its wait
    (attempt 1), and event -> the resumed play at its wait (the next attempt, in a new sandbox), one run at a time."""
    import os

    os.environ["SCHEDULER_INTERNAL_TOKEN"] = TOKEN
    port = terminal_latency.free_port()
    processes = tasks_bench._start_stack(bench_url, port)
    launched, resumed = [], []
    try:
        for number in range(trips + 2):
            run_id = _post(port, "/internal/runs", {"playName": "scheduler.plays:approval_order", "orgId": "org-e",
                                                    "input": {"order": f"B-{number}"}})["runId"]
            reached = _poll("SELECT extract(epoch FROM wait.created_at - run.created_at) FROM run_waits AS wait "
                            "JOIN runs AS run USING (run_id) WHERE run_id = %s", [run_id])
            _poll("SELECT 1 FROM runs WHERE run_id = %s AND status = 'waiting' "
                  "AND suspension_json ->> 'kind' = 'event'", [run_id])
            _post(port, f"/internal/runs/{run_id}/events", {"name": "approved", "payload": number})
            answered = _poll("SELECT extract(epoch FROM receipt.created_at - sent.received_at) FROM receipts AS receipt "
                             "JOIN run_events AS sent USING (run_id) WHERE run_id = %s AND receipt.key = 'approval'",
                             [run_id])
            if number >= 2:  # the first two warm the dispatcher, the web workers and the page cache
                launched.append(float(reached))
                resumed.append(float(answered))
        return launched, resumed
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(30)


TOKEN = "bench-waits-token"
harness_url = [""]


def prepare(waiting: int) -> str:
    """The bench database with `waiting` runs waiting durably, the reference database with as many finished; both
    migrated, ORG capped in both (so its claims count what it holds), both quiesced. Answers the bench database."""
    from django.core.management import call_command
    from scheduler.fairshare import limits

    server = harness.server_url()
    history_url = harness.recreate_database(server, HISTORY_DB)
    harness_url[0] = harness.recreate_database(server)
    harness.setup_django(harness_url[0])
    bench_db = harness.libpq_params(harness_url[0])["dbname"]
    use_database(HISTORY_DB)
    call_command("migrate", interactive=False, verbosity=0)
    limits.change(ORG, limits.LimitsChange(max_active=100_000), actor="bench")
    seed_finished(waiting)
    use_database(bench_db)
    limits.change(ORG, limits.LimitsChange(max_active=100_000), actor="bench")
    seed_waiting(waiting // 2, "event-", "event", None)
    seed_waiting(waiting - waiting // 2, "timer-", "timer", dt.datetime.now(dt.UTC) + dt.timedelta(days=30))
    harness.quiesce(harness_url[0])
    harness.quiesce(history_url)
    return bench_db


def compared(claim_times: dict[str, list[float]], name: str) -> tuple[str, str, str]:
    """(value, reference, ratio) of one claim measure beside the waiting runs against the same beside history."""
    beside, history = claim_times[name], claim_times[name.replace("beside", "history")]
    return (f"{statistics.median(beside):.2f} ({harness.spread(beside, 2)})",
            f"beside as many finished runs {statistics.median(history):.2f} ({harness.spread(history, 2)})",
            f"{statistics.median(beside) / statistics.median(history):.2f}")


def main():
    parser = harness.arguments("10,000 waiting runs, 1,000 timers, 20 claims and 6 trips instead of 100,000, "
                               "10,000, 100 and 20")
    args = parser.parse_args()
    waiting, timers, claims, trips = (10_000, 1_000, 20, 6) if args.quick else (100_000, 10_000, 100, 20)
    bench_db = prepare(waiting)
    timer_tick, sweep_tick = idle_ticks()
    use_database(HISTORY_DB)
    _, sweep_history = idle_ticks()
    claim_times = claims_beside_waiting(bench_db, claims)
    latest, rate = timers_due_in_a_minute(timers)
    launched, resumed = event_to_resumed(harness_url[0], trips)
    launch_p50, event_p50 = (harness.percentile(values, 0.5) * 1000 for values in (launched, resumed))
    rows = [("measure", "value", "reference", "ratio", "target"),
            (f"the wait-timer tick beside {waiting:,} waiting runs, none due (ms)", f"{timer_tick:.2f}",
             "one index probe", f"{timer_tick:.2f}", "<= 2"),
            (f"the liveness sweep's idle tick beside {waiting:,} waiting runs (ms)", f"{sweep_tick:.2f}",
             f"beside as many finished runs {sweep_history:.2f} ms", f"{sweep_tick:.2f}", "<= 2"),
            (f"a claim finding the queue empty beside {waiting:,} waiting runs (ms, median of 3)",
             *compared(claim_times, "idle beside"), "<= 1.2"),
            (f"a claim of {CLAIM} of a capped org holding {waiting:,} waiting runs (ms, median of 3)",
             *compared(claim_times, "beside"), "<= 1.2"),
            (f"{timers:,} timers due in one minute, {TIMER_LOOPS} loops: the last resume behind its deadline (s)",
             f"{latest:.1f}", f"{rate:.0f} resumes/s", f"{latest:.1f}", "<= 10"),
            (f"event -> the resumed play at its wait, instant local sandboxes, p50 of {trips} (ms)",
             f"{event_p50:.0f}", f"launch -> the play at its wait p50 {launch_p50:.0f} ms",
             f"{event_p50 / launch_p50:.2f}", "<= 1.5")]
    harness.report(f"waits benchmark ({'quick' if args.quick else 'full'})", rows, args.check)


if __name__ == "__main__":
    main()
