"""SCD-2 with real processes: two `run_schedules` loops share 200-odd due slots, one is SIGKILLed mid-run and
replaced, and every slot is recorded exactly once, with exactly one run per launched slot and none besides."""

import datetime as dt
import signal
import subprocess

import pytest

from scheduler.periodic import definitions
from tests.factories import one, query
from tests.support import PROJECT_DIR, current_database_url, manage_command, manage_env, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def loop() -> subprocess.Popen:
    return subprocess.Popen(manage_command("run_schedules", "--limit", "3", "--interval", "0.2"),
                            env=manage_env(current_database_url()), cwd=PROJECT_DIR,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_two_loops_and_a_sigkill__every_slot_once():
    start = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0) - dt.timedelta(minutes=100)
    for name in ("a", "b"):
        row = definitions.create(definitions.ScheduleSpec("org-s", name, "* * * * *", "UTC",
                                                          {"playName": "tests.plays:fail"}, catch_up="all"))
        query("UPDATE schedules SET next_fire_at = %s WHERE schedule_id = %s", [start, row["schedule_id"]])
    first, second = loop(), loop()
    try:
        wait_for(lambda: one("SELECT count(*) FROM schedule_fires") >= 40, "the loops firing", seconds=120)
        first.send_signal(signal.SIGKILL)
        first.wait()
        first = loop()
        wait_for(lambda: one("SELECT count(*) FROM schedules WHERE next_fire_at > now()") == 2,
                 "every due slot fired", seconds=180)
    finally:
        for process in (first, second):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
    for schedule_id, next_fire_at in query("SELECT schedule_id, next_fire_at FROM schedules"):
        minutes = int((next_fire_at - start).total_seconds() // 60)
        slots = [row[0] for row in query("SELECT slot_at FROM schedule_fires WHERE schedule_id = %s ORDER BY slot_at",
                                         [schedule_id])]
        assert slots == [start + dt.timedelta(minutes=index) for index in range(minutes)]  # no gap, none twice
    launched = one("SELECT count(*) FROM schedule_fires WHERE outcome = 'launched'")
    assert one("SELECT count(*) FROM schedule_fires") >= 200 and launched >= 150
    assert one("SELECT count(*) FROM runs") == launched  # no run without its fire (a killed fire rolled back whole)
    assert one("SELECT count(DISTINCT run_id) FROM schedule_fires WHERE outcome = 'launched'") == launched
