"""Names pg_stat_statements' entries by the project's named SQL blocks, for the benches' tables of where server
time went (cost, soak): the server keeps a statement's text with its constants replaced by $n, which a reader
cannot tell apart when several blocks begin alike (`WITH item AS MATERIALIZED ...`)."""

from __future__ import annotations

import re


def _words(text: str) -> list[str]:
    # Compare with every constant blanked and comments dropped: the server folds constants differently per block,
    # NULL, true and false among them (`SET lease_owner = NULL` is kept as `= $3`).
    text = " ".join(line.split("--")[0] for line in text.splitlines())
    return re.sub(r"'(?:[^']|'')*'|\$\d+|\b\d+\b|\b(?:NULL|true|false)\b", "?", text).split()


def _common_prefix(left: list[str], right: list[str]) -> int:
    length = 0
    for a, b in zip(left, right):
        if a != b:
            break
        length += 1
    return length


def namer():
    """A function from a statement's text as pg_stat_statements keeps it to the name of the block sharing its
    longest run of leading words, or the text's first 60 characters when no block shares at least 12."""
    from scheduler import db, sql
    from scheduler.conf import scheduler_settings

    blocks = {name: _words(db._compiled(name, scheduler_settings.schema)[0]) for name in sql.raw_blocks()}

    def block_of(query: str) -> str:
        seen = _words(query)
        best, length = max(((name, _common_prefix(seen, text)) for name, text in blocks.items()), key=lambda p: p[1])
        return best if length >= min(len(seen), 12) else " ".join(query.split())[:60]

    return block_of
