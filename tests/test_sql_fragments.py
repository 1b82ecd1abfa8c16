"""SQL spelled once: every block takes the shared definitions from fragments.sql, and they match the Python enums."""

import re

import pytest

from scheduler import sql
from scheduler.kinds import FENCING_ATTEMPT_STATUSES

FRAGMENTS = sql.all_fragments()

# What each shared definition looks like when a block spells it out by hand instead of using its fragment.
HAND_WRITTEN = {
    "newer attempt check": re.compile(r"attempts\s+AS\s+newer", re.IGNORECASE),
    "cancel key": re.compile(r"'runtime_cancel:'"),
    "unreconciled key": re.compile(r"'sandbox_unreconciled:"),
    "release lock": re.compile(r"runtime_release_admission:"),
    "deploy lock": re.compile(r"runtime_scheduler\.deploy:"),
    "acknowledgement": re.compile(r"SET\s+delivered_at\s*=", re.IGNORECASE),
    "ledger event store": re.compile(r"INSERT\s+INTO\s+__schema__\.run_ledger_events", re.IGNORECASE),
    "provider fallback": re.compile(r"'sandboxProvider'"),
    "cleanup obligation insert": re.compile(r"INSERT\s+INTO\s+__schema__\.sandbox_cleanup_jobs_v2\b", re.IGNORECASE),
    "production as the default environment": re.compile(r"'production'"),
    "fact time": re.compile(r"max\(\s*fact\.created_at\s*\)", re.IGNORECASE),
    "live lease": re.compile(r"lease_owner\s+IS\s+NOT\s+NULL\s+AND\s+\w+\.lease_expires_at\s*>\s*now\(\)", re.IGNORECASE),
}


def _source_blocks():
    for path in sorted(sql.SQL_DIR.glob("*.sql")):
        if path not in sql.fragment_files():
            yield from sql.parse_blocks(path.read_text(), path.name).items()


@pytest.mark.parametrize("what", sorted(HAND_WRITTEN))
def test_no_block_spells_a_shared_definition_by_hand(what):
    offenders = [name for name, text in _source_blocks() if HAND_WRITTEN[what].search(text)]
    assert offenders == [], f"{what} written by hand in {offenders}; use its fragment"


def test_every_fence_on_a_newer_attempt_uses_the_one_definition():
    fenced_fragments = [name for name, (_, body) in FRAGMENTS.items() if "{{newer_attempt_exists(" in body]
    assert sorted(fenced_fragments) == ["liveness_work", "receipt_fence"]
    uses = [name for name, text in _source_blocks()
            if any(f"{{{{{fragment}(" in text for fragment in ["newer_attempt_exists", *fenced_fragments])]
    assert len(uses) == 18, uses  # 16, and the two durable-wait statements (waits_begin, attempts_suspend)
    status_list = re.search(r"newer\.status IN \([^)]*\)", FRAGMENTS["newer_attempt_exists"][1]).group(0)
    assert all(status_list in sql.raw_blocks()[name] for name in uses)


def test_the_fence_names_the_fencing_statuses_of_the_enum():
    """requirements §1.2: the SQL list and kinds.FENCING_ATTEMPT_STATUSES say the same thing."""
    _, body = FRAGMENTS["newer_attempt_exists"]
    listed = re.search(r"newer\.status IN \(([^)]*)\)", body).group(1)
    assert tuple(item.strip().strip("'") for item in listed.split(",")) == tuple(FENCING_ATTEMPT_STATUSES)


def test_fragments__arguments_spliced_nested_parentheses_kept():
    fragments = {"pair": (("a", "b"), "({a}, {b})")}
    assert sql.expand_fragments("SELECT {{pair(f(x, y), %(z)s::int)}}", fragments) == "SELECT (f(x, y), %(z)s::int)"


@pytest.mark.parametrize("text,error", [
    ("SELECT {{missing(x)}}", "no SQL fragment named 'missing'"),
    ("SELECT {{pair(x)}}", "takes 2 argument"),
    ("SELECT {{pair(x, y", "unclosed"),
])
def test_fragments__misuse_refused(text, error):
    with pytest.raises(sql.SqlBlockError, match=error):
        sql.expand_fragments(text, {"pair": (("a", "b"), "({a}, {b})")})


def test_fragments__a_fragment_may_use_another_but_not_itself():
    fragments = {"inner": (("x",), "({x} + 1)"), "outer": (("y",), "{{inner({y})}} * 2")}
    assert sql.expand_fragments("SELECT {{outer(a)}}", fragments) == "SELECT (a + 1) * 2"
    with pytest.raises(sql.SqlBlockError, match="nest deeper"):
        sql.expand_fragments("SELECT {{loop()}}", {"loop": ((), "{{loop()}}")})
