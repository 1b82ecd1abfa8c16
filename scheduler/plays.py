"""The demo plays `./dev up` launches (`{"callable": "scheduler.plays:NAME"}`); the tests' own live in tests/plays.py."""

import time


def hello(play_input):
    """Greets whoever the input names."""
    name = (play_input or {}).get("name", "world") if isinstance(play_input, dict) else "world"
    return {"greeting": f"hello, {name}"}


ORDER_STEPS = ("reserve-stock", "charge-card", "send-receipt", "ship-parcel")


def _order_effect(name: str, play_input: dict) -> dict:
    """One step's side effect: said in the runner's log, and appended to input.effectsFile when given."""
    import os

    attempt = int(os.environ.get("SCHEDULER_ATTEMPT", "0"))
    print(f"step {name}: running in attempt {attempt}", flush=True)
    if play_input.get("effectsFile"):
        with open(play_input["effectsFile"], "a") as effects:
            effects.write(f"{os.environ.get('SCHEDULER_RUN_ID')} {name} {attempt}\n")
    return {"step": name, "order": play_input.get("order", "A-1"), "done": True}


def durable_order(play_input):
    """Four durable steps (scheduler.sandbox.steps): a retried attempt runs only the steps no attempt finished.

    input.interruptAfter (a step number) with input.interrupt "hang" or "kill-runner" stops attempt 1 there:
    "hang" waits to be killed, "kill-runner" kills the runner's process group, so the sweep judges it lost.
    """
    import os
    import signal

    from scheduler.sandbox.steps import step

    play_input = play_input if isinstance(play_input, dict) else {}
    first_attempt = os.environ.get("SCHEDULER_ATTEMPT") == "1"
    results = {}
    for number, name in enumerate(ORDER_STEPS, 1):
        results[name] = step(name, _order_effect, name, play_input)
        if first_attempt and play_input.get("interruptAfter") == number:
            if play_input.get("interrupt") == "kill-runner":
                os.killpg(os.getpgid(0), signal.SIGKILL)
            time.sleep(600)
    return {"order": play_input.get("order", "A-1"), "steps": results}


def approval_order(play_input):
    """The order of durable_order, held for an approval between charging and sending the receipt (WAIT-1).

    Steps 1-2 run, then the play waits durably for the event `approved` (input.timeout seconds, default no limit):
    its sandbox is released and the run resumes in a new one when the event is sent (send_event RUN_ID approved
    --payload '{"by": "ann"}'), replaying steps 1-2 from their receipts. The event's payload is in the output; a
    timeout ends the order unshipped. input.interrupt "kill-runner" kills attempt 1's runner after the wait was
    recorded and before its suspension is posted, so the sweep judges it lost and the retry suspends again.
    """
    import os
    import signal

    from scheduler.sandbox.steps import TIMED_OUT, Suspended, step, wait_for_event

    play_input = play_input if isinstance(play_input, dict) else {}
    results = {name: step(name, _order_effect, name, play_input) for name in ORDER_STEPS[:2]}
    try:
        approval = wait_for_event("approval", "approved", timeout=play_input.get("timeout"))
    except Suspended:
        if play_input.get("interrupt") == "kill-runner" and os.environ.get("SCHEDULER_ATTEMPT") == "1":
            os.killpg(os.getpgid(0), signal.SIGKILL)
        raise
    if approval is TIMED_OUT:
        return {"order": play_input.get("order", "A-1"), "approval": "timed out", "steps": results}
    results.update({name: step(name, _order_effect, name, play_input) for name in ORDER_STEPS[2:]})
    return {"order": play_input.get("order", "A-1"), "approval": approval, "steps": results}
