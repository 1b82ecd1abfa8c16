"""Load the named SQL blocks kept in this folder.

Each `<family>.sql` file holds blocks like::

    -- name: runs_insert_launch
    -- One line saying what the statement does.
    WITH ... ;

A block runs from its `-- name:` header to the next header. A comment line
`-- plan: custom` marks a statement PostgreSQL plans for its actual
parameters and table sizes on every call (how it is sent: `db._plan`). `__schema__`
stands for the configured scheduler schema and is replaced once at load
time (the name is validated as a plain identifier at start-up). A line
`-- plan: generic` marks a prepared statement that always runs its generic
plan: PostgreSQL's automatic choice would re-plan it on every call although
one plan fits every parameter (the array-driven settlement is one). A line
`-- plan: any` marks a prepared statement whose plan is the same however it is
planned (an upsert by primary key): it runs in whatever mode its connection is
in, since switching the mode for it costs more than any plan could save.
Parameters are named psycopg placeholders, `%(run_id)s`, with explicit casts.

`fragments.sql` (and `fragments_<domain>.sql`) hold SQL that several blocks must spell exactly alike (the
"newer attempt" fence, the control keys, the release locks): a block writes
`{{newer_attempt_exists(target.run_id, target.attempt)}}` and the loader
splices the fragment in, its `{run_id}`-style parameters replaced by the
arguments.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent
FRAGMENTS_GLOB = "fragments*.sql"  # fragments.sql, and fragments_<domain>.sql once one file would grow too long


def fragment_files() -> list[Path]:
    return sorted(SQL_DIR.glob(FRAGMENTS_GLOB))


def all_fragments() -> dict[str, tuple[tuple[str, ...], str]]:
    """Every fragment of every fragment file; a name defined twice is refused."""
    fragments: dict[str, tuple[tuple[str, ...], str]] = {}
    for path in fragment_files():
        for name, fragment in parse_fragments(path.read_text()).items():
            if name in fragments:
                raise SqlBlockError(f"{path.name}: fragment {name} is also defined in another file")
            fragments[name] = fragment
    return fragments
_HEADER = re.compile(r"^--\s*name:\s*([a-z][a-z0-9_]*)\s*$", re.MULTILINE)
_FRAGMENT_HEADER = re.compile(r"^--\s*fragment:\s*([a-z][a-z0-9_]*)\(([a-z_, ]*)\)\s*$", re.MULTILINE)
_USE = re.compile(r"\{\{([a-z][a-z0-9_]*)\(")


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


def parse_fragments(text: str) -> dict[str, tuple[tuple[str, ...], str]]:
    """{name: (parameter names, body)} of every `-- fragment: name(a, b)` in `text`."""
    fragments = {}
    headers = list(_FRAGMENT_HEADER.finditer(text))
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        lines = text[header.end():end].strip().splitlines()
        body = "\n".join(line for line in lines if not line.lstrip().startswith("--")).strip()
        parameters = tuple(name.strip() for name in header.group(2).split(",") if name.strip())
        fragments[header.group(1)] = (parameters, body)
    return fragments


def _arguments(text: str, start: int) -> tuple[list[str], int]:
    """The comma-separated arguments from `start` (just after the opening parenthesis) to `)}}`."""
    arguments, depth, current, index = [], 0, "", start
    while index < len(text):
        char = text[index]
        if depth == 0 and text.startswith(")}}", index):
            if current.strip():
                arguments.append(current.strip())
            return arguments, index + 3
        if char == "," and depth == 0:
            arguments.append(current.strip())
            current = ""
        else:
            depth += {"(": 1, ")": -1}.get(char, 0)
            current += char
        index += 1
    raise SqlBlockError("an unclosed {{fragment(...)}} use")


MAX_FRAGMENT_DEPTH = 4


def expand_fragments(text: str, fragments: dict[str, tuple[tuple[str, ...], str]], source: str = "<text>",
                     _depth: int = 0) -> str:
    """`text` with every {{name(arguments)}} replaced by its fragment."""
    out, position = [], 0
    while use := _USE.search(text, position):
        name = use.group(1)
        if name not in fragments:
            raise SqlBlockError(f"{source}: no SQL fragment named {name!r}")
        parameters, body = fragments[name]
        arguments, position_after = _arguments(text, use.end())
        if len(arguments) != len(parameters):
            raise SqlBlockError(f"{source}: fragment {name} takes {len(parameters)} argument(s), got {len(arguments)}")
        for parameter, argument in zip(parameters, arguments):
            body = body.replace("{" + parameter + "}", argument)
        # A fragment may use another (the receipt fence uses the newer-attempt fence); depth bounds a cycle.
        if _depth >= MAX_FRAGMENT_DEPTH:
            raise SqlBlockError(f"{source}: fragments nest deeper than {MAX_FRAGMENT_DEPTH} (a cycle?)")
        body = expand_fragments(body, fragments, source, _depth + 1)
        out += [text[position:use.start()], body]
        position = position_after
    return "".join(out) + text[position:]


_PLAN_MARK = re.compile(r"^\s*--\s*plan:\s*(custom|generic|any)\s*$", re.MULTILINE)


@functools.cache
def _load() -> tuple[dict[str, str], dict[str, str]]:
    """Every block of every file (`__schema__` still in place), and the `-- plan:` mark of the marked ones."""
    blocks: dict[str, str] = {}
    marks: dict[str, str] = {}
    fragments = all_fragments()
    for path in sorted(SQL_DIR.glob("*.sql")):
        if path in fragment_files():
            continue
        text = expand_fragments(path.read_text(), fragments, path.name)
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
    """`custom`, `generic`, `any`, or None for a block PostgreSQL plans as the configured mode says."""
    return _load()[1].get(name)


_WRITE = re.compile(r"\b(INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\S+(\s+AS\s+\w+)?\s+SET)\b", re.IGNORECASE)


@functools.cache
def writes(name: str) -> bool:
    """Whether block `name` inserts, updates or deletes rows (its comment lines aside): its triggers and foreign
    keys then run statements of their own, under the block's plan_cache_mode."""
    body = "\n".join(line for line in raw_blocks()[name].splitlines() if not line.lstrip().startswith("--"))
    return bool(_WRITE.search(body))


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
