"""Issue 47's latency check: at 25% of the highest sustained rate, no stage of a whole run may be more than 20%
slower at its p99 than before issue 47. Used by `./dev bench soak --find-max`.

The same run measures both: arms of this tree's workers alternate with arms of the release before issue 47
(BASELINE, unpacked with `git archive` into a temporary directory and run against this tree's schema, as a
rolling deploy would), each at the same offered rate, medians of the repetitions compared. In the baseline's
arms this process launches, heartbeats and settles one statement per call, as before (the group launcher,
heartbeater and settler off). The stages, from the database's own timestamps and the clients' calls:
launch (the API call), queue (launched -> claimed), heartbeat and terminal (the runner's calls), delivery (a
fact written -> acknowledged by the receiver), cleanup (run finished -> sandbox delete confirmed) and billing
(run finished -> billing finalized).
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import capacity
import harness

BASELINE = "78695f6"  # the last commit before issue 47 changed the engine (its first commits were benches)
GROWTH_LIMIT = 1.20
SHARE_OF_MAX = 0.25
SETTLE_S = 60.0

STAGES_SQL = """
WITH chosen AS (
    SELECT run_id, created_at, started_at, finished_at FROM runs
    WHERE created_at >= to_timestamp(%(since)s) AND created_at < to_timestamp(%(until)s)
)
SELECT 'queue', percentile_cont(0.99) WITHIN GROUP (ORDER BY started_at - created_at) FROM chosen
UNION ALL
SELECT 'delivery', percentile_cont(0.99) WITHIN GROUP (ORDER BY fact.delivered_at - fact.created_at)
FROM outbox AS fact JOIN chosen USING (run_id)
UNION ALL
SELECT 'cleanup', percentile_cont(0.99) WITHIN GROUP (ORDER BY job.delete_confirmed_at - chosen.finished_at)
FROM sandbox_cleanup_jobs_v2 AS job JOIN chosen USING (run_id)
UNION ALL
SELECT 'billing', percentile_cont(0.99) WITHIN GROUP (ORDER BY bill.finalized_at - chosen.finished_at)
FROM compute_billing_jobs_v2 AS bill JOIN chosen USING (run_id)
"""

UNFINISHED_SQL = """
SELECT count(*) FROM runs AS run
WHERE run.created_at >= to_timestamp(%(since)s) AND run.created_at < to_timestamp(%(until)s)
  AND NOT EXISTS (SELECT FROM compute_billing_jobs_v2 AS bill WHERE bill.run_id = run.run_id
                  AND bill.status = 'finalized')
"""


def baseline_tree() -> Path:
    """The baseline release's files (not a worktree: nothing is registered in this repository)."""
    sha = subprocess.run(["git", "-C", str(harness.PROJECT_DIR), "rev-parse", BASELINE], check=True,
                         capture_output=True, text=True).stdout.strip()
    tree = Path(tempfile.gettempdir()) / f"scheduler-bench-{sha[:12]}"
    if not (tree / "manage.py").exists():
        tree.mkdir(mode=0o700, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(harness.PROJECT_DIR), "archive", "--format=tar", sha],
                                 check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as unpacked:
            unpacked.extractall(tree, filter="data")
    return tree


def _set_grouping(load, grouped: bool) -> None:
    from django.conf import settings

    from scheduler.runs.batcher import ProcessShared

    ProcessShared.close_all()  # the next call builds its group batcher with the batch size below
    # Batches of one: each launch, heartbeat and terminal a statement of its own on its caller's thread, as before.
    size = 32 if grouped else 1
    settings.SCHEDULER_LAUNCH_BATCH_SIZE = settings.SCHEDULER_HEARTBEAT_BATCH_SIZE = size
    settings.SCHEDULER_SETTLE_BATCH_SIZE = size


def measure_arm(load, env: dict, project_dir: Path, grouped: bool, rate: float, seconds: float) -> dict[str, float]:
    """One arm: a fresh stack from `project_dir`, `rate` offered for a warm-up and `seconds`; each stage's p99 (ms)
    over the runs launched in the window, once every one of them was billed (or SETTLE_S passed)."""
    from django.db import connection

    _set_grouping(load, grouped)
    stack = capacity.Stack(env, project_dir)
    try:
        time.sleep(3)  # the workers start and LISTEN
        load.offer(rate)
        time.sleep(5)
        since = time.time()
        time.sleep(seconds)
        until = time.time()
        load.offer(0.0)
        window = {"since": since, "until": until}
        deadline = time.monotonic() + SETTLE_S
        while True:
            with connection.cursor() as cursor:
                cursor.execute(UNFINISHED_SQL, window)
                if cursor.fetchone()[0] == 0 or time.monotonic() > deadline:
                    break
            time.sleep(0.5)
        with connection.cursor() as cursor:
            cursor.execute(STAGES_SQL, window)
            stages = {stage: (p99.total_seconds() * 1000 if p99 is not None else float("nan"))
                      for stage, p99 in cursor.fetchall()}
    finally:
        stack.stop()
        _set_grouping(load, True)
    for kind in ("launch", "heartbeat", "terminal"):
        took = sorted(seconds for what, at, seconds in load.calls if what == kind and since <= at < until)
        stages[kind] = took[min(len(took) - 1, int(0.99 * len(took)))] * 1000 if took else float("nan")
    return stages


def compare(load, env: dict, highest: float, seconds: float, repetitions: int) -> tuple[float, dict, dict]:
    """Both arms, interleaved `repetitions` times at 25% of `highest`; the medians per stage of each."""
    rate = SHARE_OF_MAX * highest
    tree = baseline_tree()
    arms: dict[str, list[dict]] = {"now": [], "before": []}
    for repetition in range(repetitions):
        for arm, project_dir, grouped in (("now", harness.PROJECT_DIR, True), ("before", tree, False)):
            stages = measure_arm(load, env, project_dir, grouped, rate, seconds)
            arms[arm].append(stages)
            print(f"  stages at {rate:.1f}/s, {arm} (repetition {repetition + 1}): "
                  + ", ".join(f"{stage} {ms:.0f}" for stage, ms in stages.items()) + " ms p99", flush=True)
    medians = {arm: {stage: harness.median([stages[stage] for stages in runs]) for stage in runs[0]}
               for arm, runs in arms.items()}
    return rate, medians["now"], medians["before"]


def rows(rate: float, now: dict, before: dict) -> list[tuple]:
    """The report's rows: each stage's p99 now against before, at most 1.20x."""
    table = []
    for stage, ms in now.items():
        reference = before.get(stage, float("nan"))
        ratio = ms / reference if reference and reference == reference else float("nan")
        table.append((f"  p99 of stage {stage} at {rate:.1f}/s (25% of the highest; ms)", f"{ms:.1f}",
                      f"before issue 47 ({BASELINE}): {reference:.1f}", f"{ratio:.2f}", f"<= {GROWTH_LIMIT:.2f}"))
    return table


def environment(bench_url: str, fake_url: str) -> dict:
    return dict(os.environ, DATABASE_URL=bench_url, **capacity.worker_env(fake_url))
