"""APP-1..7 as a user meets them (SPEC §16): the wheel in a fresh virtual environment, two projects made by
`django-admin startproject` (one named config, one mysite), the README's "Add it to your project" as written.

Each project gets the README's settings, URL include, task and commands; the test changes only what is the user's
own (the database, the port, where local sandboxes live) and says so in the settings it appends. The database's
`public` schema already holds a table of the user's. Then: migrate and check, `scheduler_workers` and the user's
own server, a run launched through the API, a task enqueued in one process and its result read in another, the
admin's dashboard, and SIGTERM leaving no process behind.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.support import PROJECT_DIR, free_port, wait_for

pytestmark = pytest.mark.django_db

TOKEN = "change-me-too"  # the README's SCHEDULER_INTERNAL_TOKEN


def readme_blocks() -> list[str]:
    """The indented code blocks of the README's "Add it to your project", in order."""
    text = (PROJECT_DIR / "README.md").read_text()
    section = text.split("## Add it to your project\n", 1)[1].split("\n## ", 1)[0]
    blocks, current = [], []
    for line in section.splitlines() + ["end"]:
        if line.startswith("    ") or (line == "" and current):
            current.append(line[4:])
        elif current:
            blocks.append("\n".join(current).strip("\n"))
            current = []
    return blocks


BLOCKS = readme_blocks()
INSTALL, SETTINGS, URLS, COMMANDS, TASK, ENQUEUE, LAUNCH = BLOCKS


@pytest.fixture(scope="module")
def environment(tmp_path_factory) -> dict[str, Path]:
    """The wheel and sdist built from this checkout (`twine check` passes), installed into a fresh venv."""
    root = tmp_path_factory.mktemp("user")
    dist = root / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(PROJECT_DIR)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())],
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    wheel = next(dist.glob("*.whl"))
    assert INSTALL == "pip install pg-run-scheduler"
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
                                str(wheel)], capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return {"venv": venv, "wheel": wheel}


def _user_env(venv: Path) -> dict[str, str]:
    """A shell of the user's: the venv first on PATH, nothing of this repository's test set-up."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTEST", "DJANGO_", "SCHEDULER_", "PROMETHEUS")) and key not in
           ("PYTHONPATH", "VIRTUAL_ENV", "DATABASE_URL")}
    env.update(PATH=f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}", LC_ALL="C.UTF-8", VIRTUAL_ENV=str(venv))
    return env


@pytest.mark.requirement("APP-1")
def test_the_wheel_holds_the_app_and_nothing_that_collides(environment):
    """APP-1: `scheduler` and its metadata only (no `config`, no tests), its licence, its version."""
    import zipfile

    names = zipfile.ZipFile(environment["wheel"]).namelist()
    assert {name.split("/", 1)[0] for name in names} == {"scheduler", environment["wheel"].name.split("-py3")[0]
                                                         + ".dist-info"}
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert "scheduler/sql/claim.sql" in names
    python = environment["venv"] / "bin" / "python"
    version = subprocess.run([str(python), "-c", "import scheduler; print(scheduler.__version__)"],
                             capture_output=True, text=True, env=_user_env(environment["venv"]), cwd="/")
    assert version.stdout.strip() == environment["wheel"].name.split("-")[1]


class UserProject:
    def __init__(self, name: str, root: Path, venv: Path, scratch_db, port: int):
        self.name, self.root, self.venv, self.db, self.port = name, root, venv, scratch_db, port
        self.env = _user_env(venv)
        self.processes: list[subprocess.Popen] = []

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout)

    def shell(self, script: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return self.run("bash", "-c", script.replace("localhost:8000", f"localhost:{self.port}"), timeout=timeout)

    def create(self) -> None:
        self.root.mkdir()
        made = self.run("django-admin", "startproject", self.name, ".")
        assert made.returncode == 0, made.stderr
        assert self.run("python", "manage.py", "startapp", "shop").returncode == 0
        (self.root / "shop" / "tasks.py").write_text(TASK + "\n")
        url = urllib.parse.urlsplit(self.db.url)
        database = {"ENGINE": "django.db.backends.postgresql", "NAME": self.db.name,
                    "HOST": urllib.parse.parse_qs(url.query).get("host", [url.hostname or ""])[0],
                    "PORT": str(url.port or ""), "USER": urllib.parse.unquote(url.username or ""),
                    "PASSWORD": urllib.parse.unquote(url.password or "")}
        settings = self.root / self.name / "settings.py"
        settings.write_text(settings.read_text() + "\n" + SETTINGS + f"""

# What is this user's own: their database, the port their server listens on, where local sandboxes live.
DATABASES = {{"default": {database!r}}}
SCHEDULER_PUBLIC_API_URL = "http://127.0.0.1:{self.port}"
SCHEDULER_SANDBOX_DIR = {str(self.root / "sandboxes")!r}
# pytest's temporary folders are private to their owner: the sandbox runs as this user, not a sandbox user.
SCHEDULER_LOCAL_SANDBOX_USER = ""
INSTALLED_APPS += ["shop"]
""")
        urls = self.root / self.name / "urls.py"
        urls.write_text(urls.read_text() + "\n" + URLS + "\n")

    def start(self, *args: str) -> subprocess.Popen:
        """A long-running command, its output in <command>.log (a pipe nobody reads would stall it)."""
        with open(self.log(args[0]), "w") as log:
            process = subprocess.Popen(["python", "manage.py", *args], cwd=self.root, env=self.env,
                                       stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process

    def log(self, command: str) -> Path:
        return self.root.parent / f"{command}.log"

    def get(self, path: str, opener=None) -> tuple[int, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
        try:
            with (opener or urllib.request.build_opener()).open(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except urllib.error.URLError:
            return 0, ""  # not listening yet


@pytest.fixture(params=["config", "mysite"])
def project(request, environment, scratch_db, tmp_path):
    made = UserProject(request.param, tmp_path / "project", environment["venv"], scratch_db, free_port())
    made.create()
    yield made
    for process in made.processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def _migrate_and_check(project: UserProject) -> None:
    """APP-2: the user's search_path, no options copied: the scheduler's schema is its own, public is the user's."""
    with project.db.connect(autocommit=True) as conn:
        conn.execute("CREATE TABLE public.my_orders (id integer PRIMARY KEY, note text)")
        conn.execute("INSERT INTO public.my_orders VALUES (1, 'kept')")
    migrate_line, workers_line, server_line = COMMANDS.splitlines()
    assert (migrate_line, workers_line, server_line) == (
        "python manage.py migrate", "python manage.py scheduler_workers &", "python manage.py runserver &")
    migrated = project.shell(migrate_line)
    assert migrated.returncode == 0, migrated.stdout[-2000:] + migrated.stderr[-2000:]
    checked = project.run("python", "manage.py", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with project.db.connect() as conn:
        assert conn.execute("SELECT note FROM public.my_orders").fetchall() == [("kept",)]
        public = {row[0] for row in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'v')")}
        assert {"my_orders", "django_migrations", "auth_user"} <= public
        assert not {name for name in public if name != "my_orders" and not name.startswith(("django_", "auth_"))}
        assert conn.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace").fetchone()[0] == 0
        assert conn.execute("SELECT to_regclass('runtime_scheduler.runs') IS NOT NULL").fetchone()[0]


def _launch_a_run(project: UserProject) -> None:
    """APP-4: the API at the include's paths; the run completes in a local sandbox."""
    launched = project.shell(LAUNCH.splitlines()[0].rstrip("\\") + LAUNCH.splitlines()[1])
    assert launched.returncode == 0, launched.stderr
    run_id = json.loads(launched.stdout)["runId"]

    def completed() -> bool:
        status, body = project.get(f"/internal/runs/{run_id}")
        assert status == 200, body
        return json.loads(body)["status"] == "completed"

    wait_for(completed, "the launched run completing", seconds=120)


def _open_the_dashboard(project: UserProject) -> None:
    """The admin registered itself with the user's admin site; its index is the scheduler's dashboard."""
    env = dict(project.env, DJANGO_SUPERUSER_PASSWORD="pw-for-the-test", DJANGO_SUPERUSER_EMAIL="a@example.com")
    made = subprocess.run(["python", "manage.py", "createsuperuser", "--noinput", "--username", "admin"],
                          cwd=project.root, env=env, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    status, page = project.get("/admin/login/", opener)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode({"csrfmiddlewaretoken": csrf, "username": "admin", "password": "pw-for-the-test",
                                   "next": "/admin/"}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{project.port}/admin/login/", data=form,
                                     headers={"Referer": f"http://127.0.0.1:{project.port}/admin/login/"})
    with opener.open(request, timeout=10) as response:
        page = response.read().decode()
    assert 'id="scheduler-dashboard"' in page, page[:2000]


def _descendants(process: subprocess.Popen) -> list[psutil.Process]:
    try:
        return psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@pytest.mark.requirement("APP-4", "APP-5")
def test_a_user_project_installs_migrates_runs_and_stops(project):
    _migrate_and_check(project)
    workers = project.start("scheduler_workers")
    server = project.start("runserver", f"127.0.0.1:{project.port}", "--noreload")
    def serving() -> bool:
        assert server.poll() is None and workers.poll() is None, (server.poll(), workers.poll())
        return project.get("/healthz")[0] == 200

    wait_for(serving, "the user's server answering /healthz", seconds=60)

    _launch_a_run(project)
    enqueued = project.shell(ENQUEUE.rsplit("\n# ", 1)[0])
    assert enqueued.returncode == 0, enqueued.stdout + enqueued.stderr
    assert enqueued.stdout.strip().splitlines()[-1] == ENQUEUE.rsplit("\n# ", 1)[1]
    _open_the_dashboard(project)
    status, metrics = project.get("/metrics")
    assert status == 200 and "scheduler_runs_queued" in metrics

    children = _descendants(workers)
    assert len(children) >= 7
    workers.send_signal(signal.SIGTERM)
    workers.wait(timeout=60)
    output = project.log("scheduler_workers").read_text()
    assert workers.returncode == 0, output[-3000:]
    # APP-5: the loops run from this project and log through its LOGGING (the README's, at INFO).
    assert "started dispatch" in output and "scheduler workers stopped" in output, output[-3000:]
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)
    wait_for(lambda: not [child for child in children if child.is_running() and child.status() != "zombie"],
             "every worker child and sandbox runner gone", seconds=30)
