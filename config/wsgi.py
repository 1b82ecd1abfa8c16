"""WSGI entry point for gunicorn (`config.wsgi:application`): the internal API on a short middleware chain."""
import os

from django.core.wsgi import get_wsgi_application

from scheduler.api.handler import routed

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = routed(get_wsgi_application())
