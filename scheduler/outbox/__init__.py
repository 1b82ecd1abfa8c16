"""The outbox (promise 2: every run fact reaches the run ledger once, in per-run causal order)."""
