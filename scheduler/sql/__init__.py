"""Load the named SQL blocks kept in this folder.

Each `<family>.sql` file holds blocks like::

    -- name: runs_insert_launch
    -- One line saying what the statement does.
    WITH ... ;

A block runs from its `-- name:` header to the next header. A comment line
`-- plan: custom` marks a statement that is never prepared: PostgreSQL plans
it for its actual parameters and table sizes on every call. `__schema__`
stands for the configured scheduler schema and is replaced once at load
time (the name is validated as a plain identifier at start-up). A line
`-- plan: generic` marks a prepared statement that always runs its generic
plan: PostgreSQL's automatic choice would re-plan it on every call although
one plan fits every parameter (the array-driven settlement is one). Parameters
are named psycopg placeholders, `%(run_id)s`, with explicit casts.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent
_HEADER = re.compile(r"^--\s*name:\s*([a-z][a-z0-9_]*)\s*$", re.MULTILINE)


class SqlBlockError(Exception):
    """A .sql file is malformed or a statement name does not exist."""


def parse_blocks(text: str, source: str = "<text>") -> dict[str, str]:
    """Split one file's text into {name: sql}; refuse duplicates and empty blocks."""
    blocks: dict[str, str] = {}
    headers = list(_HEADER.finditer(text))
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        body = text[header.end():end].strip()
        name = header.group(1)
        lines = body.splitlines()
        if not lines or not lines[0].startswith("--"):
            raise SqlBlockError(f"{source}: block {name} needs a comment line saying what it does")
        sql = "\n".join(line for line in lines if not line.lstrip().startswith("--")).strip().rstrip(";").strip()
        if not sql:
            raise SqlBlockError(f"{source}: block {name} has no statement")
        if name in blocks:
            raise SqlBlockError(f"{source}: block {name} is defined twice")
        blocks[name] = sql
    return blocks


_PLAN_MARK = re.compile(r"^\s*--\s*plan:\s*(custom|generic)\s*$", re.MULTILINE)


@functools.cache
def _load() -> tuple[dict[str, str], dict[str, str]]:
    """Every block of every file (`__schema__` still in place), and the `-- plan:` mark of the marked ones."""
    blocks: dict[str, str] = {}
    marks: dict[str, str] = {}
    for path in sorted(SQL_DIR.glob("*.sql")):
        text = path.read_text()
        for name, sql in parse_blocks(text, path.name).items():
            if name in blocks:
                raise SqlBlockError(f"{path.name}: block {name} is also defined in another file")
            blocks[name] = sql
        headers = list(_HEADER.finditer(text))
        for index, header in enumerate(headers):
            end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
            mark = _PLAN_MARK.search(text, header.end(), end)
            if mark:
                marks[header.group(1)] = mark.group(1)
    return blocks, marks


def raw_blocks() -> dict[str, str]:
    return _load()[0]


def plan_mark(name: str) -> str | None:
    """`custom`, `generic`, or None for a block PostgreSQL plans as it chooses."""
    return _load()[1].get(name)


@functools.cache
def _blocks_for(schema: str) -> dict[str, str]:
    quoted = '"' + schema + '"'
    return {name: sql.replace("__schema__", quoted) for name, sql in raw_blocks().items()}


def statement(name: str, schema: str) -> str:
    """The SQL of block `name` with the schema substituted."""
    try:
        return _blocks_for(schema)[name]
    except KeyError:
        raise SqlBlockError(f"no SQL block named {name!r}") from None
