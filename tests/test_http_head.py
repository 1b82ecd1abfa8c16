"""The outbound calls' header reader (http_head.py) against the standard library it stands in for: every header
block and every answer below must read as http.client's own parser and response read it."""

from __future__ import annotations

import http.client
import io
import socket

import pytest

from scheduler import http_head

BLOCKS = {
    "plain": [b"Content-Type: application/json\r\n", b"Content-Length: 12\r\n"],
    "names in any case, repeated": [b"set-cookie: a=1\r\n", b"Set-Cookie: b=2\r\n", b"X-REQUEST-ID: r\r\n"],
    "blanks around values": [b"X-A:   spaced  \r\n", b"X-B:\ttabbed\r\n", b"X-C:\r\n", b"X-D: a:b:c\r\n"],
    "bare line feeds": [b"X-A: one\n", b"X-B: two\n"],
    "folded": [b"X-Folded: first\r\n", b"  second\r\n", b"\tthird\r\n", b"X-After: yes\r\n"],
    "folded before any header": [b" orphan\r\n", b"X-A: kept\r\n"],
    "a line that is no header ends them": [b"X-A: kept\r\n", b"not a header\r\n", b"X-B: dropped\r\n"],
    "a name with a blank ends them": [b"X-A: kept\r\n", b"Bad Name: v\r\n", b"X-B: dropped\r\n"],
    "a line without a name": [b"X-A: kept\r\n", b": nameless\r\n", b" folded onto X-A\r\n", b"X-B: kept\r\n"],
    "an envelope line": [b"From someone\r\n", b"X-A: kept\r\n", b"From again\r\n", b"X-B: kept\r\n"],
    "a lone carriage return": [b"X-A: one\rX-B: two\r\n", b"X-C: three\r\n"],
    "a lone carriage return before text": [b"X-A: one\rtwo\r\n", b"X-C: three\r\n"],
    "latin-1 bytes": ["X-Name: caf\u00e9\r\n".encode("iso-8859-1"), b"X-Raw: \xff\xfe\r\n"],
    "none": [],
}


@pytest.mark.parametrize("lines", BLOCKS.values(), ids=BLOCKS.keys())
def test_a_header_block_reads_as_the_standard_parser_reads_it(lines):
    ours = http_head.header_message(http_head.read_header_lines(io.BytesIO(b"".join(lines) + b"\r\nbody")))
    theirs = http.client.parse_headers(io.BytesIO(b"".join(lines) + b"\r\nbody"))
    assert ours.items() == theirs.items()
    assert type(ours) is type(theirs)


@pytest.mark.parametrize("count", [http_head.MAX_HEADERS - 1, http_head.MAX_HEADERS])
def test_the_header_count_bound_is_the_standard_one(count):
    block = b"".join(b"X-%d: v\r\n" % number for number in range(count)) + b"\r\n"
    outcomes = []
    for read in (lambda fp: http_head.read_header_lines(fp), http.client.parse_headers):
        try:
            read(io.BytesIO(block))
            outcomes.append("read")
        except http.client.HTTPException as error:
            outcomes.append(type(error).__name__)
    assert outcomes[0] == outcomes[1]


def test_an_overlong_line_is_refused_as_the_standard_library_refuses_it():
    with pytest.raises(http.client.LineTooLong):
        http_head.read_header_lines(io.BytesIO(b"X-Long: " + b"a" * http_head.MAX_LINE + b"\r\n\r\n"))


ANSWERS = {
    "length, kept alive": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "no length": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close",
    "closing": b"HTTP/1.1 500 Broken  \r\nConnection: close\r\nContent-Length: 4\r\n\r\nfail",
    "HTTP/1.0 kept alive": b"HTTP/1.0 200 OK\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\nok",
    "HTTP/1.0": b"HTTP/1.0 404 Not Found\r\nContent-Length: 2\r\n\r\nno",
    "no content": b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
    "a bad length": b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\nuntil close",
    "a negative length": b"HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\nuntil close",
    "an interim answer first": b"HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
}


def _read(response_class, raw: bytes, method: str = "GET"):
    ours, theirs = socket.socketpair()
    try:
        ours.sendall(raw)
        ours.shutdown(socket.SHUT_WR)
        response = response_class(theirs, method=method)
        response.begin()
        framing = (response.status, response.reason, response.version, response.chunked, response.length,
                   response.will_close, response.headers.items())
        return framing, response.read()
    finally:
        ours.close()
        theirs.close()


@pytest.mark.parametrize("raw", ANSWERS.values(), ids=ANSWERS.keys())
def test_an_answer_is_framed_and_read_as_http_client_frames_it(raw):
    assert _read(http_head.QuickResponse, raw) == _read(http.client.HTTPResponse, raw)


def test_a_head_answer_has_no_body_as_in_http_client():
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
    assert _read(http_head.QuickResponse, raw, "HEAD") == _read(http.client.HTTPResponse, raw, "HEAD")


def test_an_unknown_protocol_is_refused_as_http_client_refuses_it():
    with pytest.raises(http.client.UnknownProtocol):
        _read(http_head.QuickResponse, b"HTTP/2.0 200 OK\r\n\r\n")


def test_the_outbound_connections_read_answers_this_way():
    from scheduler import outbound

    for scheme in ("http", "https"):
        assert outbound.new_connection(scheme, "example.test", None, None, 1.0).response_class is http_head.QuickResponse
