"""A PostgreSQL-native run scheduler for detached sandbox runners, as a Django app."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pg-run-scheduler")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
