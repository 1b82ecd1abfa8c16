"""`python -m scheduler <command>`: a scheduler command in any project, with manage.py's one-line errors.

DJANGO_SETTINGS_MODULE names the project's settings; scheduler_workers
starts its loops this way, so it needs nothing from the project's manage.py.
"""

import os
import sys


def main() -> None:
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import OperationalError

    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        sys.exit("python -m scheduler: set DJANGO_SETTINGS_MODULE to the project's settings module")
    try:
        execute_from_command_line(["python -m scheduler", *sys.argv[1:]])
    except ImproperlyConfigured as error:
        sys.exit(f"scheduler: configuration error: {error}")
    except OperationalError as error:
        first_line = (str(error).strip().splitlines() or ["unknown error"])[0]
        sys.exit(f"scheduler: cannot reach the database: {first_line}")


if __name__ == "__main__":
    main()
