"""The soak's fakes (issue 32, 47): a fake Daytona and an https run-ledger receiver, each in a forked process of
its own so the bench's GIL is not theirs; what each saw is sent back at the end for the promise checks."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import harness

ORG = "org-capacity"


def _serve_fake(kind: str, pipe) -> None:
    """A fake in a process of its own: sends its URL, serves until asked, then sends what it saw."""
    sys.path.insert(0, str(harness.PROJECT_DIR))
    if kind == "daytona":
        from tests.providers.fake_daytona import FakeDaytona

        fake = FakeDaytona({"key-capacity": ORG}, keep_alive=True, gone_after_seconds=1.0).__enter__()
    else:
        from tests.outbox.fake_receiver import FakeReceiver

        # A deployed runtime's receiver: https, granting prefix batching (a run's facts in one request).
        fake = FakeReceiver(tls=_server_tls())
        fake.grant_batching = True
        fake.requests = _Discard()  # keep what the checks need (sightings), not every request's body
    pipe.send(fake.url)
    pipe.recv()
    if kind == "daytona":
        # A delete Daytona accepted keeps the state and sets desiredState "destroyed" (PRV-4).
        seen = {sandbox_id: ("destroyed" if sandbox["desiredState"] == "destroyed" else sandbox["state"],
                             (sandbox.get("labels") or {}).get("runId"))
                for sandbox_id, sandbox in fake.sandboxes.items()}
        fake.__exit__(None, None, None)  # before answering, which ends this process: its toolbox's /tmp directory
        pipe.send(seen)
    else:
        pipe.send(fake.sightings)


CERT_DIR = Path(tempfile.gettempdir()) / "scheduler-bench-tls"


def receiver_certificate() -> Path:
    """A self-signed certificate for localhost (made once with openssl): the workers trust it as SSL_CERT_FILE."""
    cert, key = CERT_DIR / "cert.pem", CERT_DIR / "key.pem"
    if not cert.exists():
        CERT_DIR.mkdir(mode=0o700, exist_ok=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True)
    return cert


def _server_tls():
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(receiver_certificate(), CERT_DIR / "key.pem")
    return context


class _Discard(list):
    def append(self, item) -> None:
        pass


class Fake:
    """A fake Daytona or run-ledger receiver in a forked process; `seen()` ends it and returns what it saw."""

    def __init__(self, kind: str):
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self._pipe, child_end = context.Pipe()
        self.process = context.Process(target=_serve_fake, args=(kind, child_end), daemon=True)
        self.process.start()
        self.url = self._pipe.recv()

    def seen(self):
        self._pipe.send("report")
        answer = self._pipe.recv()
        self.process.kill()
        self.process.join(10)
        return answer
