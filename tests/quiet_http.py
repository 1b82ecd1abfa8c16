"""The HTTP server under the project's fakes (Daytona, the run-ledger receiver): a client that vanished mid-request
(a stall test's timeout, a drainer the soak kills) is no error of the fake's, so it prints no traceback, which in
test or bench output would only hide real ones; any other error is still printed.

Their handler reads a request's header block as scheduler.http_head reads an answer's, without the email package,
and sends each answer in one write: the soak runs the fakes on the same two cores as the workers it measures, so a
fake's CPU a request is capacity the workers lose (issue 47); a real provider's is not on this machine at all.
"""

from __future__ import annotations

import http.client
import ssl
import sys
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from scheduler import http_head

GONE_PEER = (ConnectionError, ssl.SSLEOFError)


class QuietHTTPServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], GONE_PEER):
            super().handle_error(request, client_address)


class QuietHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a client that pools its connections can reuse them
    disable_nagle_algorithm = True  # an answer leaves at once (no 40 ms delayed-ACK stall)

    def log_message(self, *args):
        pass

    def parse_request(self) -> bool:
        """An HTTP/1.x request line and its headers; anything else is refused with 400 (the fakes' clients speak
        HTTP/1.1, and HTTP/0.9 or 2 is no client of theirs)."""
        self.command, self.close_connection = None, True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if len(words) != 3 or not words[2].startswith("HTTP/1."):
            self.request_version = "HTTP/1.0"  # the error goes out with a status line and headers, then closes
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request line {self.requestline!r}")
            return False
        self.command, self.path, self.request_version = words
        try:
            self.headers = http_head.header_message(http_head.read_header_lines(self.rfile))
        except http.client.HTTPException as error:  # a line too long, or too many of them
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, str(error))
            return False
        # http.server's rule: an HTTP/1.1 server keeps an HTTP/1.1 request's connection, or one that asks keep-alive,
        # unless the request says close.
        connection = (self.headers.get("Connection") or "").lower()
        keeps = self.protocol_version >= "HTTP/1.1" and (self.request_version >= "HTTP/1.1" or connection == "keep-alive")
        self.close_connection = connection == "close" or not keeps
        return True

    def answer(self, status: int, data: bytes, headers: dict | None = None) -> None:
        """Status line, headers and body in one write."""
        phrase = self.responses.get(status, ("",))[0]
        lines = [f"{self.protocol_version} {status} {phrase}",
                 f"Date: {self.date_time_string()}", f"Content-Length: {len(data)}"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        if self.close_connection and self.protocol_version >= "HTTP/1.1":
            lines.append("Connection: close")
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data)
