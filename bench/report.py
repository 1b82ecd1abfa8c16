"""Run every benchmark, keep their tables in bench/results/<date>.json and draw the plots beside it.

Plots (matplotlib, the `bench` extra): the claim->settle cycle against procrastinate and pgqueuer, the ratios
to the pgbench limits, runner-terminal latency percentiles, the soak's completed rate over time, and the
capacity search (`soak --find-max`: offered against completed, with the delivery lag) and its chaos hold.

Run: ./dev bench report [--quick] [--check]   (by hand, never in CI; --quick passes --quick to each bench)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import harness

BENCHES = ("lifecycle", "discovery", "dispatch", "outbox", "cleanup", "receipts", "soak", "cost", "fairness",
           "schedules", "tasks", "retention", "waits", "soak --find-max")
RESULTS = harness.PROJECT_DIR / "bench" / "results"


def run_all(quick: bool) -> tuple[list[dict], dict[str, int]]:
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl", delete=False) as handle:
        path = handle.name
    codes = {}
    for name in BENCHES:
        print(f"== ./dev bench {name}{' --quick' if quick else ''}", flush=True)
        script, *options = name.split()
        command = [sys.executable, str(harness.PROJECT_DIR / "bench" / f"{script}.py"), *options, "--check"]
        if quick:
            command.append("--quick")
        codes[name] = subprocess.run(command, env=dict(os.environ, BENCH_RESULTS=path)).returncode
    with open(path) as handle:
        tables = [json.loads(line) for line in handle if line.strip()]
    os.unlink(path)
    return tables, codes


def _number(text: str) -> float | None:
    try:
        return float(str(text).split()[0])
    except (ValueError, IndexError):
        return None


def _rows(tables: list[dict], bench: str) -> list[list[str]]:
    return next((table["rows"][1:] for table in tables if table["bench"] == bench), [])


def plot(tables: list[dict], stem: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(4, 2, figsize=(13, 16.5))
    lifecycle = _rows(tables, "lifecycle")
    cycle = [(row[0], _number(row[1])) for row in lifecycle if row[0].startswith(("full cycle", "  vs"))]
    if cycle:
        labels = ["this scheduler" if label.startswith("full") else label.strip().split()[1].rstrip(",")
                  for label, _ in cycle]
        axes[0][0].bar(labels, [value or 0 for _, value in cycle], color=["#2b6cb0", "#a0aec0", "#cbd5e0"][:len(cycle)])
    axes[0][0].set_title("claim -> settle cycle, 8 workers (runs or jobs per second)")
    ratios = [(f"{table['bench']}: {row[0].strip()[:38]}", _number(row[3])) for table in tables for row in table["rows"][1:]
              if "pgbench" in row[2] and _number(row[3]) is not None]
    if ratios:
        axes[0][1].barh([label for label, _ in ratios], [value for _, value in ratios], color="#2f855a")
        axes[0][1].axvline(1.0, color="#718096", linestyle="--", linewidth=1)
    axes[0][1].set_title("ratio to pgbench's limit on the same server")
    axes[0][1].tick_params(axis="y", labelsize=7)
    latency = [(row[0], _number(row[1]), _number(row[2].split("p50")[-1])) for row in lifecycle
               if row[0].startswith("POST /internal/runner/terminal")]
    if latency:
        clients = [row[0].split(",")[1].split()[0] for row in latency]
        axes[1][0].plot(clients, [p50 for _, _, p50 in latency], marker="o", label="p50")
        axes[1][0].plot(clients, [p99 for _, p99, _ in latency], marker="o", label="p99")
        axes[1][0].axhline(20, color="#c53030", linestyle="--", linewidth=1, label="p99 target at 16 clients")
        axes[1][0].legend()
    axes[1][0].set_title("POST /internal/runner/terminal latency (ms) by clients")
    soak = next((table["series"] for table in tables if table["bench"] == "soak" and "offered" not in table["series"]), {})
    if soak.get("completed_per_second"):
        seconds = [soak["window_seconds"] * (index + 1) for index in range(len(soak["completed_per_second"]))]
        axes[1][1].plot(seconds, soak["completed_per_second"], marker=".")
        axes[1][1].set_ylim(bottom=0)
    axes[1][1].set_title("soak: completed runs per second over time (s)")
    capacity = next((table["series"] for table in tables if "offered" in table["series"]), {})
    plot_capacity(axes[2], capacity)
    plot_cost_by_load(axes[3], capacity)
    figure.suptitle(f"run scheduler benchmarks, {stem.name}")
    figure.tight_layout()
    path = stem.with_suffix(".png")
    figure.savefig(path, dpi=90)
    return [path]


def plot_capacity(axes, capacity: dict) -> None:
    """The capacity search (offered against completed whole runs, the delivery lag beside) and its chaos hold."""
    if capacity.get("offered"):
        axes[0].plot(capacity["offered"], capacity["completed"], marker="o", label="completed")
        axes[0].plot(capacity["offered"], capacity["offered"], linestyle="--", color="#a0aec0", label="offered")
        axes[0].legend(loc="upper left")
        lag = axes[0].twinx()
        lag.plot(capacity["offered"], capacity["lag_p99_ms"], marker=".", color="#c53030")
        lag.set_ylabel("delivery lag p99 (ms)", color="#c53030")
    axes[0].set_title("capacity: whole runs completed per second by offered rate")
    if capacity.get("chaos_completed_per_second"):
        rates = capacity["chaos_completed_per_second"]
        axes[1].plot([capacity["window_seconds"] * (index + 1) for index in range(len(rates))], rates, marker=".")
        axes[1].set_ylim(bottom=0)
    axes[1].set_title("capacity: 80% of it under chaos, runs/s over time (s)")


def plot_cost_by_load(axes, capacity: dict) -> None:
    """What a whole run costs the database at each offered rate of the capacity search (issue 47: it should fall)."""
    if capacity.get("postgres_cpu_ms"):
        axes[0].plot(capacity["offered"], capacity["postgres_cpu_ms"], marker="o", label="PostgreSQL CPU (ms)")
        axes[0].plot(capacity["offered"], capacity["statement_ms"], marker="o", label="statement time (ms)")
        axes[0].legend()
        axes[0].set_ylim(bottom=0)
        axes[1].plot(capacity["offered"], capacity["commits"], marker="o", label="commits")
        axes[1].plot(capacity["offered"], capacity["wal_kb"], marker="o", label="WAL (KB)")
        axes[1].legend()
        axes[1].set_ylim(bottom=0)
    axes[0].set_title("capacity: database time per whole run by offered rate")
    axes[1].set_title("capacity: commits and WAL per whole run by offered rate")


def main():
    parser = harness.arguments("each benchmark's --quick sizes")
    args = parser.parse_args()
    tables, codes = run_all(args.quick)
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / dt.date.today().isoformat()
    stem.with_suffix(".json").write_text(json.dumps({"quick": args.quick, "exit_codes": codes, "tables": tables},
                                                    indent=1) + "\n")
    for path in plot(tables, stem):
        print(f"wrote {path.relative_to(harness.PROJECT_DIR)}")
    print(f"wrote {stem.with_suffix('.json').relative_to(harness.PROJECT_DIR)}")
    missed = [f"{table['bench']}: {line}" for table in tables for line in table["missed"]]
    for line in missed:
        print(f"  MISSED {line}")
    if args.check and (missed or any(codes.values())):
        sys.exit(1)


if __name__ == "__main__":
    main()
