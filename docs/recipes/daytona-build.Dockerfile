# A Daytona declarative build (SCHEDULER_DAYTONA_DOCKERFILE): Daytona builds it on first use and caches it.
# It is sent as text with no build context, so it installs the plays rather than copying them.
FROM python:3.12-slim
RUN pip install --no-cache-dir "myplays==1.4.0"
