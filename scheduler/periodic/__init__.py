"""Periodic runs (SCD): cron schedules that launch runs, each slot exactly once, in the schedule's local time."""
