"""The newcomer's demo: one run through a local sandbox, its progress printed as it happens."""

from __future__ import annotations

import json

from scheduler import db
from scheduler.kinds import TERMINAL_RUN_STATUSES, Provider
from scheduler.runs import lifecycle

TERMINAL = tuple(status.value for status in TERMINAL_RUN_STATUSES)


class DemoRun:
    def __init__(self, write):
        self.write = write
        self.run_id: str | None = None
        self.last: str | None = None

    def launch(self) -> None:
        request = lifecycle.LaunchRequest(
            play_name="hello", org_id="demo", input={"name": "newcomer"},
            launch={"play": {"callable": "scheduler.plays:hello"}, "sandboxProvider": Provider.LOCAL.value},
        )
        self.run_id = lifecycle.launch_run(request)
        self.write(f"demo run {self.run_id}: launched (play scheduler.plays:hello in a local sandbox)")

    def poll(self) -> None:
        if self.run_id is None or self.last == "delivered":
            return
        if self.last in TERMINAL:
            row = db.fetch_one("run_ledger_count_events", {"run_id": self.run_id})
            if row["undelivered"] == 0:
                self.last = "delivered"
                self.write(f"demo run {self.run_id}: {row['received']} facts delivered to the built-in run ledger")
            return
        status = lifecycle.run_status(self.run_id).status
        if status == self.last:
            return
        self.last = status
        detail = ""
        if status in TERMINAL:
            row = db.fetch_one("runs_read_terminal_result", {"run_id": self.run_id})
            outcome = row['terminal_result_json'] or {}
            detail = ': ' + json.dumps(outcome.get('output') or outcome.get('error'))
        self.write(f"demo run {self.run_id}: {status}{detail}")
