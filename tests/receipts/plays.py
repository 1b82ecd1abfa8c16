"""Plays only the receipt tests start."""

from scheduler.sandbox.steps import step


def nan_step(play_input):
    return step("score", lambda: {"score": float("nan")})
