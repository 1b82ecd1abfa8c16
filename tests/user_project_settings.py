"""Settings shaped like a user's own project (APP-2): Django's defaults, the two apps, a plain PostgreSQL
connection with no options copied from this repository's config/settings.py."""

import os

import environ

SECRET_KEY = "user-project-settings-for-tests"
DEBUG = True
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "scheduler",
    "pgtrigger",
]
DATABASES = {"default": environ.Env.db_url_config(os.environ["DATABASE_URL"])}
ROOT_URLCONF = "scheduler.urls"
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                       "django.contrib.auth.context_processors.auth",
                                       "django.contrib.messages.context_processors.messages"]},
}]
STATIC_URL = "static/"
