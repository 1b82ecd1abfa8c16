# The outbox is a queue: every fact is inserted, leased and acknowledged within
# seconds, so its dead rows and statistics go stale far faster than the default
# "20% of the table" autovacuum rule notices on a table that keeps its history.
# Vacuum and analyze it after a fixed number of changes instead. Why safe during
# a deploy: ALTER TABLE ... SET (storage parameters) takes SHARE UPDATE
# EXCLUSIVE, which never blocks reads or writes of the outbox.

from django.db import migrations
from scheduler.schema.qualified import SchedulerMigration

QUEUE_AUTOVACUUM = (
    "autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000, "
    "autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 5000, "
    "autovacuum_vacuum_cost_delay = 0"
)
DEFAULTS = (
    "autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_analyze_scale_factor, "
    "autovacuum_analyze_threshold, autovacuum_vacuum_cost_delay"
)


class Migration(SchedulerMigration):
    dependencies = [("scheduler", "0011_outbox_blocker_index")]

    operations = [
        migrations.RunSQL(f"ALTER TABLE outbox SET ({QUEUE_AUTOVACUUM})", f"ALTER TABLE outbox RESET ({DEFAULTS})"),
    ]
