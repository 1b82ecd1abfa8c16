"""In a manage.py subprocess a test started: record each named block it executes for the block-coverage guard
(tests/plugins/block_coverage.py), by appending its name to SCHEDULER_TEST_BLOCKS_FILE."""

import importlib.machinery
import os
import sys

_FILE = os.environ.get("SCHEDULER_TEST_BLOCKS_FILE")


def _record(block: str) -> None:
    with open(_FILE, "a") as log:
        log.write(block + "\n")


def _patch(module) -> None:
    original, text_of = module._execute, module.statement_sql

    def executing(cursor, block, *args, **kwargs):
        _record(block)
        return original(cursor, block, *args, **kwargs)

    def statement_sql(block, *args, **kwargs):
        _record(block)
        return text_of(block, *args, **kwargs)

    module._execute, module.statement_sql = executing, statement_sql


class _Recorder:
    """Wraps scheduler.db._execute right after the module is first executed."""

    def find_spec(self, name, path=None, target=None):
        if name != "scheduler.db":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


if _FILE:
    sys.meta_path.insert(0, _Recorder())
