"""`migrate`, made safe for concurrent deploys of the scheduler schema.

Creates SCHEDULER_SCHEMA first, runs Django's migrate under the deploy lock
with a 60 s statement timeout (scheduler/schema/deploy.py).
"""

from django.core.management.commands.migrate import Command as DjangoMigrateCommand

from scheduler.schema.deploy import deploy_lock


class Command(DjangoMigrateCommand):
    help = "Create the scheduler schema and apply migrations; concurrent runs wait for each other."

    def handle(self, *args, **options):
        with deploy_lock(using=options["database"]):
            return super().handle(*args, **options)
