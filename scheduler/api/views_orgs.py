"""Org limits read and set (FSH-10): GET|PUT /internal/orgs/{org_id}/limits."""

from django.http import JsonResponse

from scheduler.api import parsing, responses
from scheduler.api.auth import require_internal_token
from scheduler.api.http import api_view, json_body
from scheduler.fairshare import limits

API_ACTOR = "api:internal-token"


@api_view("GET", "PUT")
def org_limits(request, org_id):
    require_internal_token(request)
    if request.method == "PUT":
        limits.change(org_id, parsing.limits_change(json_body(request)), actor=API_ACTOR)
    return JsonResponse(responses.org_limits(limits.read(org_id)))
