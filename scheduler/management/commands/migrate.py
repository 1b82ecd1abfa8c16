"""`migrate`, made safe for concurrent deploys of the scheduler schema.

Creates SCHEDULER_SCHEMA first, runs Django's migrate under the deploy lock
with a 60 s statement timeout (scheduler/schema/deploy.py). Behind a
transaction pooler (SCHEDULER_TRANSACTION_POOLING) it runs over
DIRECT_DATABASE_URL, since the lock and the timeout live in a session, and
sets the role defaults pooled sessions start with (scheduler/schema/pooling.py).
"""

from django.core.management.commands.migrate import Command as DjangoMigrateCommand
from django.db import DEFAULT_DB_ALIAS

from scheduler import db
from scheduler.conf import scheduler_settings
from scheduler.schema.deploy import deploy_lock
from scheduler.schema.pooling import set_role_defaults


class Command(DjangoMigrateCommand):
    help = "Create the scheduler schema and apply migrations; concurrent runs wait for each other."

    def handle(self, *args, **options):
        pooled = scheduler_settings.transaction_pooling and options["database"] == DEFAULT_DB_ALIAS
        if pooled:
            options["database"] = db.direct_alias()
        with deploy_lock(using=options["database"]):
            result = super().handle(*args, **options)
            if pooled:
                for setting in set_role_defaults(options["database"]):
                    if options["verbosity"] >= 1:
                        self.stdout.write(f"Pooled sessions of this role start with {setting}")
            return result
