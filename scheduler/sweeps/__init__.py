"""Maintenance sweeps, each its own module with run_once() (Oban's plugins)."""
