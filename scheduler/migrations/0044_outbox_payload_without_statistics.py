# Issue 47: autovacuum analyzes the outbox after every 5,000 changes (0012), and most of that work was the
# payload's statistics: a histogram and common values of jsonb documents, sampled, sorted and written to
# pg_statistic each time, though no statement filters, joins or sorts on the payload. Without them an ANALYZE of a
# 200,000-fact outbox took 120 ms instead of 211 and wrote 6.4 KB of WAL instead of 9.8. The planner keeps every
# column it reads by. Why safe during a deploy: SET STATISTICS takes a SHARE UPDATE EXCLUSIVE lock, which blocks no
# reader or writer of the outbox, and no release's plan depends on the payload's statistics.

from django.db import migrations

from scheduler.schema.qualified import SchedulerMigration


class Migration(SchedulerMigration):
    dependencies = [("scheduler", "0043_outbox_lease_off_the_index")]

    operations = [
        migrations.RunSQL("ALTER TABLE outbox ALTER COLUMN payload_json SET STATISTICS 0",
                          "ALTER TABLE outbox ALTER COLUMN payload_json SET STATISTICS -1"),
    ]
