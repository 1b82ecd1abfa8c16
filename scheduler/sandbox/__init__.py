"""What runs inside a sandbox: the detached runner (`python -m scheduler.sandbox.runner`) and the play-side
step API (`scheduler.sandbox.steps`). Standard library only, and importing nothing outside this package, so
a sandbox image needs the scheduler package but none of its dependencies (a test imports it without Django).
"""
