"""What the scheduler's commands share: argument types that name their flag, one-line errors, loop flags."""

from __future__ import annotations

import argparse
import functools
import logging
import threading
from typing import Callable

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from scheduler.conf import scheduler_settings
from scheduler.loop import Loop, arm_wake_signal, listen, run_together
from scheduler.tick import Tick


def integer(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [minimum, maximum]; argparse prefixes the flag to the message."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def seconds(*, positive: bool = False) -> Callable[[str], float]:
    """An argparse type: a number of seconds, not negative (or above zero when `positive`)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
        if value != value or value < 0 or (positive and value == 0):
            raise argparse.ArgumentTypeError(f"must be {'above zero' if positive else 'zero or more'}, got {text}")
        return value

    parse.__name__ = "seconds"
    return parse


def subset(options: tuple[str, ...]) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated, non-empty subset of `options`."""
    def parse(text: str) -> list[str]:
        chosen = [name.strip() for name in text.split(",") if name.strip()]
        if not chosen or set(chosen) - set(options):
            raise argparse.ArgumentTypeError(f"takes a comma-separated subset of {', '.join(options)}, got {text!r}")
        return chosen

    parse.__name__ = "subset"
    return parse


class SchedulerCommand(BaseCommand):
    """A command whose bad arguments end it with one line on stderr and a non-zero exit, before anything is written."""

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        fallback = parser.error

        def one_line_error(message):
            # From a shell: the message alone (argparse would print the usage first); from call_command: CommandError.
            if parser.called_from_command_line:
                parser.exit(2, f"{parser.prog}: error: {message}\n")
            fallback(message)

        parser.error = one_line_error
        return parser


class RepairCommand(SchedulerCommand):
    """An operator repair from a shell: one line; exit 1 when its fence refused it (nothing changed)."""

    def add_arguments(self, parser):
        parser.add_argument("--reason", default=None, help="why (kept in the operator_actions audit row)")

    def report(self, repair) -> None:
        if not repair.changed:
            raise CommandError(repair.line())
        self.stdout.write(repair.line())


class LoopCommand(SchedulerCommand):
    """A worker loop command: --once and --interval, one Loop (scheduler/loop.py)."""

    loop_name = ""
    default_interval = 1.0

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="one tick, then exit")
        parser.add_argument("--interval", type=seconds(), default=self.default_interval,
                            help="seconds between ticks when idle")

    def run_loop(self, tick: Callable[[], Tick | dict], options: dict, logger: logging.Logger, *,
                 wake_signal: str | None = None, finish: Callable[[], object] | None = None,
                 cooldown: float = 0.0) -> None:
        """Run one Loop; with `wake_signal`, it arms that signal when idle and a NOTIFY on the signal's channel
        (<schema>_<signal>) ends its idle wait at once; `finish` runs at its end; `cooldown`: Loop's."""
        self.run_workers([(self.loop_name, tick, finish)], options, logger, wake_signal=wake_signal, cooldown=cooldown)

    def run_workers(self, workers: list[tuple[str, Callable[[], Tick | dict], Callable[[], object] | None]],
                    options: dict, logger: logging.Logger, *, wake_signal: str | None = None,
                    cooldown: float = 0.0) -> None:
        """Run (name, tick, finish) workers, one Loop each on its own thread (one alone on this thread), sharing
        one stop and one wake event: a signal stops them all; a NOTIFY wakes them all."""
        listening = wake_signal is not None and not options["once"]
        stopping, wake = threading.Event(), threading.Event()
        loops = [Loop(name, tick, interval=options["interval"], once=options["once"], logger=logger,
                      stopping=stopping, wake=wake, finish=finish,
                      arm=functools.partial(arm_wake_signal, wake_signal) if listening else None, cooldown=cooldown)
                 for name, tick, finish in workers]
        if listening:
            listen(f"{scheduler_settings.schema}_{wake_signal}", stopping, wake, logger)
        self.stopping = stopping
        self.exit_with(loops[0].run if len(loops) == 1 else lambda: run_together(loops, self.loop_name, logger))

    def exit_with(self, run: Callable[[], int]) -> None:
        """Run a loop: a configuration error is one line and exit 2; a loop that gave up exits with its code."""
        try:
            code = run()
        except ImproperlyConfigured as error:
            raise CommandError(str(error), returncode=2) from None
        if code:
            raise SystemExit(code)
