"""Django admin for the scheduler: read-only views of every table.

Repairs (cancel, requeue, unblock, release open/close) will be admin actions
that run the same fenced statements as the API; nothing here writes.
"""

from scheduler.admin import registrations  # noqa: F401
