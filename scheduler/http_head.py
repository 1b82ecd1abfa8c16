"""http.client's connections with a cheaper reading of each answer's header block, for outbound.py's calls only.

Why: http.client hands every answer's header lines to the email package's feed parser, a quarter of a call's
client CPU on loopback (about 30 of 125 µs), and the dispatcher, the drainer and the cleanup make several calls a
run. Here the lines are split as that parser splits well-formed ones (compat32: the name up to the first colon,
the value with its leading blanks dropped, a folded line kept with its line break), into the same HTTPMessage,
and the rest of `begin` keeps http.client's rules. Only connections made here use it; http.client itself is
left as it is for the rest of the process (a library must not change it under its host project).
"""

from __future__ import annotations

import http.client
import re

# The standard library's own bounds on an answer's header block.
MAX_LINE = 65536
MAX_HEADERS = 100
# What the email package takes for a header line (a name of printable characters but the colon, then a colon)
# and for a folded continuation of the one before it.
_HEADER_LINE = re.compile(r"[\041-\071\073-\176]*:")
_CONTINUATION = (" ", "\t")
# The email package breaks lines at a lone carriage return too.
_LINE_BREAK = re.compile(r"(?<=\r)(?!\n)")


def read_header_lines(fp) -> list[bytes]:
    """The header block's lines up to the blank one (or the end), within http.client's bounds."""
    lines = []
    while True:
        line = fp.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise http.client.LineTooLong("header line")
        if line in (b"\r\n", b"\n", b""):
            return lines
        lines.append(line)
        if len(lines) >= MAX_HEADERS:
            raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")


def header_message(lines: list[bytes]) -> http.client.HTTPMessage:
    """The lines as http.client.parse_headers would read them: a line that is neither a header nor a folded
    continuation ends the headers, as it ends them there (what follows it is read as a body nobody asks for)."""
    fields: list[list[str]] = []
    folding = None  # the field a continuation line would extend
    for line in _split(lines):
        if line.startswith(_CONTINUATION):
            if folding is not None:
                folding.append(line)
            continue  # a continuation of nothing is dropped, as there
        folding = None
        if line.startswith("From "):
            continue  # the email package's mbox envelope line, never a header
        if not _HEADER_LINE.match(line):
            break
        name, value = line.split(":", 1)
        if name:  # a line without a name is dropped, and what follows it goes on
            folding = [name, value.lstrip(" \t")]
            fields.append(folding)
    message = http.client.HTTPMessage()
    for name, *parts in fields:
        message.set_raw(name, "".join(parts).rstrip("\r\n"))
    return message


def _split(lines: list[bytes]):
    for raw in lines:
        line = raw.decode("iso-8859-1")
        if "\r" in line[:-2]:
            yield from _LINE_BREAK.split(line)
        else:
            yield line


class QuickResponse(http.client.HTTPResponse):
    """An answer whose header block is read by header_message; status, framing and keep-alive as http.client's."""

    def begin(self):
        if self.headers is not None:
            return
        while True:
            version, status, reason = self._read_status()
            if status != http.client.CONTINUE:
                break
            read_header_lines(self.fp)  # an interim 100 answer's own headers
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = header_message(read_header_lines(self.fp))
        self._frame(status)

    def _frame(self, status: int) -> None:
        """Chunked or of a length, and whether the server closes after it: http.client's rules, in its order."""
        encoding = self.headers.get("transfer-encoding")
        self.chunked = bool(encoding) and encoding.lower() == "chunked"
        self.chunk_left = None
        self.will_close = self._check_close()
        self.length = None
        length = self.headers.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:  # a negative length means none
                    self.length = None
        if status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or 100 <= status < 200 \
                or self._method == "HEAD":
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True  # nothing else marks the answer's end


class QuickHTTPConnection(http.client.HTTPConnection):
    response_class = QuickResponse


class QuickHTTPSConnection(http.client.HTTPSConnection):
    response_class = QuickResponse
