"""Release admission read and set (ADM-3, ADM-4)."""

from django.http import JsonResponse

from scheduler.api import responses
from scheduler.api.auth import require_internal_token
from scheduler.api.http import api_view, json_body
from scheduler.errors import InvalidInput, NotFound
from scheduler.runs import admission


def _environment(value):
    if value in (None, ""):
        return None
    if value not in admission.ENVIRONMENTS:
        raise InvalidInput(f"environment must be one of {', '.join(admission.ENVIRONMENTS)}", field="environment")
    return value


@api_view("GET", "PUT")
def release_admission(request, release_id):
    require_internal_token(request)
    if request.method == "GET":
        environment = _environment(request.GET.get("environment"))
        state = admission.read_admission(release_id, environment)
        if state is None:
            raise NotFound(f'release "{release_id}" is unknown')
        return JsonResponse(responses.admission(release_id, state))
    body = json_body(request)
    if "accepting" not in body or "admissionEpoch" not in body:
        raise InvalidInput("accepting and admissionEpoch are required",
                           field="accepting" if "accepting" not in body else "admissionEpoch")
    state = admission.set_admission(
        release_id, body["accepting"], body["admissionEpoch"], _environment(body.get("environment"))
    )
    return JsonResponse(responses.admission(release_id, state))
