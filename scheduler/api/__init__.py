"""The internal HTTP API (JSON under /internal/), served by gunicorn."""
