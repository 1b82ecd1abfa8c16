"""gunicorn settings for the internal API; every value can be overridden by env."""
import os

bind = os.environ.get("SCHEDULER_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("SCHEDULER_WEB_WORKERS", "2"))
threads = int(os.environ.get("SCHEDULER_WEB_THREADS", "4"))
worker_class = "gthread"
timeout = int(os.environ.get("SCHEDULER_WEB_TIMEOUT", "30"))
graceful_timeout = 10
accesslog = "-"
# Never log request headers: they carry bearer tokens.
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms'
wsgi_app = "config.wsgi:application"
