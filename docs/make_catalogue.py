"""Refresh the statement catalogue at the end of docs/architecture.md from the SQL files' first comment lines.

Run after adding or changing a statement: `.venv/bin/python docs/make_catalogue.py`
(tests/test_layout.py fails while a statement is missing from the catalogue). Each
"`scheduler/sql/NAME.sql` ...:" heading keeps its room and its own words; only the
table under it is rebuilt. A SQL file the page does not list yet is added at the
end, under a heading of its own, to be moved to its room.
"""

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent
SQL = DOCS.parent / "scheduler" / "sql"
CATALOGUE = "## Statement catalogue"
TABLE_HEAD = "| statement | what it does |\n|---|---|\n"
HEADING = re.compile(r"^`scheduler/sql/(\w+\.sql)`[^\n]*:\n\n?" + re.escape(TABLE_HEAD) + r"(?:\|[^\n]*\n)*", re.M)


def rows(file_name: str) -> str:
    """The table rows of one SQL file: each block's name and its first comment line."""
    found = re.finditer(r"^-- name: (\w+)\n-- (.*)$", (SQL / file_name).read_text(), re.M)
    return "".join(f"| `{match.group(1)}` | {match.group(2).replace('|', chr(92) + '|')} |\n" for match in found)


def refresh(page: str) -> str:
    start = page.index(CATALOGUE)
    head, catalogue = page[:start], page[start:]
    listed = set()

    def rebuilt(match: re.Match) -> str:
        listed.add(match.group(1))
        return match.group(0)[:match.group(0).index(TABLE_HEAD) + len(TABLE_HEAD)] + rows(match.group(1))

    catalogue = HEADING.sub(rebuilt, catalogue)
    missing = sorted(path.name for path in SQL.glob("*.sql")
                     if not path.name.startswith("fragments") and path.name not in listed)
    if missing:
        catalogue = catalogue.rstrip("\n") + "\n\n### Not yet placed\n"
        for name in missing:
            catalogue += f"\n`scheduler/sql/{name}`:\n\n{TABLE_HEAD}{rows(name)}"
    return head + catalogue


if __name__ == "__main__":
    page = DOCS / "architecture.md"
    page.write_text(refresh(page.read_text()))
