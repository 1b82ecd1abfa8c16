"""The README's django.tasks example (TSK-1): a task `./dev up` runs in a local sandbox like any play."""

from django.tasks import task


@task()
def greet(name):
    """Greets `name`; the return value is the run's output and the TaskResult's return_value."""
    return {"greeting": f"hello, {name}"}
