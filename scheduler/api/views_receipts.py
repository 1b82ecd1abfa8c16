"""Runner endpoints for work receipts (RCP-1, RCP-2): one view per call, each single or batch.

The runner token is checked against the body's run, attempt and lease, as on
the heartbeat; a call from an attempt that is no longer current answers 409
`attempt_not_current` and changes nothing.
"""

from typing import Callable

from django.http import JsonResponse

from scheduler.api import parsing, responses
from scheduler.api.http import api_view
from scheduler.api.views_runner import authorized
from scheduler.runs import receipts


def _endpoint(operation: str, call: Callable) -> Callable:
    @api_view("POST")
    def view(request):
        body, identity = authorized(request)
        items, batch, options = parsing.receipt_call(body, operation)
        return JsonResponse(responses.receipts(call(receipts.Caller(*identity), items, **options), batch))

    view.__name__ = view.__qualname__ = f"receipts_{operation.replace('-', '_')}"
    return view


def _keys(function: Callable) -> Callable:
    """Calls that take keys, not items."""
    return lambda caller, items, **options: function(caller, [item.key for item in items], **options)


claim = _endpoint("claim", _keys(receipts.claim))
mark_queued = _endpoint("mark-queued", _keys(receipts.mark_queued))
complete = _endpoint("complete", receipts.complete)
fail = _endpoint("fail", receipts.fail)
release = _endpoint("release", receipts.release)
skip = _endpoint("skip", receipts.skip)
heartbeat = _endpoint("heartbeat", receipts.heartbeat)
