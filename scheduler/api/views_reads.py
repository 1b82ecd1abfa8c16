"""Read-only control endpoints (internal bearer token): runner liveness, a terminal run's array-input intent,
recorded terminals over several release lanes."""

from django.http import JsonResponse

from scheduler import validation
from scheduler.api import responses
from scheduler.api.auth import require_internal_token
from scheduler.api.http import api_view, path_attempt
from scheduler.errors import InvalidInput, NotFound
from scheduler.runs import reads


@api_view("GET")
def runner_liveness(request, run_id, attempt):
    require_internal_token(request)
    answer = reads.runner_liveness(run_id, path_attempt(attempt))
    if answer is None:
        raise NotFound(f"attempt {attempt} of run {run_id} not found")
    return JsonResponse(responses.liveness(answer))


@api_view("GET")
def terminal_array_input_intent(request, run_id):
    require_internal_token(request)
    org_id = validation.text(request.GET.get("orgId"), "orgId")
    intent = reads.terminal_array_input_intent(run_id, org_id)
    return JsonResponse({"runId": run_id, "playName": intent.play_name, "started": intent.started})


@api_view("GET")
def recorded_terminals(request):
    """?release=A&release=B&unreleased=true&limit=N: per lane, at most N."""
    require_internal_token(request)
    releases = [validation.text(value, "release") for value in request.GET.getlist("release")]
    unreleased = request.GET.get("unreleased", "false")
    if unreleased not in ("true", "false"):
        raise InvalidInput("unreleased must be true or false", field="unreleased")
    limit = request.GET.get("limit", "100")
    if not limit.isdigit() or len(limit) > 6:
        raise InvalidInput(f"limit must be between 1 and {reads.MAX_LANE_LIMIT}", field="limit")
    rows = reads.recorded_terminals_by_lane(releases, include_unreleased=unreleased == "true", lane_limit=int(limit))
    return JsonResponse({"terminals": [responses.recorded_terminal(row) for row in rows]})
