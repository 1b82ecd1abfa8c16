"""procrastinate, through its public API: N jobs pre-enqueued (not timed), then
one worker with concurrency W fetching one job at a time and marking it done.
Usage: procrastinate_driver.py DATABASE_URL N W  -> prints {"jobs_per_second": ..., "python_ms": ..., "rest_ms": ...}
"""

import asyncio
import json
import sys
import time
from pathlib import Path

import procrastinate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness import CpuMeter  # noqa: E402  (bench/, beside this folder: the meter our cycle uses)

conninfo, total, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo, kwargs={"autocommit": True}))


@app.task(name="noop", queue="bench")
async def noop():
    return None


async def main():
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        for start in range(0, total, 1000):
            await noop.batch_defer_async(*({} for _ in range(min(1000, total - start))))
        meter, started = CpuMeter(), time.perf_counter()
        await app.run_worker_async(queues=["bench"], concurrency=workers, wait=False, listen_notify=False,
                                   delete_jobs="never")
        elapsed, cpu = time.perf_counter() - started, meter.per_item(total)
        async with app.connector.pool.connection() as conn:
            done = await (await conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'")).fetchone()
        assert done[0] == total, done
        print(json.dumps({"jobs_per_second": total / elapsed, "seconds": elapsed, **cpu}))


asyncio.run(main())
