"""Control endpoints for runs (internal bearer token)."""

from django.http import JsonResponse

from scheduler import replica, validation
from scheduler.api import parsing, responses
from scheduler.api.auth import require_internal_token
from scheduler.api.http import api_view, json_body, path_attempt
from scheduler.errors import InvalidInput, NotFound
from scheduler.operations import run_list
from scheduler.runs import launch_body, launches, lifecycle


@api_view("GET", "POST")
def runs(request):
    """POST: launch a run (RUN-1). GET: runs newest first, filtered, a page at a time."""
    require_internal_token(request)
    if request.method == "POST":
        launched = launches.launch(launch_body.launch_request(json_body(request)))
        if launched.deduplicated:  # FSH-5: the first launch's run, whatever its status
            return JsonResponse({"runId": launched.run_id, "deduplicated": True}, status=200)
        return JsonResponse({"runId": launched.run_id}, status=201)
    filters, cursor, limit = parsing.run_list_query(request.GET)
    with replica.replica_reads():  # RET-5: a list may lag; the status read of one run stays on the primary
        rows, next_cursor = run_list.page(filters, cursor=cursor, limit=limit)
    return JsonResponse({"runs": [responses.run_row(row) for row in rows], "nextCursor": next_cursor})


@api_view("GET")
def run_status(request, run_id):
    require_internal_token(request)
    include = {part.strip() for part in request.GET.get("include", "").split(",") if part.strip()}
    if include - {"definitionScope"}:
        raise InvalidInput("include accepts only definitionScope", field="include")
    snapshot = lifecycle.run_status(run_id)
    return JsonResponse(responses.run_snapshot(snapshot, include_definition_scope="definitionScope" in include))


@api_view("POST")
def cancel(request, run_id):
    require_internal_token(request)
    body = json_body(request, optional=True)
    reason = validation.text(body.get("reason", "cancel_requested"), "reason", max_length=200)
    return JsonResponse(responses.cancel(lifecycle.cancel_run(run_id, reason)), status=202)


@api_view("POST")
def array_input_intent(request, run_id):
    require_internal_token(request)
    body = json_body(request)
    org_id = validation.text(validation.field(body, "orgId"), "orgId")
    attempt = validation.integer(validation.field(body, "attempt"), "attempt", minimum=1, maximum=validation.MAX_INT32)
    return JsonResponse({"registered": lifecycle.register_array_input_intent(run_id, org_id, attempt)})


@api_view("GET")
def attempt_standing(request, run_id, attempt):
    require_internal_token(request)
    return standing_of(run_id, path_attempt(attempt))


@api_view("GET")
def run_standing(request, run_id):
    """The executor attempt standing for a token that names no attempt (the seed's null attempt)."""
    require_internal_token(request)
    return standing_of(run_id, None)


def standing_of(run_id: str, attempt: int | None) -> JsonResponse:
    standing = lifecycle.attempt_standing(run_id, attempt)
    if standing is None:
        raise NotFound(f"run {run_id} not found")
    return JsonResponse(responses.standing(standing))
