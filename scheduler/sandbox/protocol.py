"""The names the sandbox side and the scheduler both use: written here once, imported by both.

The runner writes these error codes into a failed result (kinds.FailureCode
lists them among the scheduler's own), and the step API refuses keys in the
scheduler's receipt namespace before any request (RCP-2).
"""

PLAY_START_FAILED = "play_start_failed"  # the play could not be loaded or started
UNSTORABLE_OUTPUT = "unstorable_output"  # the play's output holds what PostgreSQL cannot store
RESERVED_KEY_PREFIX = "sys:"  # RCP-2: the scheduler's own receipt namespace
