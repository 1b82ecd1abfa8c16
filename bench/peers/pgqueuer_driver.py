"""pgqueuer, through its public API: N jobs pre-enqueued (not timed), then W
queue managers (one connection each) dequeuing one job at a time (batch_size=1)
and marking it done, in drain mode.
Usage: pgqueuer_driver.py DATABASE_URL N W  -> prints {"jobs_per_second": ..., "python_ms": ..., "rest_ms": ...}
"""

import asyncio
import json
import sys
import time
from pathlib import Path

import asyncpg
from pgqueuer import AsyncpgDriver, QueueManager, Queries
from pgqueuer.types import QueueExecutionMode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness import CpuMeter  # noqa: E402  (bench/, beside this folder: the meter our cycle uses)

conninfo, total, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
batch_size = int(sys.argv[4]) if len(sys.argv) > 4 else 1
dsn = conninfo  # a postgresql:// URL (asyncpg reads host= for a socket directory)


async def main():
    setup = await asyncpg.connect(dsn)
    queries = Queries(AsyncpgDriver(setup))
    await queries.install()
    for start in range(0, total, 1000):
        size = min(1000, total - start)
        await queries.enqueue(["noop"] * size, [None] * size, [0] * size)
    done = 0
    managers = []
    for _ in range(workers):
        manager = QueueManager(Queries(AsyncpgDriver(await asyncpg.connect(dsn))))

        @manager.entrypoint("noop")
        async def noop(job):
            nonlocal done
            done += 1

        managers.append(manager)
    meter, started = CpuMeter(), time.perf_counter()
    await asyncio.gather(*(m.run(batch_size=batch_size, mode=QueueExecutionMode.drain) for m in managers))
    elapsed, cpu = time.perf_counter() - started, meter.per_item(total)
    assert done == total, done
    print(json.dumps({"jobs_per_second": total / elapsed, "seconds": elapsed, **cpu}))


asyncio.run(main())
