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
