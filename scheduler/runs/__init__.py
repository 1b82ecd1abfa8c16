"""Runs (promise 1: one verdict per attempt): admission, lifecycle, dispatch, settlement, the liveness sweep."""
