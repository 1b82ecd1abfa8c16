"""Every SQL block parses against the real schema; every name the code uses exists."""

import re
from pathlib import Path

import pytest
from django.db import connection, transaction

from scheduler import sql as sql_blocks
from scheduler.conf import scheduler_settings

pytestmark = pytest.mark.django_db
PACKAGE = Path(__file__).resolve().parent.parent / "scheduler"
PLACEHOLDER = re.compile(r"%\((\w+)\)s")
CALL = re.compile(r"\b(?:db\.(?:run|fetch_all|fetch_one|fetch_value|execute)|statement_sql)\(\s*\"([a-z0-9_]+)\"")


def _as_prepared(sql: str) -> str:
    names: list[str] = []

    def number(match):
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return PLACEHOLDER.sub(number, sql).replace("%%", "%")


# Utility statements (CREATE SCHEMA) cannot be prepared; migrate runs them in every test session.
DML_BLOCKS = sorted(
    name for name, sql in sql_blocks.raw_blocks().items()
    if re.match(r"\s*(WITH|SELECT|INSERT|UPDATE|DELETE)\b", sql, re.IGNORECASE)
)


@pytest.mark.parametrize("name", DML_BLOCKS)
def test_block_parses_and_plans(name):
    # Rendered straight from the catalogue, not through scheduler.db: parsing a block is not running it, so the
    # block-coverage guard (tests/plugins/block_coverage.py) does not count it.
    sql = sql_blocks.statement(name, scheduler_settings.schema)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"PREPARE block_check AS {_as_prepared(sql)}")
        cursor.execute("DEALLOCATE block_check")


def test_every_statement_named_in_code_exists():
    used = set()
    for path in PACKAGE.rglob("*.py"):
        used |= set(CALL.findall(path.read_text()))
    assert used, "the scan found no statement names"
    missing = sorted(used - set(sql_blocks.raw_blocks()))
    assert missing == []


def test_parse_blocks__refuses_duplicates_and_missing_comment():
    with pytest.raises(sql_blocks.SqlBlockError, match="twice"):
        sql_blocks.parse_blocks("-- name: a\n-- x\nSELECT 1;\n-- name: a\n-- y\nSELECT 2;")
    with pytest.raises(sql_blocks.SqlBlockError, match="comment line"):
        sql_blocks.parse_blocks("-- name: a\nSELECT 1;")


def test_plan_markers__parsed():
    marks = {name: sql_blocks.plan_mark(name) for name in sql_blocks.raw_blocks()}
    custom = {name for name, mark in marks.items() if mark == "custom"}
    assert {"outbox_list_ready_runs", "runs_list_liveness_work_historical"} <= custom
    assert marks["runs_list_liveness_work"] == "generic"  # an index probe whatever its parameters
    assert marks["attempts_settle"] == marks["runs_claim_queued"] == "generic"
    assert marks["wake_signals_arm"] == "any"
