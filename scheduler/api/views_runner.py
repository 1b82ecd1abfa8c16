"""Runner endpoints: heartbeat and terminal, each with a token scoped to its lease."""

from django.http import JsonResponse

from scheduler.api import parsing, responses
from scheduler.api.auth import require_runner
from scheduler.api.http import api_view, json_body
from scheduler.runs import lifecycle, settlement, settler


def _authorized_body(request) -> dict:
    body = json_body(request)
    require_runner(request, *parsing.runner_identity(body))
    return body


@api_view("POST")
def heartbeat(request):
    run_id, attempt, lease_token = parsing.runner_identity(_authorized_body(request))
    return JsonResponse(responses.heartbeat(lifecycle.heartbeat(run_id, attempt, lease_token)))


@api_view("POST")
def runner_terminal(request):
    item = parsing.runner_terminal(_authorized_body(request))
    return JsonResponse(responses.terminal(settlement.ingest_runner_terminal(item, settle=settler.settle)))
