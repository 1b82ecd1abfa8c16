"""RUN-1..3: what a launch's placement keys must be for the dispatcher and the runner to use them, said once.

The API refuses a launch that breaks a rule (a 400 naming the field); the
dispatcher checks the same rules on every claimed launch, so one that got in
anyway (an older release, a hand-written row) is settled `invalid_launch`
instead of ending the dispatcher.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from scheduler import validation
from scheduler.errors import InvalidInput
from scheduler.kinds import Provider, values

MODULE_PATH = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
PLAY_CALLABLE = re.compile(MODULE_PATH + r":[A-Za-z_][A-Za-z0-9_]*")
HEARTBEAT_TIMEOUT_MS = (1_000, 86_400_000)
MAX_COMMAND_PARTS = 64


def _url(value: Any, name: str) -> str:
    text = validation.text(value, name, max_length=2048)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(f"{name} must be an http(s) URL", field=name)
    return text


def play_spec(play: Any, name: str = "launch.play") -> dict:
    """{"callable": "module:function"}, {"command": ["program", "arg", ...]} or a django.tasks task (TSK-1): what
    the runner can start."""
    play = validation.json_object(play, name)
    if set(play) == {"callable"}:
        if not isinstance(play["callable"], str) or not PLAY_CALLABLE.fullmatch(play["callable"]):
            raise InvalidInput(f"{name}.callable must read module:function", field=f"{name}.callable")
        return play
    if set(play) == {"command"}:
        command = play["command"]
        if (not isinstance(command, list) or not 1 <= len(command) <= MAX_COMMAND_PARTS
                or not all(isinstance(part, str) and part for part in command)):
            raise InvalidInput(f"{name}.command must be a list of 1 to {MAX_COMMAND_PARTS} non-empty strings",
                               field=f"{name}.command")
        return play
    if "task" in play:
        return _task_spec(play, name)
    raise InvalidInput(f'{name} must be {{"callable": "module:function"}}, {{"command": [...]}} or {{"task": ...}}',
                       field=name)


TASK_KEYS = {"task", "settingsModule", "takesContext", "queueName", "backend"}
SETTINGS_MODULE = re.compile(MODULE_PATH)


def _task_spec(play: dict, name: str) -> dict:
    """TSK-1, TSK-5: {"task": "module:function", "settingsModule": "pkg.settings", "takesContext": bool, and the
    queue and backend alias it was enqueued on (get_result rebuilds the Task from them)}."""
    unknown = sorted(set(play) - TASK_KEYS)
    if unknown:
        raise InvalidInput(f"{name}.{unknown[0]} is not a task play field", field=f"{name}.{unknown[0]}")
    if not isinstance(play["task"], str) or not PLAY_CALLABLE.fullmatch(play["task"]):
        raise InvalidInput(f"{name}.task must read module:function", field=f"{name}.task")
    settings_module = play.get("settingsModule")
    if settings_module is not None and (not isinstance(settings_module, str)
                                        or not SETTINGS_MODULE.fullmatch(settings_module)):
        raise InvalidInput(f"{name}.settingsModule must be a dotted module path", field=f"{name}.settingsModule")
    if "takesContext" in play:
        validation.boolean(play["takesContext"], f"{name}.takesContext")
    for key in ("queueName", "backend"):
        if key in play:
            validation.text(play[key], f"{name}.{key}", max_length=200)
    return play


def check_placement(launch: dict) -> None:
    """The keys the dispatcher and the runner read (RUN-2, RUN-3): each must be what they can use, or
    InvalidInput naming it."""
    if launch.get("heartbeatTimeoutMs") is not None:
        low, high = HEARTBEAT_TIMEOUT_MS
        validation.integer(launch["heartbeatTimeoutMs"], "launch.heartbeatTimeoutMs", minimum=low, maximum=high)
    if launch.get("sandboxProvider") is not None:
        validation.choice(launch["sandboxProvider"], "launch.sandboxProvider", values(Provider))
    if launch.get("routingDomain") is not None:
        validation.text(launch["routingDomain"], "launch.routingDomain")
    if launch.get("runnerApiUrl") is not None:
        _url(launch["runnerApiUrl"], "launch.runnerApiUrl")
    if launch.get("play") is not None:
        play_spec(launch["play"])


def problem(launch: dict) -> str | None:
    """What in a launch breaks a rule, naming the field; None when the dispatcher can start it."""
    try:
        check_placement(launch)
    except InvalidInput as error:
        return error.message
    return None
