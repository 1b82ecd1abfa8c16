"""Sandbox cleanup and compute billing (promise 3: no sandbox leaked, billing ends at the accepted delete)."""
