"""The HTTP server under the project's fakes (Daytona, the run-ledger receiver): a client that vanished mid-request
(a stall test's timeout, a drainer the soak kills) is no error of the fake's, so it prints no traceback, which in
test or bench output would only hide real ones; any other error is still printed."""

from __future__ import annotations

import ssl
import sys
from http.server import ThreadingHTTPServer

GONE_PEER = (ConnectionError, ssl.SSLEOFError)


class QuietHTTPServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], GONE_PEER):
            super().handle_error(request, client_address)
