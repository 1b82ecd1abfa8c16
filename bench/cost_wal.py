"""Where the cost bench's WAL went (issue 47), read back with pg_walinspect (the bench creates it): by table, by
kind of record and by index.

The second view names what each record is for. A run's WAL is mostly a count of records, not a size of rows:
every index entry, row lock, ON CONFLICT confirmation and commit is a record with its own header, so the rows a
run must keep (the bench's kept-rows table) are a small part of it.
"""

from __future__ import annotations

# What writes each kind of record, in a run's statements; a kind not listed is shown by its own name.
KINDS = {
    "Btree/INSERT_LEAF": "an index entry: a new row, or an update that is not HOT, enters every index it matches",
    "Heap/INSERT": "a new row",
    "Heap/INSERT+INIT": "a new row on a new page",
    "Heap/UPDATE": "an update that is not HOT (a column an index names or filters on changed, or no room on the page)",
    "Heap/UPDATE+INIT": "an update that is not HOT, onto a new page",
    "Heap/HOT_UPDATE": "a HOT update: no index entry",
    "Heap/LOCK": "a row lock taken before the write (FOR UPDATE, FOR NO KEY UPDATE; a fence's lock order)",
    "Heap/HEAP_CONFIRM": "an INSERT ... ON CONFLICT confirming its row",
    "Transaction/COMMIT": "a commit",
    "XLOG/FPI_FOR_HINT": "a full-page image after a checkpoint, for a hint bit",
    "Heap2/PRUNE_ON_ACCESS": "a page pruned of dead row versions as it was read",
    "Heap/DELETE": "a row deleted",
    "Btree/SPLIT_L": "an index page split in two, as it filled",
    "Btree/SPLIT_R": "an index page split in two, as it filled",
    "Btree/INSERT_UPPER": "an index entry one level up, after a split",
    "Btree/DELETE": "an index page's entries for dead rows removed, as it filled",
    "Btree/DEDUP": "an index page's equal keys merged, as it filled",
}


# PostgreSQL's system catalogs, their TOAST tables and indexes have the OIDs below this one; the project's
# tables' TOAST tables live in pg_toast too, so the namespace cannot tell them apart.
FIRST_NORMAL_OID = 16384


def _lsn(position: int) -> str:
    return f"{position // 2**32:X}/{position % 2**32:X}"


def wal_position() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint")
        return int(cursor.fetchone()[0])


def wal_by_table(start: int, end: int, runs: int) -> list[tuple]:
    """Issue 47: the WAL between two positions, per table (its indexes, TOAST and own records counted with it), in
    KB per run, read back with pg_walinspect: each block a record touched is charged its data and full-page image;
    what a record carries beside its blocks (headers, commit records) is its own row. Everything written meanwhile
    counts (autovacuum, checkpoints), as in the whole-run figure."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH block AS (
                SELECT info.start_lsn, info.reltablespace, info.relfilenode,
                       info.block_data_length + info.block_fpi_length AS bytes, info.block_fpi_length AS fpi
                FROM pg_get_wal_block_info(%(start)s::pg_lsn, %(end)s::pg_lsn, false) AS info
            ), named AS (
                SELECT coalesce(owner.relname, relation.relname, 'relfilenode ' || block.relfilenode) AS name,
                       block.bytes, block.fpi
                FROM block
                LEFT JOIN pg_class AS relation
                  ON relation.oid = pg_filenode_relation(block.reltablespace, block.relfilenode)
                LEFT JOIN pg_index AS index ON index.indexrelid = relation.oid
                LEFT JOIN pg_class AS toast_owner ON toast_owner.reltoastrelid = relation.oid
                LEFT JOIN pg_class AS owner ON owner.oid = coalesce(index.indrelid, toast_owner.oid)
            ), records AS (
                SELECT sum(record.record_length) AS bytes
                FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn) AS record
            )
            SELECT name, sum(bytes)::bigint, sum(fpi)::bigint FROM named GROUP BY name
            UNION ALL
            SELECT '(record headers, commits and other data)',
                   (SELECT bytes FROM records) - (SELECT coalesce(sum(bytes), 0) FROM named), 0
            ORDER BY 2 DESC
            """, {"start": _lsn(start), "end": _lsn(end)})
        rows = cursor.fetchall()
    return [(name, f"{total / runs / 1024:.2f}", f"{fpi / runs / 1024:.2f}") for name, total, fpi in rows
            if total / runs >= 10]


def wal_by_kind(start: int, end: int, runs: int) -> list[tuple]:
    """The WAL between two positions by kind of record: records and KB per run, and what writes each kind, largest
    first; a record that touched a system catalog (autovacuum's ANALYZE writing statistics, mostly) is counted apart
    from the run's own. Kinds under a tenth of a record a run are left out."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH catalog_record AS (
                SELECT DISTINCT block.start_lsn
                FROM pg_get_wal_block_info(%(start)s::pg_lsn, %(end)s::pg_lsn, false) AS block
                JOIN pg_class AS relation ON relation.oid = pg_filenode_relation(block.reltablespace, block.relfilenode)
                WHERE relation.oid < %(first_normal)s::oid
            )
            SELECT CASE WHEN catalog_record.start_lsn IS NULL THEN '' ELSE 'catalog: ' END
                   || record.resource_manager || '/' || record.record_type,
                   count(*), sum(record.record_length)
            FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn) AS record
            LEFT JOIN catalog_record ON catalog_record.start_lsn = record.start_lsn
            GROUP BY 1 ORDER BY 3 DESC
            """, {"start": _lsn(start), "end": _lsn(end), "first_normal": FIRST_NORMAL_OID})
        rows = cursor.fetchall()
    return [(kind, f"{count / runs:.1f}", f"{total / runs / 1024:.2f}",
             "a system catalog's row (statistics, a table's counters)" if kind.startswith("catalog: ") else KINDS.get(kind, ""))
            for kind, count, total in rows if count / runs >= 0.1]


def index_entries(start: int, end: int, runs: int) -> list[tuple]:
    """The index entries between two positions, index by index, per run, most first: which of the indexes a run's
    rows enter (every one whose predicate a new row version matches, unless the update was HOT) costs the most."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT coalesce(index.relname, 'relfilenode ' || block.relfilenode), count(*),
                   coalesce(pg_get_expr(entry.indpred, entry.indrelid), '')
            FROM pg_get_wal_block_info(%(start)s::pg_lsn, %(end)s::pg_lsn, false) AS block
            LEFT JOIN pg_class AS index ON index.oid = pg_filenode_relation(block.reltablespace, block.relfilenode)
            LEFT JOIN pg_index AS entry ON entry.indexrelid = index.oid
            WHERE block.resource_manager = 'Btree' AND block.record_type = 'INSERT_LEAF'
              AND index.oid >= %(first_normal)s::oid
            GROUP BY 1, 3 ORDER BY 2 DESC
            """, {"start": _lsn(start), "end": _lsn(end), "first_normal": FIRST_NORMAL_OID})
        rows = cursor.fetchall()
    return [(name, f"{count / runs:.1f}", predicate[:90]) for name, count, predicate in rows if count / runs >= 0.1]
