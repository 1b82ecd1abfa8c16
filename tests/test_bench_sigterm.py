"""A SIGTERM ends a benchmark through its `finally` blocks (bench/harness.py), as Ctrl-C does, so what it started
(a private server, fakes, worker processes) is stopped rather than left running for the next bench."""

import os
import signal
import subprocess
import sys

from tests.support import PROJECT_DIR

# What every benchmark does first (its command line), then a stand-in for its work and the cleanup after it.
BENCH = """
import sys
from pathlib import Path

sys.path.insert(0, "bench")
import harness

harness.arguments("smaller sizes").parse_args([])
try:
    print("working", flush=True)
    sys.stdin.readline()
finally:
    Path(sys.argv[1]).write_text("stopped what it started")
"""


def test_sigterm__ends_a_bench_through_its_cleanup(tmp_path):
    marker = tmp_path / "cleaned_up"
    process = subprocess.Popen([sys.executable, "-c", BENCH, str(marker)], cwd=PROJECT_DIR,
                               env=dict(os.environ, PYTHONPATH=str(PROJECT_DIR)), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout.readline().strip() == "working"
        process.send_signal(signal.SIGTERM)
        output = process.stdout.read()
        assert process.wait(timeout=60) == 128 + signal.SIGTERM, output
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    assert marker.read_text() == "stopped what it started"
