"""A guard that every named SQL block is run by some test: a requirement's test must run the production
statement, so a block no test executes is a statement nothing shows to work.

Each statement the suite runs passes through `scheduler.db._execute` (or, run on a raw cursor, is read with
`scheduler.db.statement_sql`); this plugin records its name (in this
process, and in the manage.py subprocesses the tests start: tests/support.manage_env points them at a file
through SCHEDULER_TEST_BLOCKS_FILE, read by tests/plugins/sitecustomize.py). When the whole suite ran and
passed with nothing skipped (as in CI), a block nobody executed fails the session, naming it. The planning
tests (tests/test_sql_blocks.py parses every block; the `*_plans.py` tests EXPLAIN some) render blocks from the
catalogue without running them, so they count for nothing here: a block only they reach is reported as such.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

EXECUTED: set[str] = set()
LOG = Path(tempfile.gettempdir()) / f"scheduler-test-blocks-{os.getpid()}.log"


def record(name: str) -> None:
    EXECUTED.add(name)


def install() -> None:
    from scheduler import db

    original, text_of = db._execute, db.statement_sql

    def executing(cursor, name, *args, **kwargs):
        record(name)
        return original(cursor, name, *args, **kwargs)

    def statement_sql(name, *args, **kwargs):
        record(name)  # a block run on a raw cursor (the pooled-session check at connection time)
        return text_of(name, *args, **kwargs)

    db._execute, db.statement_sql = executing, statement_sql


def pytest_configure(config):
    os.environ["SCHEDULER_TEST_BLOCKS_FILE"] = str(LOG)
    LOG.unlink(missing_ok=True)


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    install()


def _whole_suite(session) -> bool:
    config = session.config
    args = [arg for arg in config.args if arg not in ("tests", str(Path(config.rootpath) / "tests"))]
    return not args and not config.getoption("keyword") and not config.getoption("markexpr")


def pytest_sessionfinish(session, exitstatus):
    from scheduler import sql

    if LOG.exists():
        EXECUTED.update(LOG.read_text().split())
        LOG.unlink(missing_ok=True)
    if exitstatus != 0 or not _whole_suite(session) or session.config.option.collectonly:
        return
    never = sorted(set(sql.raw_blocks()) - EXECUTED)
    if os.environ.get("SCHEDULER_TEST_BLOCKS_REPORT"):
        Path(os.environ["SCHEDULER_TEST_BLOCKS_REPORT"]).write_text("\n".join(never) + "\n")
    if not never:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    # A skipped test (no pgbouncer on this machine, say) may be the one that runs a block: then only say so.
    verdict = f"not judged, {skipped} test(s) skipped" if skipped else "failing the run"
    session.config.get_terminal_writer().line(
        f"block coverage ({verdict}): {len(never)} named SQL block(s) no test executed (only the planning tests "
        f"parse them): {', '.join(never)}",
        red=not skipped, yellow=bool(skipped))
    if not skipped:
        session.exitstatus = 1
