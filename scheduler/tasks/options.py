"""A task backend's OPTIONS: the launch defaults of its tasks, per queue (TSK-1).

    "OPTIONS": {"org": "acme", "provider": "local",
                "queues": {"gpu": {"provider": "modal", "max_attempts": 2,
                                   "concurrency": {"key": "gpu", "limit": 4}}}}

A queue's entry overrides the top level. Each enqueue becomes the body of `POST /internal/runs` and is read by
the same parser (runs/launch_body.py), so a task is refused for exactly what a launch would be.
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings

from scheduler.conf import scheduler_settings
from scheduler.errors import InvalidInput
from scheduler.kinds import Provider
from scheduler.runs import launch_body
from scheduler.runs.lifecycle import LaunchRequest

# Option name -> (where it goes: "body" or "launch", its name there).
OPTION_FIELDS = {
    "org": ("body", "orgId"),
    "max_attempts": ("body", "maxAttempts"),
    "concurrency": ("body", "concurrency"),
    "provider": ("launch", "sandboxProvider"),
    "routing_domain": ("launch", "routingDomain"),
    "heartbeat_timeout_ms": ("launch", "heartbeatTimeoutMs"),
}
OPTION_NAMES = {target: option for option, (_, target) in OPTION_FIELDS.items()}


def queue_options(options: dict, queue_name: str) -> dict[str, Any]:
    """The top-level options with the queue's own entry over them."""
    queues = options.get("queues") or {}
    return {**{key: value for key, value in options.items() if key != "queues"}, **(queues.get(queue_name) or {})}


def launch_body_for(task, arguments: dict, options: dict) -> dict:
    """The launch body of one enqueue: the task as a play, its arguments as the input, the queue's defaults."""
    function = f"{task.func.__module__}:{task.func.__name__}"
    play = {"task": function, "takesContext": task.takes_context, "queueName": task.queue_name,
            "backend": task.backend}
    settings_module = os.environ.get("DJANGO_SETTINGS_MODULE") or getattr(settings, "SETTINGS_MODULE", None)
    if settings_module:
        play["settingsModule"] = settings_module  # TSK-5: the runner sets Django up with it
    body: dict[str, Any] = {"playName": function, "input": arguments, "launch": {"play": play},
                            "priority": task.priority}
    _place(body, queue_options(options, task.queue_name))
    if task.run_after is not None:
        body["runAfter"] = task.run_after.isoformat()
    return body


def _place(body: dict, options: dict) -> None:
    for option, value in options.items():
        if option not in OPTION_FIELDS:
            raise InvalidInput(f"OPTIONS has an unknown key {option!r}", field=option)
        place, name = OPTION_FIELDS[option]
        (body if place == "body" else body["launch"])[name] = value


def parse(body: dict) -> LaunchRequest:
    """The launch request, or InvalidInput naming the option (not the API field) that is wrong."""
    try:
        return launch_body.launch_request(body)
    except InvalidInput as error:
        field = error.field or ""
        for target, option in OPTION_NAMES.items():
            if field.endswith(target) or f"{target}." in field:
                raise InvalidInput(f"{error.message} (OPTIONS {option!r})", field=option) from None
        raise


def problems(options: Any, queues: set[str]) -> list[str]:
    """What is wrong with a backend's OPTIONS, one sentence each (the system check reports them)."""
    if not isinstance(options, dict):
        return ["OPTIONS must be a dict"]
    found = [f"OPTIONS has an unknown key {key!r} (known: {', '.join(sorted([*OPTION_FIELDS, 'queues']))})"
             for key in options if key not in OPTION_FIELDS and key != "queues"]
    named = options.get("queues") or {}
    if not isinstance(named, dict):
        return [*found, "OPTIONS['queues'] must map a queue name to its options"]
    for queue, entry in named.items():
        if queues and queue not in queues:
            found.append(f"OPTIONS['queues'] names {queue!r}, which QUEUES does not list")
        if not isinstance(entry, dict):
            found.append(f"OPTIONS['queues'][{queue!r}] must be a dict")
            continue
        found += [f"OPTIONS['queues'][{queue!r}] has an unknown key {key!r}" for key in entry if key not in OPTION_FIELDS]
    if found:
        return found
    for queue in sorted({"default", *named, *queues}):
        found += _queue_problems(options, queue)
    return found


def _queue_problems(options: dict, queue: str) -> list[str]:
    merged = queue_options(options, queue)
    body = {"playName": "tasks:check", "launch": {}}
    _place(body, merged)
    try:
        parse(body)
    except InvalidInput as error:
        return [f"queue {queue!r}: {error.message}"]
    provider = merged.get("provider") or scheduler_settings.default_provider
    missing = {Provider.DAYTONA: not scheduler_settings.daytona_api_keys and "SCHEDULER_DAYTONA_API_KEYS",
               Provider.MODAL: not scheduler_settings.modal_tokens and "SCHEDULER_MODAL_TOKENS"}.get(provider)
    return [f"queue {queue!r} runs on provider {provider!r}, but {missing} is empty"] if missing else []
