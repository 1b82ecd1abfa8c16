# The re-drive repair's own permission: options only, no schema change.

from django.db import migrations
from scheduler.schema.qualified import SchedulerMigration


class Migration(SchedulerMigration):

    dependencies = [
        ('scheduler', '0019_repair_permissions'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='cleanupjobrow',
            options={'managed': False, 'ordering': ['-updated_at'], 'permissions': [('unblock_cleanup', 'Can unblock a cleanup job (operator repair)'), ('redrive_cleanup', 'Can re-drive a waiting cleanup job now (operator repair)')], 'verbose_name': 'cleanup job (v2)'},
        ),
    ]
