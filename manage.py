#!/usr/bin/env python
"""Django's command-line utility for the run scheduler."""
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import OperationalError

    # Bad configuration and an unreachable database are one line and a non-zero exit, not a traceback.
    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as error:
        sys.exit(f"{os.path.basename(sys.argv[0])}: configuration error: {error}")
    except OperationalError as error:
        first_line = (str(error).strip().splitlines() or ["unknown error"])[0]
        sys.exit(f"{os.path.basename(sys.argv[0])}: cannot reach the database: {first_line}")


if __name__ == "__main__":
    main()
