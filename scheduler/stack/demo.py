"""The newcomer's demo: a run through a local sandbox, a durable play whose retry skips its finished steps, and a play
that waits for an approval with its sandbox released, which the demo then sends."""

from __future__ import annotations

import json

from scheduler import db
from scheduler.kinds import TERMINAL_RUN_STATUSES, Provider
from scheduler.plays import ORDER_STEPS
from scheduler.runs import lifecycle, receipts
from scheduler.waits import wakeups

TERMINAL = tuple(status.value for status in TERMINAL_RUN_STATUSES)


class DemoRun:
    """One run: launched, then its status changes printed until its facts are delivered."""

    def __init__(self, write, label: str, play: str, play_input: dict, **launch):
        self.write, self.label, self.play, self.play_input, self.launch_extra = write, label, play, play_input, launch
        self.run_id: str | None = None
        self.last: str | None = None

    def launch(self) -> None:
        request = lifecycle.LaunchRequest(
            play_name=self.play.rpartition(":")[2], org_id="demo", input=self.play_input,
            launch={"play": {"callable": self.play}, "sandboxProvider": Provider.LOCAL.value, **self.launch_extra},
        )
        self.run_id = lifecycle.launch_run(request).run_id
        self.say(f"launched (play {self.play} in a local sandbox)")

    def say(self, text: str) -> None:
        self.write(f"{self.label} {self.run_id}: {text}")

    def poll(self) -> None:
        if self.run_id is None or self.last == "delivered":
            return
        if self.last in TERMINAL:
            row = db.fetch_one("run_ledger_count_events", {"run_id": self.run_id})
            if row["undelivered"] == 0:
                self.last = "delivered"
                self.say(f"{row['received']} facts delivered to the built-in run ledger")
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
        self.say(f"{status}{detail}")


class DurableDemoRun(DemoRun):
    """The durable play: attempt 1 kills its own runner after step 2; attempt 2 runs steps 3 and 4 only."""

    def __init__(self, write):
        super().__init__(write, "durable demo run", "scheduler.plays:durable_order",
                         {"order": "A-1", "interruptAfter": 2, "interrupt": "kill-runner"}, heartbeatTimeoutMs=2000)
        self.seen: dict[str, tuple] = {}

    def poll(self) -> None:
        super().poll()
        if self.run_id is None or self.last == "delivered":
            return
        for row in receipts.receipts_of(self.run_id):
            state = (row["status"], row["run_attempt"])
            if self.seen.get(row["key"]) == state or row["status"] != "completed":
                continue
            self.seen[row["key"]] = state
            self.say(f"step {row['key']} completed in attempt {row['run_attempt']}")
        if self.last == "completed" and len(self.seen) == len(ORDER_STEPS) and "summary" not in self.seen:
            self.seen["summary"] = ()
            skipped = [key for key in ORDER_STEPS if self.seen.get(key, (None, None))[1] == 1]
            self.say(f"the retry skipped {', '.join(skipped)} (finished before its runner was killed) "
                     "and ran only the rest")


class WaitingDemoRun(DemoRun):
    """WAIT-1..5: the approval play waits for the event `approved` with its sandbox released; the demo sends it (as
    `send_event` would) and the run resumes in a new sandbox, its first two steps answered from their receipts."""

    def __init__(self, write):
        super().__init__(write, "waiting demo run", "scheduler.plays:approval_order", {"order": "A-2"})
        self.sent = self.summarized = False

    def poll(self) -> None:
        super().poll()
        if self.run_id is None or self.summarized:
            return
        if self.sent:
            if self.last in ("completed", "delivered"):
                self.summarized = True
                by_attempt = {row["key"]: row["run_attempt"] for row in receipts.receipts_of(self.run_id)}
                first = [key for key in ORDER_STEPS if by_attempt.get(key) == 1]
                self.say(f"the resumed attempt answered {', '.join(first)} from their receipts and ran only the rest")
            return
        if self.last != "waiting":  # parked on its runner, or waiting durably: only then can it wait for the event
            return
        wait = lifecycle.run_status(self.run_id).wait
        if wait is None:
            return
        self.say(f"waiting for the event {wait['event']} with its sandbox released (suspended, not billed)")
        sent = wakeups.send(wakeups.Event(self.run_id, "approved", {"by": "the demo"}, f"demo-{self.run_id}"))
        self.sent = True
        self.say(f"sent the event approved (send_event {self.run_id} approved): "
                 f"{'resumed in a new sandbox' if sent.resumed else 'kept for its wait'}")


class Demo:
    """Every demo run, launched together and polled on the supervisor's tick."""

    def __init__(self, write):
        self.runs = [DemoRun(write, "demo run", "scheduler.plays:hello", {"name": "newcomer"}), DurableDemoRun(write),
                     WaitingDemoRun(write)]

    def launch(self) -> None:
        for run in self.runs:
            run.launch()

    def poll(self) -> None:
        for run in self.runs:
            run.poll()
