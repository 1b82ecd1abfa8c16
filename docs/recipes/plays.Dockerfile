# An image that runs plays: a Python 3.12+ interpreter and the plays' own code. Nothing of the scheduler: each
# start carries its runner in. Build and push it, then make it a Daytona snapshot
# (SCHEDULER_DAYTONA_SNAPSHOT) or name it as a Modal registry image (SCHEDULER_MODAL_IMAGE).
FROM python:3.12-slim
WORKDIR /plays
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt
# Your plays as a package: a launch names them as {"callable": "myplays.orders:ship"}.
COPY myplays/ ./myplays/
# The runner puts itself first on PYTHONPATH and keeps this after it, so the plays import as they would here.
ENV PYTHONPATH=/plays
