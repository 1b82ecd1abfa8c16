"""Runner endpoints: heartbeat and terminal, each with a token scoped to its lease."""

from django.http import JsonResponse

from scheduler.api import parsing, responses
from scheduler.api.auth import require_runner
from scheduler.api.http import api_view, json_body
from scheduler.errors import NotFound
from scheduler.providers import checking
from scheduler.kinds import ResultStatus
from scheduler.runs import beats, settlement, settler
from scheduler.waits import suspension


def authorized(request) -> tuple[dict, tuple[str, int, str]]:
    """The body and its (run, attempt, lease), once the runner token is checked against exactly those."""
    body = json_body(request)
    identity = parsing.runner_identity(body)
    require_runner(request, *identity)
    return body, identity


@api_view("POST")
def heartbeat(request):
    _, (run_id, attempt, lease_token) = authorized(request)
    if checking.is_check(run_id):  # PRV-7: check_provider's runner, which has no run of its own
        current = checking.record(run_id, "heartbeat", {"attempt": attempt})
        return JsonResponse(responses.heartbeat(beats.Heartbeat(current, False, None)))
    return JsonResponse(responses.heartbeat(beats.beat(run_id, attempt, lease_token)))


@api_view("POST")
def runner_terminal(request):
    item = parsing.runner_terminal(*authorized(request))
    if checking.is_check(item.run_id):
        result = item.result or {}
        if not checking.record(item.run_id, "terminal", {key: result.get(key) for key in ("status", "output", "error")}):
            raise NotFound(f"check {item.run_id} is over")
        return JsonResponse(responses.terminal(settlement.TerminalAnswer(True, True, result.get("status"))))
    if item.result["status"] == ResultStatus.SUSPENDED:  # WAIT-2: its own statement, never the group settler
        return JsonResponse(responses.terminal(suspension.suspend(item, item.result["wait"]["key"])))
    return JsonResponse(responses.terminal(settlement.ingest_runner_terminal(item, settle=settler.settle)))
