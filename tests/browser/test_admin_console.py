"""The admin in a real browser (Debian's headless Chromium, driven by Selenium): styled, the dashboard's figures
lead to the lists that explain them, a repair runs as an action and is audited, and needs its permission."""

import os
import shutil
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests import factories
from tests.factories import one, query

pytestmark = pytest.mark.django_db(transaction=True)
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture
def browser(settings):
    # The live server serves the apps' own static files: pages must link those, not a collection's hashed copies.
    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("needs Debian's chromium and chromium-driver (.ci/run installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(15)  # a loaded 2-core CI machine renders slowly; the wait only bounds a hang
    yield driver
    driver.quit()


def _log_in(browser, live_server, username):
    browser.get(f"{live_server.url}/admin/login/")
    browser.find_element(By.NAME, "username").send_keys(username)
    browser.find_element(By.NAME, "password").send_keys("pw")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    browser.find_element(By.ID, "user-tools")  # logged in (waits): navigating on at once could beat the session cookie


def test_dashboard_styled__a_figure_leads_to_its_list__an_action_runs_and_is_audited(browser, live_server):
    User.objects.create_superuser("ops", "ops@example.com", "pw")
    stuck = factories.parked_run(heartbeat_timeout_ms=1)
    query("UPDATE attempts SET heartbeat_at = now() - interval '1 minute' WHERE run_id = %s", [stuck.run_id])
    _log_in(browser, live_server, "ops")
    dashboard = browser.find_element(By.ID, "scheduler-dashboard")
    if os.environ.get("SCHEDULER_SCREENSHOTS"):  # `SCHEDULER_SCREENSHOTS=1 ./dev test tests/browser` refreshes docs/
        browser.save_screenshot(str(Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"))
    header = browser.find_element(By.ID, "header")
    assert browser.execute_script("return getComputedStyle(arguments[0]).backgroundColor", header) != "rgba(0, 0, 0, 0)"
    dashboard.find_element(By.PARTIAL_LINK_TEXT, "stuck runners").click()
    assert stuck.run_id in browser.find_element(By.ID, "result_list").text
    browser.find_element(By.CSS_SELECTOR, "input.action-select").click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("cancel_runs")
    browser.find_element(By.CSS_SELECTOR, "button[name=index]").click()
    assert "cancel queued" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    assert one("SELECT actor FROM operator_actions WHERE target = %s", [stuck.run_id]) == "admin:ops"


def test_an_operator_without_the_permission__sees_no_action(browser, live_server):
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_run"))
    factories.launch()
    _log_in(browser, live_server, "viewer")
    browser.get(f"{live_server.url}/admin/scheduler/run/")
    assert browser.find_elements(By.NAME, "action") == []


def test_a_runs_page_tells_its_story__a_fenced_out_repair_says_nothing_changed(browser, live_server):
    User.objects.create_superuser("ops", "ops@example.com", "pw")
    parked = factories.parked_run(max_attempts=1)
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.failed_result("play_failed", "it broke"))
    head = one("SELECT event_id FROM outbox WHERE run_id = %s ORDER BY created_at LIMIT 1", [parked.run_id])
    query("UPDATE outbox SET failed_at = now(), last_error = 'receiver answered 500' WHERE event_id = %s", [head])
    _log_in(browser, live_server, "ops")
    browser.get(f"{live_server.url}/admin/scheduler/run/?status__exact=failed")
    browser.find_element(By.LINK_TEXT, parked.run_id).click()
    story = browser.find_element(By.CSS_SELECTOR, ".field-story_facts").text
    assert "run.failed" in story and "failed head" in story
    assert "play_failed" in browser.find_element(By.CSS_SELECTOR, ".field-story_attempts").text
    if os.environ.get("SCHEDULER_SCREENSHOTS"):
        browser.save_screenshot(str(Path(__file__).resolve().parents[2] / "docs" / "run-page.png"))
    for expected in ("requeued", "nothing changed"):  # the second time its fence refuses: the head is no longer failed
        browser.get(f"{live_server.url}/admin/scheduler/outboxfact/?q={head}")
        browser.find_element(By.CSS_SELECTOR, "input.action-select").click()
        Select(browser.find_element(By.NAME, "action")).select_by_value("requeue_failed_heads")
        browser.find_element(By.CSS_SELECTOR, "button[name=index]").click()
        assert expected in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    browser.get(f"{live_server.url}/admin/scheduler/operatoraction/")
    audit = browser.find_element(By.ID, "result_list").text
    assert audit.count("requeue_outbox_head") == 2


ACTIONS = {
    # action -> (admin list, how to make a row it acts on, what the message says)
    "unblock_cleanup_jobs": ("cleanupjobrow", "INSERT INTO sandbox_cleanup_jobs_v2 (provider, sandbox_id, run_id, attempt, "
                             "environment, status) VALUES ('local', 'sb-ui', 'run-ui', 1, 'production', 'blocked')",
                             "unblocked"),
    "redrive_cleanup_jobs": ("cleanupjobrow", "INSERT INTO sandbox_cleanup_jobs_v2 (provider, sandbox_id, run_id, attempt, "
                             "environment, available_at) VALUES ('local', 'sb-ui', 'run-ui', 1, 'production', "
                             "now() + interval '1 hour')", "due now"),
    "close_releases": ("releaseadmission", "INSERT INTO runtime_release_admission (release_id, accepting, admission_epoch) "
                       "VALUES ('rel-ui', true, 3)", "closed at epoch 3"),
    "open_releases": ("releaseadmission", "INSERT INTO runtime_release_admission (release_id, accepting, admission_epoch) "
                      "VALUES ('rel-ui', false, 3)", "accepting at epoch 3"),
}


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_each_repair_runs_from_its_list(browser, live_server, action):
    User.objects.create_superuser("ops", "ops@example.com", "pw")
    page, seed, expected = ACTIONS[action]
    query(seed)
    _log_in(browser, live_server, "ops")
    browser.get(f"{live_server.url}/admin/scheduler/{page}/")
    browser.find_element(By.CSS_SELECTOR, "input.action-select").click()
    Select(browser.find_element(By.NAME, "action")).select_by_value(action)
    browser.find_element(By.CSS_SELECTOR, "button[name=index]").click()
    assert expected in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    assert one("SELECT count(*) FROM operator_actions WHERE changed") == 1


def test_declaring_a_stuck_runner_lost_from_the_run_list(browser, live_server):
    User.objects.create_superuser("ops", "ops@example.com", "pw")
    stuck = factories.parked_run(max_attempts=1)
    _log_in(browser, live_server, "ops")
    browser.get(f"{live_server.url}/admin/scheduler/run/?status__exact=waiting")
    browser.find_element(By.CSS_SELECTOR, "input.action-select").click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("declare_runners_lost")
    browser.find_element(By.CSS_SELECTOR, "button[name=index]").click()
    assert "runner declared lost" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    assert one("SELECT status FROM runs WHERE run_id = %s", [stuck.run_id]) == "failed"


def test_a_paused_org_on_the_dashboard__its_page_resumes_it__audited(browser, live_server):
    from scheduler.fairshare import limits

    User.objects.create_superuser("ops", "ops@example.com", "pw")
    factories.launch(org_id="org-flood")
    limits.change("org-flood", limits.LimitsChange(paused=True, reason="flood"), actor="test",
                  action="org_limits_pause")
    _log_in(browser, live_server, "ops")
    browser.find_element(By.ID, "scheduler-dashboard").find_element(By.PARTIAL_LINK_TEXT, "org-flood: paused").click()
    assert "Queued runs" in browser.page_source
    browser.find_element(By.NAME, "max_active").send_keys("5")
    paused = browser.find_element(By.NAME, "paused")
    if paused.is_selected():
        paused.click()
    browser.find_element(By.NAME, "_save").click()
    browser.find_element(By.CSS_SELECTOR, "ul.messagelist")
    assert one("SELECT max_active, paused FROM org_limits WHERE org_id = 'org-flood'") == (5, False)
    assert one("SELECT actor FROM operator_actions ORDER BY id DESC LIMIT 1") == "admin:ops"


@pytest.mark.requirement("TSK-3")
def test_a_failed_task_found_by_its_queue__its_page_names_the_exception(browser, live_server, settings):
    """TSK-3 in the admin: the runs list's "task queue" filter finds a task; its page shows the task's error."""
    from tests.taskbackend import tasks
    from tests.taskbackend.support import TEST_TASKS

    settings.TASKS = {"default": {**TEST_TASKS["default"], "QUEUES": ["default", "mail"]}}
    User.objects.create_superuser("ops", "ops@example.com", "pw")
    failed = tasks.noop_task.using(queue_name="mail").enqueue()
    tasks.noop_task.enqueue()
    claim = factories.claim(failed.id)
    from scheduler.runs import settlement

    settlement.settle_attempt(failed.id, claim.attempt, claim.lease_token, {
        "status": "failed", "error": {"code": "play_failed", "message": "ValueError: no such mailbox",
                                      "exceptionClassPath": "builtins.ValueError", "traceback": "ValueError: no such mailbox\n"}})
    _log_in(browser, live_server, "ops")
    browser.get(f"{live_server.url}/admin/scheduler/run/")
    browser.find_element(By.PARTIAL_LINK_TEXT, "mail").click()
    rows = browser.find_element(By.ID, "result_list").text
    assert failed.id in rows and rows.count("tests.taskbackend.tasks:noop_task") == 1
    browser.find_element(By.LINK_TEXT, failed.id).click()
    assert "no such mailbox" in browser.page_source


@pytest.mark.requirement("WAIT-7")
def test_a_waiting_run_found_by_its_filter__its_wait_told__ended_from_the_list__audited(browser, live_server):
    from tests.waits.conftest import suspended_run

    User.objects.create_superuser("ops", "ops@example.com", "pw")
    waiting = suspended_run()
    factories.parked_run()  # parked on its runner: not waiting durably, so not listed
    _log_in(browser, live_server, "ops")
    browser.get(f"{live_server.url}/admin/scheduler/run/")
    browser.find_element(By.LINK_TEXT, "an event").click()
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(rows) == 1 and waiting.run_id in rows[0].text
    rows[0].find_element(By.PARTIAL_LINK_TEXT, waiting.run_id).click()
    assert browser.find_element(By.XPATH, "//table[@class='run-story']//td[text()='wait approval']")
    browser.back()
    browser.find_element(By.CSS_SELECTOR, "input.action-select").click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("end_waits")
    browser.find_element(By.CSS_SELECTOR, "button[name=index]").click()
    assert "resumed" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    assert one("SELECT status FROM runs WHERE run_id = %s", [waiting.run_id]) == "queued"
    assert one("SELECT actor FROM operator_actions WHERE action = 'end_wait'") == "admin:ops"
