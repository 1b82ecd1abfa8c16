"""Refusal messages worded as the seed's backend words them, so an operator who greps logs across both
implementations finds the same words. Standard library only (the validation module uses it)."""

RELEASE_ID_REQUIRED = "Runtime release admission requires releaseId."
ADMISSION_EPOCH_REQUIRED = "Runtime release admission requires a non-negative safe-integer admissionEpoch."
# Spelled exactly as the seed prints it, spaces missing after "requires" and "most" included.
ADMISSION_HINTS_BOUNDS = "Outbox admission discovery requires1–3 hints and at most32 distinct in-flight run ids."
LATE_BILLING_WAITING = ("Late runtime resource billing is waiting for provider-confirmed cleanup or its bounded "
                        "billing ceiling.")
ADOPTION_PREFLIGHT_NO_PROOF = "Sandbox cleanup adoption preflight returned no pending proof."
STAGED_NO_TERMINAL_RECEIVER = "Staged array input has no immutable terminal projection receiver."
DISPATCH_ORIGIN_CHANGED = "Run Ledger dispatch origin changed within an immutable launch."


def opening_refused(release_id: str, epoch: int) -> str:
    return f'Runtime release admission opening refused for "{release_id}" at epoch {epoch}.'
