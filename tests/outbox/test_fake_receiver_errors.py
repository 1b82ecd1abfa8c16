"""The fake receiver's server prints no traceback for a client that vanished mid-request (the soak kills
drainers under chaos), and still prints one for any other error, which would be the fake's own."""

from __future__ import annotations

import ssl

import pytest

from tests.outbox.fake_receiver import FakeReceiver


@pytest.mark.parametrize("error", [ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), BrokenPipeError(),
                                   ConnectionResetError()])
def test_a_vanished_client_leaves_no_traceback(capsys, error):
    receiver = FakeReceiver()
    try:
        try:
            raise error
        except OSError:
            receiver._server.handle_error(None, ("127.0.0.1", 1))
    finally:
        receiver.close()
    assert capsys.readouterr().err == ""


def test_any_other_error_is_still_printed(capsys):
    receiver = FakeReceiver()
    try:
        try:
            raise ValueError("the fake's own defect")
        except ValueError:
            receiver._server.handle_error(None, ("127.0.0.1", 1))
    finally:
        receiver.close()
    assert "the fake's own defect" in capsys.readouterr().err
