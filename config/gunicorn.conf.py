"""gunicorn settings for the internal API; SCHEDULER_BIND, _WEB_WORKERS, _WEB_THREADS and _WEB_TIMEOUT override them."""
import os

from scheduler.conf import SchedulerSettings

_scheduler = SchedulerSettings.environment(os.environ)

bind = _scheduler["SCHEDULER_BIND"]
workers = _scheduler["SCHEDULER_WEB_WORKERS"]
threads = _scheduler["SCHEDULER_WEB_THREADS"]
# gthread, closing connections without blocking its loop (see the module for why).
worker_class = "scheduler.api.lingering_worker.LingeringThreadWorker"
timeout = _scheduler["SCHEDULER_WEB_TIMEOUT"]
graceful_timeout = 10
accesslog = "-"
# One line per request: address, request line, status, bytes, milliseconds; never a header (bearer tokens).
logger_class = "config.access_log.AccessLogger"
wsgi_app = "config.wsgi:application"


def worker_exit(server, worker):
    """A worker that stops settles, bumps and launches what its group settler, heartbeater and launcher still
    hold before it goes (requests already answered are never left undone)."""
    from scheduler.runs.batcher import ProcessShared

    ProcessShared.close_all()


def post_worker_init(worker):
    """Move everything the loaded application allocated out of the collector's reach: a full collection then
    walks only what requests allocate, instead of pausing every thread over Django's whole heap."""
    import gc

    gc.freeze()
