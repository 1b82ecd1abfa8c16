"""Durable waits over HTTP: the play's wait step (runner token) and events sent to runs (internal token)."""

from django.http import JsonResponse

from scheduler.api import responses, wait_parsing
from scheduler.api.auth import require_internal_token
from scheduler.api.http import api_view, json_body
from scheduler.api.views_runner import authorized
from scheduler.runs.receipts import Caller
from scheduler.waits import suspension, wakeups


@api_view("POST")
def begin_wait(request):
    """WAIT-1: {outcome: completed, output} when the wait is satisfied, else {outcome: suspend, wait}."""
    body, identity = authorized(request)
    return JsonResponse(responses.wait_answer(suspension.begin(Caller(*identity), wait_parsing.wait_request(body))))


@api_view("POST")
def run_events(request, run_id):
    """WAIT-3: 201 stored (and maybe resumed), 200 a repeat of a stored event; 404 unknown run, 409 finished run or
    an event id used with another body."""
    require_internal_token(request)
    sent = wakeups.send(wait_parsing.event_request(run_id, json_body(request)))
    return JsonResponse({"eventId": sent.event_id, "stored": sent.stored, "resumed": sent.resumed},
                        status=201 if sent.stored else 200)
