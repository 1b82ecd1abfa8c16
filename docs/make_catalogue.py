"""Rewrite the statement catalogue at the end of docs/architecture.md from the SQL files' first comment lines.

Run after adding or changing a statement: `.venv/bin/python docs/make_catalogue.py`
(tests/test_layout.py fails while a statement is missing from the catalogue).
"""

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent
SQL = DOCS.parent / "scheduler" / "sql"
ROOMS = [("Runs", "admission.sql", "lifecycle.sql", "settlement.sql", "liveness.sql", "receipts.sql", "reads.sql"), ("Outbox", "outbox.sql"),
         ("Cleanup and billing", "adoption.sql", "cleanup.sql", "billing.sql"), ("Operations", "operations.sql", "dashboard.sql"), ("Schema", "schema.sql")]


def catalogue() -> str:
    out = []
    for room, *files in ROOMS:
        out.append(f"### {room}\n")
        for name in files:
            out += [f"`scheduler/sql/{name}`:\n", "| statement | what it does |\n|---|---|"]
            for match in re.finditer(r"^-- name: (\w+)\n-- (.*)$", (SQL / name).read_text(), re.M):
                out.append(f"| `{match.group(1)}` | {match.group(2).replace('|', chr(92) + '|')} |")
            out.append("")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    page = DOCS / "architecture.md"
    text = page.read_text()
    page.write_text(text[:text.index("### Runs\n")] + catalogue())
