"""Runner endpoints: heartbeat and terminal, each with a token scoped to its lease."""

from django.http import JsonResponse

from scheduler import lifecycle, settler, terminal, validation
from scheduler.api.auth import require_runner
from scheduler.api.http import api_view, json_body


def _runner_identity(request, body):
    run_id = validation.text(validation.field(body, "runId"), "runId")
    attempt = validation.integer(validation.field(body, "attempt"), "attempt", minimum=1)
    lease_token = validation.text(validation.field(body, "leaseToken"), "leaseToken")
    require_runner(request, run_id, attempt, lease_token)
    return run_id, attempt, lease_token


@api_view("POST")
def heartbeat(request):
    body = json_body(request)
    run_id, attempt, lease_token = _runner_identity(request, body)
    return JsonResponse(lifecycle.heartbeat(run_id, attempt, lease_token))


@api_view("POST")
def runner_terminal(request):
    body = json_body(request)
    run_id, attempt, lease_token = _runner_identity(request, body)
    result = terminal.validate_result(validation.field(body, "result"))
    progress = terminal.validate_progress_events(body.get("terminalProgressEvents"))
    log_payload = body.get("logPayload")
    outcome = terminal.ingest_runner_terminal(run_id, attempt, lease_token, result, progress, log_payload,
                                             settle=settler.settle)
    return JsonResponse(outcome)
