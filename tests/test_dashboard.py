#!/usr/bin/env python3
"""test_dashboard: the web dashboard (host/dashboard/) in headless Chromium,
driven through Selenium (Debian's chromium, chromium-driver and
python3-selenium, which .ci/deps installs), against a real `duro run` of
the order-flow example with a queue, its dead-letter queue, a nightly
cron and the chaos plugin's workflow (an event wait of another type).
Offline: the host listens on 127.0.0.1, the page loads nothing else.

It checks that the list shows the instances created over the API, that the
status filter, the id-prefix search, a creation time range and a search
attribute work (the
API answers them; they stay in the URL across a reload), that the list has
its columns (each row's step, its attempts and what it waits for: an
event, a retry's time, a sleep's end, none once ended), that the detail page shows a
retried step's attempts in order and the events an instance received
(which step consumed each, or pending), that the health page draws the
steps completed before it opened from the host's history at its first
render, that an instance's page follows its event stream (no poll while it is
open; an event sent over the API shows as it commits), that pause and
resume from the page
change the status (read back over the API), that the page offers only the
actions the status allows (Resume, not Pause, once paused; only the
restarts once ended) and changes them as the status does, that the event
form has the type the instance waits for (that of the chaos plugin's
workflow, "go", too) and none when it waits for no event, that a restart
from a chosen step does, that browsing the dead-letter queue leaves its message's
attempts as they were (read over the API before and after), that a
pipeline's card shows the records sent over the API (accepted, waiting,
their bytes) and follows a later send, and that one whose file was
written shows it written, that an
error of the API (an event whose payload is not JSON: 400) is shown on
the page, that a listener
with a token asks for it, that the page fits a 375 px screen, and that the
browser logged no error but the ones those refusals cause.  It checks too
that rows selected in the list (from the keyboard, or the whole page) are
acted on through the bulk API (terminate, restart: the confirmation names
how many and what, the skipped ones said; the job's progress shown to its
end; the list then shows the change, read back over the API too), and
every instance the filter passes after a dry run's count (pause); and that
an instance's page shows its search attributes (none for a workflow
without an index).  Screenshots of
every page at 1280x800 and 375 px wide go to ARTEFACT_DIR.

Usage: test_dashboard.py DURO_BIN ORDERS_PLUGIN NIGHTLY_PLUGIN CHAOS_PLUGIN FANOUT_PLUGIN ARTEFACT_DIR
Prints one line "test_dashboard: pass" or "test_dashboard: FAIL: why"."""
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import (NoSuchElementException,
                                        StaleElementReferenceException,
                                        TimeoutException)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

DURO, ORDERS, NIGHTLY, CHAOS, FANOUT, ARTEFACTS = sys.argv[1:7]
WF = "order-flow"
TOKEN = "dash-Token_1"
VIEWER = "dash-Viewer_1"


# A read-only key limited to two workflows (a fan-out's children, of a
# third, not among them) and one queue (the token host's).
LIMITED_KEY = """  keys:
    - {name: viewer, token_env: DASH_VIEWER, scopes: [read],
       workflows: [order-flow, fan-out], queues: [jobs]}"""


class Host:
    """`duro run` on a config of its own in `tmp`, stopped by stop()."""

    def __init__(self, tmp, name, token=False):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        config = os.path.join(self.dir, "duro.yaml")
        with open(config, "w") as f:
            f.write(f"""storage:
  path: {self.dir}/duro.db
  synchronous: normal
http:
  listen: 127.0.0.1:0
{"  token_env: DASH_TOKEN" if token else ""}
{LIMITED_KEY if token else ""}
engine:
  workers: 2
plugins:
  - name: orders
    path: {ORDERS}
    workflows:
      - {{name: order-flow, binding: ORDER_FLOW, class_name: OrderFlow,
          index: [{{name: order, from: /orderId}}]}}
    queues:
      producers: [{{binding: JOBS, queue: jobs}}]
      consumers:
        - {{queue: jobs, max_retries: 1, dead_letter_queue: jobs-dlq}}
  - name: nightly
    path: {NIGHTLY}
    workflows:
      - {{name: nightly-report, binding: REPORT, class_name: Report}}
    triggers:
      crons: ["0 3 * * *"]
  - name: chaos
    path: {CHAOS}
    workflows:
      - {{name: chaos, binding: CHAOS, class_name: Chaos}}
      - {{name: paced, binding: PACED, class_name: Chaos,
          flow: {{concurrency: [{{key: /k, limit: 1}}]}}}}
      - {{name: batched, binding: BATCHED, class_name: Chaos,
          flow: {{debounce: {{key: /k, period: 1h}}}}}}
  - name: fanout
    path: {FANOUT}
    workflows:
      - {{name: fan-out, binding: FAN_OUT, class_name: FanOut}}
      - {{name: square, binding: SQUARE, class_name: Square}}
pipelines:
  - name: events
    binding: EVENTS
    sink: {{files: {{path: {self.dir}/events}}}}
    roll: {{interval: 1d}}
  - name: clicks
    binding: CLICKS
    sink: {{files: {{path: {self.dir}/clicks}}}}
    roll: {{interval: 1s}}
""")
        self.log = os.path.join(self.dir, "duro.log")
        env = dict(os.environ, DASH_TOKEN=TOKEN, DASH_VIEWER=VIEWER)
        self.token = TOKEN if token else None
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([DURO, "run", config], stdout=out,
                                         stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 20
        while time.time() < deadline:
            m = re.search(r"http on port (\d+)", open(self.log).read())
            if m:
                self.base = f"http://127.0.0.1:{m.group(1)}"
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError("duro run never said ready:\n" + open(self.log).read())

    def api(self, method, path, body=None):
        """(status, JSON) of one request."""
        data = None if body is None else (
            body if isinstance(body, str) else json.dumps(body)).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                text = r.read().decode()
                return r.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read().decode() or "null")

    def status(self, iid, wf=WF):
        return self.api("GET", f"/workflows/{wf}/instances/{iid}/status")[1]["status"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def browser(profile):
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu",
              "--disable-dev-shm-usage", f"--user-data-dir={profile}",
              "--window-size=1280,800", "--no-first-run",
              "--disable-background-networking", "--disable-sync",
              "--disable-component-update", "--disable-default-apps"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    d = webdriver.Chrome(service=service, options=opts)
    d.set_window_size(1280, 800)
    return d


def wait_for(d, what, fn, timeout=15):
    """fn() once it is true; the page re-renders its data as it polls, so
    an element found a moment ago may be gone: that is tried again."""
    try:
        return WebDriverWait(d, timeout, poll_frequency=0.1,
                             ignored_exceptions=[StaleElementReferenceException,
                                                 NoSuchElementException]
                             ).until(lambda _: fn())
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what}") from None


def rows(d):
    """The instance ids the list shows (read at once, in the page)."""
    return d.execute_script(
        "return [...document.querySelectorAll('#instance-rows tr[data-id]')]"
        ".map((r) => r.dataset.id)")


def cells(d, iid):
    """The texts of the list's row of `iid`, by its column's heading."""
    return d.execute_script(
        "const heads = [...document.querySelectorAll('#instances thead th')]"
        ".map((th) => th.textContent);"
        "const row = document.querySelector(`#instance-rows tr[data-id=\"${arguments[0]}\"]`);"
        "if (!row) return null;"
        "return Object.fromEntries([...row.children].map((td, k) => [heads[k], td.textContent]));",
        iid)


def shown_actions(d):
    """The ids of the action controls the page shows (not hidden)."""
    return d.execute_script(
        "return [...document.querySelectorAll('#main button[id^=act-]')]"
        ".filter((b) => b.offsetParent !== null).map((b) => b.id)")


def answer_text(d):
    return d.find_element(By.ID, "answer").text


def confirm(d, button_id):
    """Clicks an action, checks the confirmation says what it will send,
    confirms, and returns the answer shown."""
    d.find_element(By.ID, button_id).click()
    text = wait_for(d, "the confirmation",
                    lambda: d.find_element(By.ID, "confirm").is_displayed()
                    and d.find_element(By.ID, "confirm").text)
    assert "Confirm" in text, text
    # the last answer's text may be this one's too (two PATCHes that both
    # answer "queued"): a marker the new answer replaces tells them apart
    d.execute_script("document.getElementById('answer').textContent = '…'")
    # Keyboard: Confirm has the focus; Enter presses it.
    assert d.switch_to.active_element.get_attribute("id") == "confirm-yes"
    d.switch_to.active_element.send_keys(Keys.ENTER)
    return wait_for(d, "the API's answer",
                    lambda: answer_text(d) not in ("", "…") and answer_text(d)), text


def confirm_leaving(d, button_id):
    """As confirm, for an action after which the page leaves (a delete):
    the confirmation's text, once confirmed."""
    d.find_element(By.ID, button_id).click()
    text = wait_for(d, "the confirmation",
                    lambda: d.find_element(By.ID, "confirm").is_displayed()
                    and d.find_element(By.ID, "confirm").text)
    assert d.switch_to.active_element.get_attribute("id") == "confirm-yes"
    d.switch_to.active_element.send_keys(Keys.ENTER)
    return text


def viewport(d, width, height):
    """The page's viewport exactly, as a device of that size has it."""
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height,
                       "deviceScaleFactor": 1, "mobile": width < 600})


def shot(d, name):
    """The whole page (beyond the viewport) as ARTEFACTS/NAME.png."""
    png = d.execute_cdp_cmd("Page.captureScreenshot",
                            {"format": "png", "captureBeyondViewport": True})
    with open(os.path.join(ARTEFACTS, name + ".png"), "wb") as f:
        f.write(base64.b64decode(png["data"]))


def severe_logs(d, allowed):
    """Browser log entries of level SEVERE that no pattern in `allowed`
    explains."""
    bad = []
    for e in d.get_log("browser"):
        if e["level"] == "SEVERE" and not any(re.search(p, e["message"]) for p in allowed):
            bad.append(e["message"])
    return bad


def bulk_shown(d):
    """The bulk actions the selection bar offers (not hidden)."""
    return d.execute_script(
        "return [...document.querySelectorAll('#bulk-selected button[id^=bulk-]')]"
        ".filter((b) => b.offsetParent !== null && b.id !== 'bulk-clear')"
        ".map((b) => b.id.slice(5))")


def bulk_confirm(d, button_id):
    """Clicks a bulk action, confirms it from the keyboard; the
    confirmation's text, then the job's progress once it has ended."""
    d.find_element(By.ID, button_id).click()
    text = wait_for(d, "the bulk confirmation",
                    lambda: d.find_element(By.ID, "bulk-confirm").is_displayed()
                    and d.find_element(By.ID, "bulk-confirm").text)
    d.execute_script("document.getElementById('bulk-progress').textContent = ''")
    assert d.switch_to.active_element.get_attribute("id") == "bulk-confirm-yes"
    d.switch_to.active_element.send_keys(Keys.ENTER)
    done = wait_for(d, "the bulk job's end",
                    lambda: re.search(r"· (done|cancelled)",
                                      d.find_element(By.ID, "bulk-progress").text)
                    and d.find_element(By.ID, "bulk-progress").text)
    return text, done


def bulk_actions(d, h):
    """Rows selected (from the keyboard, and the whole page) and acted on
    through the bulk API: confirmed naming how many and what, the job's
    progress followed to its end, the list then showing the change; then
    every instance the filter passes, counted first.  And an instance's
    search attributes on its page."""
    ids = ["bulk-1", "bulk-2", "bulk-3", "bulk-4"]
    for iid in ids:
        assert h.api("POST", f"/workflows/{WF}/instances",
                     {"id": iid, "params": {"orderId": f"O-{iid}", "email": "a@b.c",
                                            "amount": 10}})[0] == 201
    deadline = time.time() + 15
    while any(h.status(i) != "waiting" for i in ids):
        assert time.time() < deadline, "the bulk orders never waited"
        time.sleep(0.1)
    d.get(h.base + f"/#/wf/{WF}?prefix=bulk-")
    wait_for(d, "the four orders", lambda: sorted(rows(d)) == ids)
    assert not d.find_element(By.ID, "bulk-selected").is_displayed()
    # two picked from the keyboard (Space on each row's box)
    for iid in ("bulk-1", "bulk-2"):
        box = d.find_element(By.CSS_SELECTOR, f'input.pick[data-id="{iid}"]')
        box.send_keys(Keys.SPACE)
        assert d.switch_to.active_element.get_attribute("data-id") == iid
    wait_for(d, "two selected", lambda: d.find_element(By.ID, "bulk-count").text == "2 selected")
    # the focus stays on its box across the list's redraw (every 2 s)
    time.sleep(2.5)
    assert d.switch_to.active_element.get_attribute("data-id") == "bulk-2"
    assert sorted(bulk_shown(d)) == ["pause", "terminate"], bulk_shown(d)
    assert d.find_element(By.ID, "select-page").get_attribute("indeterminate") == "true"
    shot(d, "bulk-selected-desktop")
    what, done = bulk_confirm(d, "bulk-terminate")
    assert "Terminate 2 selected instances of order-flow" in what, what
    assert f"POST /workflows/{WF}/bulk" in what and '"ids":["bulk-1","bulk-2"]' in what, what
    assert "2 of 2 · 2 done, 0 skipped, 0 failed" in done, done
    # the bar went with the selection: the focus is on the progress
    wait_for(d, "the focus on the job's progress",
             lambda: d.switch_to.active_element.get_attribute("id") == "bulk-progress")
    assert h.status("bulk-1") == "terminated" and h.status("bulk-2") == "terminated"
    assert h.status("bulk-3") == "waiting"

    def row_status(iid):
        return d.find_element(By.CSS_SELECTOR, f'#instance-rows tr[data-id="{iid}"] .badge').text
    wait_for(d, "the list showing them terminated",
             lambda: row_status("bulk-1") == "terminated" and row_status("bulk-2") == "terminated")
    assert not d.find_element(By.ID, "bulk-selected").is_displayed()
    shot(d, "bulk-done-desktop")
    # the whole page: restart applies to the two ended ones alone
    d.find_element(By.ID, "select-page").click()
    wait_for(d, "four selected", lambda: d.find_element(By.ID, "bulk-count").text == "4 selected")
    assert sorted(bulk_shown(d)) == ["delete", "pause", "restart", "terminate"], bulk_shown(d)
    what, done = bulk_confirm(d, "bulk-restart")
    assert "Restart 4 selected instances" in what and "2 of them are skipped (restart does not apply to waiting)" in what, what
    assert "4 of 4 · 2 done, 2 skipped, 0 failed" in done, done
    wait_for(d, "the restarted ones waiting again",
             lambda: h.status("bulk-1") == "waiting" and h.status("bulk-2") == "waiting")
    restarts = {i: h.api("GET", f"/workflows/{WF}/instances/{i}")[1]["restarts"] for i in ids}
    assert restarts == {"bulk-1": 1, "bulk-2": 1, "bulk-3": 0, "bulk-4": 0}, restarts
    wait_for(d, "the list showing them waiting",
             lambda: row_status("bulk-1") == "waiting" and row_status("bulk-2") == "waiting")
    # every instance the filter passes: counted by a dry run, then paused
    d.find_element(By.CSS_SELECTOR, "#bulk-all summary").click()
    Select(d.find_element(By.ID, "bulk-all-action")).select_by_value("pause")
    what, done = bulk_confirm(d, "bulk-all-count")
    assert "Pause every instance of order-flow with prefix bulk-: 4 instances match now" in what, what
    assert '"filter":{"prefix":"bulk-"}' in what, what
    assert "4 of 4 · 4 done" in done, done
    assert [h.status(i) for i in ids] == ["paused"] * 4
    wait_for(d, "the list showing them paused",
             lambda: all(row_status(i) == "paused" for i in ids))
    viewport(d, 375, 800)
    d.find_element(By.ID, "select-page").click()
    wait_for(d, "four selected on a phone", lambda: d.find_element(By.ID, "bulk-count").text == "4 selected")
    width = d.execute_script("return document.documentElement.scrollWidth")
    assert width <= 375, f"the list with its selection is {width} px wide at 375 px"
    shot(d, "bulk-phone")
    viewport(d, 1280, 800)
    # an instance's search attributes, near the top of its page
    d.get(h.base + f"/#/wf/{WF}/i/bulk-3")
    shown = wait_for(d, "its search attributes",
                     lambda: d.find_element(By.ID, "instance-attributes").text)
    assert shown == "order O-bulk-3", shown
    shot(d, "attributes-desktop")
    d.get(h.base + f"/#/wf/{WF}")
    wait_for(d, "the list again", lambda: rows(d))


def error_banners(d):
    """The texts of the page's error lines that say something."""
    return d.execute_script(
        "return [...document.querySelectorAll('#main .error')]"
        ".filter((e) => e.offsetParent !== null && e.textContent.trim())"
        ".map((e) => e.textContent)")


def as_viewer(t, path):
    """(status, JSON) of GET path with the limited key's token."""
    req = urllib.request.Request(t.base + path)
    req.add_header("Authorization", "Bearer " + VIEWER)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode() or "null")


def limited_key(t, profile, drivers):
    """A read-only key limited to order-flow and fan-out and the queue
    jobs: the home, list, instance, queues, crons, plugins and health
    pages show its part with no error line, and offer no control (start,
    bulk, actions, redrive); a fan-out's children (square, not on its
    list) are left out of its describe, and shown to the admin key."""
    order = {"orderId": "V-1", "email": "a@b.c", "amount": 10}
    assert t.api("POST", f"/workflows/{WF}/instances",
                 {"id": "view-1", "params": order})[0] == 201
    assert t.api("POST", "/workflows/fan-out/instances",
                 {"id": "fan-1", "params": {"n": 2}})[0] == 201
    deadline = time.time() + 15
    while t.status("fan-1", "fan-out") != "complete":
        assert time.time() < deadline, "the fan-out never completed"
        time.sleep(0.1)
    kids = t.api("GET", "/workflows/fan-out/instances/fan-1")[1]["children"]
    assert [k["workflow"] for k in kids] == ["square", "square"], kids
    status, seen = as_viewer(t, "/workflows/fan-out/instances/fan-1")
    assert status == 200 and seen["children"] == [], (status, seen)
    status, seen = as_viewer(t, f"/workflows/square/instances/{kids[0]['id']}")
    assert status == 403 and seen["error"]["workflow"] == "square", (status, seen)
    d = browser(profile)
    drivers.append(d)
    d.get(t.base + "/")
    wait_for(d, "the token form",
             lambda: d.find_element(By.ID, "token-form").is_displayed())
    field = d.find_element(By.ID, "token-input")
    field.send_keys(VIEWER)
    field.send_keys(Keys.ENTER)
    wait_for(d, "the key's workflow", lambda: d.find_elements(By.LINK_TEXT, WF))
    cards = d.execute_script(
        "return [...document.querySelectorAll('[data-workflow]')].map((c) => c.dataset.workflow)")
    assert cards == [WF, "fan-out"], f"the limited key's home shows {cards}"
    assert not error_banners(d), error_banners(d)
    shot(d, "limited-home")

    d.get(t.base + f"/#/wf/{WF}")
    wait_for(d, "the list for the limited key", lambda: "view-1" in rows(d))
    assert not error_banners(d), error_banners(d)
    assert not d.find_elements(By.ID, "start"), "a read key is offered Start"
    assert not d.find_element(By.ID, "bulk").is_displayed(), "a read key is offered bulk actions"
    assert not d.find_element(By.ID, "select-page").is_displayed(), "a read key picks rows"
    shot(d, "limited-list")

    d.get(t.base + f"/#/wf/{WF}/i/view-1")
    wait_for(d, "the instance for the limited key",
             lambda: d.find_element(By.ID, "instance-status").text)
    time.sleep(0.3)  # a refresh after the first render may offer actions
    assert shown_actions(d) == [], f"a read key is offered {shown_actions(d)}"
    assert not d.find_element(By.ID, "actions").is_displayed()
    assert not error_banners(d), error_banners(d)
    shot(d, "limited-instance")

    d.get(t.base + "/#/queues")
    wait_for(d, "the limited key's queues",
             lambda: d.find_elements(By.CSS_SELECTOR, "#queue-rows tr[data-queue]"))
    queues = d.execute_script(
        "return [...document.querySelectorAll('#queue-rows tr[data-queue]')].map((r) => r.dataset.queue)")
    assert queues == ["jobs"], f"the limited key's queues: {queues}"
    assert not error_banners(d), error_banners(d)

    for page, sel in (("crons", "#cron-rows tr"), ("plugins", "#plugin-list [data-plugin]"),
                      ("health", "#host-rows")):
        d.get(t.base + f"/#/{page}")
        wait_for(d, f"the limited key's {page} page",
                 lambda: d.find_elements(By.CSS_SELECTOR, sel))
        time.sleep(0.3)
        assert not error_banners(d), f"{page}: {error_banners(d)}"
        shot(d, f"limited-{page}")
        if page == "plugins":
            plugins = d.execute_script(
                "return [...document.querySelectorAll('[data-plugin]')].map((p) => p.dataset.plugin)")
            assert plugins == ["orders", "fanout"], f"the limited key's plugins: {plugins}"
    assert d.find_elements(By.ID, "charts-note"), "the health page names no note on its charts"
    bad = severe_logs(d, [r"/healthz .*401"])
    assert not bad, "browser errors for the limited key:\n" + "\n".join(bad)


def main():
    os.makedirs(ARTEFACTS, exist_ok=True)
    for f in os.listdir(ARTEFACTS):
        if f.endswith(".png"):
            os.remove(os.path.join(ARTEFACTS, f))
    tmp = tempfile.mkdtemp(prefix="duro-dashboard-")
    hosts, drivers = [], []
    try:
        h = Host(tmp, "open")
        hosts.append(h)
        # Instances over the API: a card that fails once (a retried
        # step), orders that wait for their review, one terminated.
        order = {"orderId": "A-1", "email": "a@b.c", "amount": 10}
        assert h.api("POST", f"/workflows/{WF}/instances",
                     {"id": "flaky-1", "params": dict(order, flakyCard=True)})[0] == 201
        ids = ["wait-1", "batch-a-1", "batch-a-2", "batch-b-1", "term-1"]
        for iid in ids:  # batch-b-1 of another order (a search attribute)
            params = dict(order, orderId="B-1") if iid == "batch-b-1" else order
            assert h.api("POST", f"/workflows/{WF}/instances",
                         {"id": iid, "params": params})[0] == 201
        deadline = time.time() + 15
        while any(h.status(i) != "waiting" for i in ids):
            assert time.time() < deadline, "the orders never waited for review"
            time.sleep(0.1)
        # runs of the chaos workflow: one waits for an event of type
        # "go", one sleeps an hour
        for iid, params in (("go-1", {"steps": 1, "events": 1}),
                            ("go-2", {"steps": 1, "events": 1}),
                            ("nap-1", {"steps": 1, "nap_every": 1,
                                       "nap_ms": 3600000})):
            assert h.api("POST", "/workflows/chaos/instances",
                         {"id": iid, "params": params})[0] == 201
        while any(h.status(i, "chaos") != "waiting" for i in ("go-1", "go-2", "nap-1")):
            assert time.time() < deadline, "the chaos runs never waited"
            time.sleep(0.1)
        assert h.api("PATCH", f"/workflows/{WF}/instances/term-1/status",
                     {"status": "terminate"})[0] == 200
        assert h.api("POST", "/queues/jobs/messages", {"body": {"job": 1}})[0] == 201
        assert h.api("POST", "/queues/jobs-dlq/messages",
                     {"body": {"job": "dead"}})[0] == 201
        assert h.api("POST", "/__scheduled?cron=0+3+*+*+*")[0] == 200

        d = browser(os.path.join(tmp, "profile"))
        drivers.append(d)
        viewport(d, 1280, 800)
        d.get(h.base + "/")
        wait_for(d, "the workflow cards",
                 lambda: d.find_elements(By.LINK_TEXT, WF))
        # the home's last hour of each workflow: term-1 terminated, the
        # orders waiting (none ended otherwise), a bar for that minute
        def figure(name):
            return d.find_element(
                By.CSS_SELECTOR,
                f'section[data-workflow="{WF}"] [data-figure="{name}"] .figure-value').text
        wait_for(d, "the last hour's figures",
                 lambda: d.find_elements(By.CSS_SELECTOR,
                                         f'section[data-workflow="{WF}"] [data-figure]'))
        assert figure("terminated") == "1", figure("terminated")
        assert figure("completed") == "0", figure("completed")
        assert figure("backlog") == "0", figure("backlog")
        bars = d.find_elements(By.CSS_SELECTOR,
                               f'section[data-workflow="{WF}"] svg.hour rect[data-kind="terminated"]')
        assert len(bars) == 1, len(bars)
        assert "1 terminated" in bars[0].find_element(By.TAG_NAME, "title").get_attribute("textContent")
        shot(d, "home-desktop")
        d.find_element(By.LINK_TEXT, WF).click()
        want = set(ids) | {"flaky-1"}
        wait_for(d, "every instance in the list", lambda: want <= set(rows(d)))
        counts = d.find_element(By.CSS_SELECTOR, ".counts").text
        assert "terminated 1" in counts and "all 6" in counts, counts
        # live: an instance created now shows up without a reload
        assert h.api("POST", f"/workflows/{WF}/instances",
                     {"id": "live-1", "params": order})[0] == 201
        wait_for(d, "the new instance, newest first",
                 lambda: rows(d)[:1] == ["live-1"])
        shot(d, "list-desktop")
        # each row's step, its attempts and what it waits for: an order in
        # its review, for the event; the card that failed once, its retry
        # (or, past it, its review); the terminated one's last step
        c = cells(d, "wait-1")
        assert (c["Step"], c["Attempts"], c["Waiting for"]) == (
            "manual review#1", "0", "approval"), c
        c = cells(d, "flaky-1")
        assert (c["Step"] == "charge card#1" and c["Attempts"] == "1"
                and c["Waiting for"].startswith("retry at ")) or (
            c["Step"] == "manual review#1" and c["Waiting for"] == "approval"), c
        c = cells(d, "term-1")
        assert c["Step"] and c["Waiting for"] == "", c

        # the status filter
        Select(d.find_element(By.ID, "status-filter")).select_by_value("terminated")
        wait_for(d, "only the terminated instance", lambda: rows(d) == ["term-1"])
        Select(d.find_element(By.ID, "status-filter")).select_by_value("")
        wait_for(d, "every instance again", lambda: want <= set(rows(d)))
        # the id-prefix search, from the keyboard, answered by the API and
        # kept in the URL: a reload shows the same filtered list
        box = d.find_element(By.ID, "id-prefix")
        box.send_keys("batch-a")
        box.send_keys(Keys.ENTER)
        wait_for(d, "the prefix matches",
                 lambda: sorted(rows(d)) == ["batch-a-1", "batch-a-2"])
        assert "prefix=batch-a" in d.current_url, d.current_url
        assert "prefix batch-a" in d.find_element(By.ID, "list-note").text
        d.refresh()
        wait_for(d, "the filter kept across a reload",
                 lambda: sorted(rows(d)) == ["batch-a-1", "batch-a-2"]
                 and d.find_element(By.ID, "id-prefix").get_attribute("value") == "batch-a")
        heads = [th.text for th in d.find_elements(By.CSS_SELECTOR, "#instances thead th")]
        assert heads == ["", "Instance", "Status", "Created", "Started", "Ran for",
                         "Step", "Attempts", "Waiting for"], heads
        # a creation time range: none was created in 2099
        d.execute_script("document.getElementById('created-after').value = '2099-01-01T00:00'")
        d.find_element(By.ID, "find").click()
        wait_for(d, "no instance created in 2099",
                 lambda: "No instances match" in d.find_element(By.ID, "instance-rows").text)
        assert "created_after=2099" in d.current_url, d.current_url
        d.execute_script("document.getElementById('created-after').value = ''")
        d.find_element(By.ID, "id-prefix").clear()
        # a search attribute (the workflow's index), kept in the URL too
        box = d.find_element(By.ID, "where-filter")
        box.send_keys("order:B-1")
        box.send_keys(Keys.ENTER)
        wait_for(d, "the attribute matches", lambda: rows(d) == ["batch-b-1"])
        assert "where=order%3AB-1" in d.current_url, d.current_url
        d.refresh()
        wait_for(d, "the attribute kept across a reload",
                 lambda: rows(d) == ["batch-b-1"]
                 and d.find_element(By.ID, "where-filter").get_attribute("value") == "order:B-1")
        d.find_element(By.ID, "where-filter").clear()
        d.find_element(By.ID, "find").click()
        wait_for(d, "every instance once the filters are cleared",
                 lambda: want <= set(rows(d)))
        # start an instance from the page: params that are no JSON are
        # refused there, good ones create it and its page opens
        d.find_element(By.CSS_SELECTOR, "#start summary").click()
        d.find_element(By.ID, "start-id").send_keys("ui-1")
        d.find_element(By.ID, "start-params").send_keys("{oops")
        d.find_element(By.ID, "act-start").click()
        wait_for(d, "the params refused",
                 lambda: "not JSON" in d.find_element(By.ID, "start-error").text)
        d.find_element(By.ID, "start-params").clear()
        d.find_element(By.ID, "start-params").send_keys(json.dumps(order))
        d.find_element(By.ID, "act-start").click()
        text = wait_for(d, "the confirmation",
                        lambda: d.find_element(By.ID, "confirm").is_displayed()
                        and d.find_element(By.ID, "confirm").text)
        assert f"POST /workflows/{WF}/instances" in text and "ui-1" in text, text
        d.find_element(By.ID, "confirm-yes").click()
        wait_for(d, "the new instance's page",
                 lambda: d.current_url.endswith(f"#/wf/{WF}/i/ui-1"))
        code, body = h.api("GET", f"/workflows/{WF}/instances/ui-1")
        assert code == 200 and body["params"] == order, (code, body)

        # pause and resume from the page, read back over the API; the
        # actions offered follow the status
        d.get(h.base + f"/#/wf/{WF}/i/wait-1")
        wait_for(d, "the detail page",
                 lambda: "waiting" in d.find_element(By.ID, "instance-status").text)
        acts = shown_actions(d)
        assert "act-pause" in acts and "act-resume" not in acts, acts
        assert "act-restart" not in acts and "act-event" in acts, acts
        # the event type is the one its review waits for
        assert d.find_element(By.ID, "event-type").get_attribute("value") == "approval"
        ans, what = confirm(d, "act-pause")
        assert "PATCH /workflows/order-flow/instances/wait-1/status" in what, what
        assert "Done" in ans, ans
        wait_for(d, "paused over the API", lambda: h.status("wait-1") == "paused")
        wait_for(d, "paused on the page",
                 lambda: "paused" in d.find_element(By.ID, "instance-status").text)
        wait_for(d, "Resume offered, not Pause, once paused",
                 lambda: "act-resume" in shown_actions(d)
                 and "act-pause" not in shown_actions(d), timeout=5)
        ans, _ = confirm(d, "act-resume")
        assert "Done" in ans, ans
        wait_for(d, "resumed over the API", lambda: h.status("wait-1") != "paused")
        wait_for(d, "waiting again", lambda: h.status("wait-1") == "waiting")
        # terminated with its rollbacks: the charge refunded and the stock
        # released first, shown as steps of their own
        ans, what = confirm(d, "act-terminate-rollback")
        assert '"rollback":true' in what, what
        assert "Done" in ans, ans
        wait_for(d, "terminated over the API", lambda: h.status("wait-1") == "terminated")
        wait_for(d, "the refund among the steps on the page",
                 lambda: "undoes charge card#1" in d.find_element(By.ID, "steps").text)
        # each rollback right under the step it undoes, indented (they ran
        # newest first: the refund before the release)
        wait_for(d, "both rollbacks on the page",
                 lambda: "undoes reserve stock#1" in d.find_element(By.ID, "steps").text)
        listed = d.find_elements(By.CSS_SELECTOR, "#steps .step")
        order = [(e.get_attribute("data-step"), "undoes" in e.get_attribute("class").split())
                 for e in listed]
        assert order[:4] == [("reserve stock", False), ("reserve stock#1", True),
                             ("charge card", False), ("charge card#1", True)], order
        assert listed[1].find_element(By.TAG_NAME, "h3").text.startswith("undoes reserve stock#1")
        indent = [float(e.value_of_css_property("margin-left").rstrip("px")) for e in listed[:2]]
        assert indent[1] > indent[0], indent

        # an ended instance offers restarts only
        d.get(h.base + f"/#/wf/{WF}/i/term-1")
        wait_for(d, "the terminated instance",
                 lambda: "terminated" in d.find_element(By.ID, "instance-status").text)
        assert sorted(shown_actions(d)) == ["act-delete", "act-restart", "act-restart-from"], shown_actions(d)
        # restart from a chosen step: the steps before it are kept
        Select(d.find_element(By.ID, "restart-from")).select_by_visible_text("charge card")
        ans, what = confirm(d, "act-restart-from")
        assert '"from":{"name":"charge card","count":1}' in what, what
        assert "Done" in ans, ans
        wait_for(d, "the restarted instance waiting again",
                 lambda: h.status("term-1") == "waiting")
        assert h.api("GET", f"/workflows/{WF}/instances/term-1")[1]["restarts"] == 1

        # the chaos workflow's list: a run waiting for "go", one asleep
        # until its hour is up
        d.get(h.base + "/#/wf/chaos")
        wait_for(d, "the chaos runs listed",
                 lambda: {"go-1", "nap-1"} <= set(rows(d)))
        c = cells(d, "go-1")
        assert c["Step"] and c["Waiting for"] == "go", c
        c = cells(d, "nap-1")
        assert c["Step"] and c["Waiting for"].startswith("until "), c

        # a workflow that waits for another event type: the form has that
        # type; the event sent from the page completes the run, and the
        # an instance's page follows its event stream, not polling: idle,
        # it asks for the instance no more; an event sent over the API
        # shows on it as committed
        d.get(h.base + "/#/wf/chaos/i/go-2")
        wait_for(d, "the waiting go-2",
                 lambda: "waiting" in d.find_element(By.ID, "instance-status").text)
        time.sleep(1)  # the first items' refresh is done
        d.execute_script("performance.clearResourceTimings()")
        time.sleep(3 * 2)  # three times the poll interval (POLL_MS)
        gets = d.execute_script(
            "return performance.getEntriesByType('resource').filter((e) => "
            "new URL(e.name).pathname === '/workflows/chaos/instances/go-2').length")
        assert gets == 0, f"the instance page polled {gets} times while its stream was open"
        assert h.api("POST", "/workflows/chaos/instances/go-2/events/go", {"k": 1})[0] == 202
        wait_for(d, "go-2 complete on the page",
                 lambda: "complete" in d.find_element(By.ID, "instance-status").text)
        # a workflow without an index: no attributes shown
        assert not d.find_elements(By.ID, "instance-attributes")

        # actions follow the status without a reload
        d.get(h.base + "/#/wf/chaos/i/go-1")
        wait_for(d, "the type the chaos run waits for in the form",
                 lambda: d.find_element(By.ID, "event-type").get_attribute("value") == "go")
        payload = d.find_element(By.ID, "event-payload")
        payload.clear()
        payload.send_keys('{"k": 1}')
        ans, what = confirm(d, "act-event")
        assert "POST /workflows/chaos/instances/go-1/events/go" in what, what
        assert "Done" in ans, ans
        wait_for(d, "the chaos run complete on the page",
                 lambda: "complete" in d.find_element(By.ID, "instance-status").text)
        assert h.status("go-1", "chaos") == "complete"
        wait_for(d, "only the restarts offered once complete",
                 lambda: sorted(shown_actions(d)) == ["act-delete", "act-restart", "act-restart-from"],
                 timeout=5)
        # not blocked on an event: no type, a placeholder
        d.get(h.base + "/#/wf/chaos/i/nap-1")
        wait_for(d, "the sleeping chaos run",
                 lambda: "waiting" in d.find_element(By.ID, "instance-status").text)
        etype = d.find_element(By.ID, "event-type")
        assert etype.get_attribute("value") == "", etype.get_attribute("value")
        assert etype.get_attribute("placeholder"), "no placeholder"
        assert "act-event" in shown_actions(d) and "act-pause" in shown_actions(d)
        # an error of the API is shown: a payload that is not JSON
        etype.send_keys("go")
        d.find_element(By.ID, "event-payload").send_keys("{")
        ans, _ = confirm(d, "act-event")
        assert "400" in ans and "request.invalid_json" in ans, ans
        assert d.find_element(By.ID, "answer").get_attribute("role") == "alert"
        assert h.status("nap-1", "chaos") == "waiting"
        # deleted from its page: a live one is terminated first (the
        # confirmation says so and asks for it), then the list opens and
        # the host has it no more
        what = confirm_leaving(d, "act-delete")
        assert "DELETE /workflows/chaos/instances/nap-1?terminate=true" in what, what
        assert "terminated first" in what, what
        wait_for(d, "the list after the delete",
                 lambda: d.current_url.endswith("#/wf/chaos"))
        assert h.api("GET", "/workflows/chaos/instances/nap-1")[0] == 404
        # an ended one: no terminate asked
        d.get(h.base + "/#/wf/chaos/i/go-1")
        wait_for(d, "the complete go-1",
                 lambda: "complete" in d.find_element(By.ID, "instance-status").text)
        what = confirm_leaving(d, "act-delete")
        assert "DELETE /workflows/chaos/instances/go-1\n" in what + "\n", what
        assert "terminate" not in what.split("\n")[1], what
        wait_for(d, "the list after the second delete",
                 lambda: d.current_url.endswith("#/wf/chaos"))
        assert h.api("GET", "/workflows/chaos/instances/go-1")[0] == 404

        # child workflows: the parent's page links its children, a
        # child's its parent
        assert h.api("POST", "/workflows/fan-out/instances",
                     {"id": "fan-1", "params": {"n": 3}})[0] == 201
        wait_for(d, "the fan-out complete",
                 lambda: h.status("fan-1", "fan-out") == "complete", timeout=30)
        d.get(h.base + "/#/wf/fan-out")
        wait_for(d, "fan-1 listed", lambda: "fan-1" in rows(d))
        c = cells(d, "fan-1")  # complete: its last step, waiting for none
        assert c["Step"] and c["Attempts"] and c["Waiting for"] == "", c
        d.get(h.base + "/#/wf/fan-out/i/fan-1")
        wait_for(d, "three children linked",
                 lambda: len(d.find_elements(By.CSS_SELECTOR, "#instance-children a.child")) == 3)
        d.find_elements(By.CSS_SELECTOR, "#instance-children a.child")[1].click()
        wait_for(d, "a child's page with its parent",
                 lambda: "/#/wf/square/i/" in d.current_url and
                 d.find_element(By.ID, "instance-parent").text == "fan-out/fan-1")
        d.find_element(By.CSS_SELECTOR, "#instance-parent a").click()
        wait_for(d, "back on the parent",
                 lambda: d.current_url.endswith("#/wf/fan-out/i/fan-1"))

        # the retried step: its attempts in order, the failed one first
        d.get(h.base + f"/#/wf/{WF}/i/flaky-1")

        def charge_attempts():
            """[[number, text]] of the charge's attempts, as shown."""
            return d.execute_script(
                "return [...document.querySelectorAll("
                "'.step[data-step=\"charge card\"] li.attempt')]"
                ".map((a) => [a.dataset.number, a.textContent])")
        wait_for(d, "the second attempt of the charge (after a 10 s back-off)",
                 lambda: len(charge_attempts()) >= 2, timeout=30)
        att = charge_attempts()
        assert [n for n, _ in att] == ["1", "2"], att
        assert "card issuer timed out" in att[0][1], att
        assert "back-off" in att[0][1], att
        assert "ok" in att[1][1], att
        # each attempt with the lines it logged (GET .../logs)
        assert "charging" in att[0][1] and "(attempt 1," in att[0][1], att
        assert "(attempt 2," in att[1][1] and "(attempt 1," not in att[1][1], att
        assert d.find_elements(By.CSS_SELECTOR, "#timeline rect.span-failed")
        assert d.find_elements(By.CSS_SELECTOR, "#timeline rect.span-backoff")
        shot(d, "detail-desktop")

        # queues: the counts, a dead-letter queue browsed
        d.get(h.base + "/#/queues")
        wait_for(d, "the queues",
                 lambda: d.find_elements(By.CSS_SELECTOR, 'tr[data-queue="jobs-dlq"]'))
        def dlq_looked_at():
            """[(id, attempts, leased)] of jobs-dlq, read over the API."""
            st, out = h.api("GET", "/queues/jobs-dlq/messages")
            assert st == 200, (st, out)
            return [(m["id"], m["attempts"], m["leased"]) for m in out["messages"]]
        before = dlq_looked_at()
        assert [a for _, a, _ in before] == [0], before
        for _ in range(2):  # browsed twice: a pull would count each one
            # the list goes, so the wait below sees this browse's answer
            d.execute_script("document.getElementById('queue-detail').replaceChildren()")
            d.find_element(By.CSS_SELECTOR, '[data-browse="jobs-dlq"]').click()
            wait_for(d, "the dead-lettered message",
                     lambda: "dead" in d.find_element(By.ID, "dlq-messages").text)
        shown = d.find_element(By.ID, "dlq-messages").text
        assert "attempts: 0" in shown, shown
        assert dlq_looked_at() == before, (before, dlq_looked_at())
        shot(d, "queues-desktop")
        ans, what = confirm(d, "redrive")
        assert "POST /queues/jobs-dlq/messages/redrive" in what, what
        assert "sent 1 back to jobs" in ans, ans
        assert h.api("GET", "/queues/jobs")[1]["ready"] == 2
        # pipelines: a card each, its counts those of GET /pipelines; a
        # send while the page is open shows at its next refresh
        def card(name):
            return d.execute_script(
                "const c = document.querySelector(`section[data-pipeline='${arguments[0]}']`);"
                "return c ? Object.fromEntries([...c.querySelectorAll('dd')]"
                ".map((e) => [e.dataset.field, e.textContent])) : null", name)
        # compact {"a":N} and a newline: 8 bytes each
        assert h.api("POST", "/pipelines/events", [{"a": 1}, {"a": 2}, {"a": 3}]) == \
            (202, {"accepted": 3})
        assert h.api("POST", "/pipelines/clicks", [{"a": 1}, {"a": 2}])[0] == 202
        d.get(h.base + "/#/pipelines")
        wait_for(d, "the pipelines link",
                 lambda: d.find_element(By.CSS_SELECTOR, '[data-nav="pipelines"]').is_displayed())
        wait_for(d, "the events card", lambda: card("events"))
        c = card("events")
        assert c["accepted"] == "3 records, 24 B", c
        assert c["backlog"].startswith("3 records, 24 B (oldest sent "), c
        assert c["written"] == "0 records, 0 B" and c["files"] == "0", c
        assert c["last flush"] == "never" and c["last error"] == "—", c
        assert h.api("POST", "/pipelines/events", [{"a": 4}, {"a": 5}])[0] == 202
        wait_for(d, "the events card after a second send",
                 lambda: card("events")["accepted"] == "5 records, 40 B")
        assert card("events")["backlog"].startswith("5 records, 40 B"), card("events")
        # clicks rolls a file once its oldest record is a second old
        wait_for(d, "the clicks card with its file written",
                 lambda: card("clicks") and card("clicks")["files"] == "1", timeout=20)
        c = card("clicks")
        assert c["written"] == "2 records, 16 B" and c["backlog"] == "0 records, 0 B", c
        assert c["last flush"] != "never", c
        shot(d, "pipelines-desktop")
        d.get(h.base + "/#/crons")
        wait_for(d, "the cron", lambda: "0 3 * * *" in d.find_element(By.ID, "cron-rows").text)
        # the counts are GET /crons' own keys: "running" (a "fired" the
        # JSON never had was drawn as 0)
        labels = d.execute_script(
            "return [...document.querySelectorAll('#cron-rows tr:first-child td')]"
            ".map((td) => td.dataset.label)")
        assert labels[3:] == ["Running", "Complete", "Failed", "Missed", "Skipped"], labels
        shot(d, "crons-desktop")
        d.get(h.base + "/#/plugins")
        wait_for(d, "the plugins and what they serve", lambda: d.execute_script(
            "return [...document.querySelectorAll('#plugin-list a')]"
            ".map((a) => a.textContent).join(' ')") == "order-flow nightly-report chaos paced batched fan-out square")
        shot(d, "plugins-desktop")
        # the counters drawn from the host's own history: a page loaded
        # afresh shows the steps completed before it opened at its first
        # render (the previous page's samples are gone with it)
        d.get(h.base + "/#/health")
        d.execute_script("sessionStorage.clear()")
        d.refresh()
        wait_for(d, "the first render of the health page",
                 lambda: d.find_elements(By.CSS_SELECTOR, "svg.chart"), timeout=5)
        bars = d.execute_script(
            "return [...document.querySelectorAll('svg.chart[data-series="
            "steps_completed] rect')].filter((r) => r.getAttribute('height') > 0).length")
        assert bars >= 1, "no bar of steps completed right after opening"
        # the hosts: this one alone on its SQLite file, alive
        wait_for(d, "the hosts table",
                 lambda: d.find_elements(By.CSS_SELECTOR, "#host-rows tbody tr"))
        host_rows = d.find_elements(By.CSS_SELECTOR, "#host-rows tbody tr")
        assert len(host_rows) == 1, len(host_rows)
        assert "(this one)" in host_rows[0].text and "alive" in host_rows[0].text, host_rows[0].text
        # with its counts: the steps it completed so far
        steps_done = d.execute_script(
            "return document.querySelector('#host-rows tbody td[data-label=\"Steps done\"]').textContent")
        assert int(steps_done) >= 1, steps_done
        shot(d, "health-desktop")

        # events an instance received: the one its review consumed, and
        # one of a type it never waits for, pending
        assert h.api("POST", f"/workflows/{WF}/instances/batch-b-1/events/unrelated",
                     {"n": 7})[0] == 202
        assert h.api("POST", f"/workflows/{WF}/instances/batch-b-1/events/approval",
                     {"approved": True})[0] == 202
        d.get(h.base + f"/#/wf/{WF}/i/batch-b-1")

        def events_shown():
            return d.execute_script(
                "return [...document.querySelectorAll('#events li.event')]"
                ".map((e) => [e.dataset.type, e.textContent])")
        wait_for(d, "both events, the approval consumed",
                 lambda: [t for t, x in events_shown()] == ["unrelated", "approval"]
                 and "consumed by manual review" in events_shown()[1][1])
        ev = events_shown()
        assert "pending" in ev[0][1] and '"n": 7' in ev[0][1], ev
        assert '"approved": true' in ev[1][1], ev
        d.find_element(By.ID, "events").location_once_scrolled_into_view
        shot(d, "events-desktop")

        # flow control: one run of key t1 holds its one slot for a
        # minute, a second waits queued for its turn
        for iid in ("paced-1", "paced-2"):
            assert h.api("POST", "/workflows/paced/instances",
                         {"id": iid, "params": {"k": "t1", "steps": 1,
                                                "hold_ms": 60000}})[0] == 201
            deadline = time.time() + 15
            want = "running" if iid == "paced-1" else "queued"
            while h.status(iid, "paced") != want:
                assert time.time() < deadline, f"{iid} never {want}"
                time.sleep(0.1)
        d.get(h.base + "/#/wf/paced")
        rule = wait_for(d, "the flow rule's counts",
                        lambda: d.find_elements(By.CSS_SELECTOR,
                                                "#flow-rules tr[data-rule]")
                        and d.find_element(By.CSS_SELECTOR,
                                           "#flow-rules tr[data-rule]").text)
        assert "concurrency" in rule and "/k" in rule and "1 at once" in rule, rule
        assert "t1: 1 running, 1 waiting" in rule, rule
        shot(d, "flow-desktop")
        d.get(h.base + "/#/wf/paced/i/paced-2")
        held = wait_for(d, "what holds the queued run",
                        lambda: d.find_elements(By.ID, "instance-waiting-for")
                        and d.find_element(By.ID, "instance-waiting-for").text)
        assert 'flow: concurrency /k="t1" (1 of 1 running; 1 waiting)' in held, held
        # a debounce: two creates of one key are one instance, waiting
        assert h.api("POST", "/workflows/batched/instances",
                     {"id": "batched-1", "params": {"k": "d1"}})[0] == 201
        code, body = h.api("POST", "/workflows/batched/instances",
                           {"id": "batched-2", "params": {"k": "d1"}})
        assert code == 200 and body == {"id": "batched-1", "debounced": True}, body
        d.get(h.base + "/#/wf/batched")
        rule = wait_for(d, "the debounce's counts",
                        lambda: d.find_elements(By.CSS_SELECTOR,
                                                "#flow-rules tr[data-rule=debounce]")
                        and d.find_element(By.CSS_SELECTOR,
                                           "#flow-rules tr[data-rule=debounce]").text)
        assert "/k" in rule and "3600000 ms quiet" in rule, rule
        assert "1 create merged" in rule, rule
        d.get(h.base + f"/#/wf/{WF}")
        wait_for(d, "the list again", lambda: rows(d))
        assert not d.find_element(By.ID, "flow").is_displayed()

        bulk_actions(d, h)

        # keyboard: Tab from the top reaches the navigation's links
        d.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
        assert d.switch_to.active_element.tag_name == "a"

        # a phone's width: nothing wider than the screen
        viewport(d, 375, 800)
        pages = [("list", f"#/wf/{WF}", "#instance-rows tr"),
                 ("detail", f"#/wf/{WF}/i/flaky-1", "li.attempt"),
                 ("queues", "#/queues", "tr[data-queue]"),
                 ("crons", "#/crons", "#cron-rows tr"),
                 ("pipelines", "#/pipelines", "section[data-pipeline]"),
                 ("plugins", "#/plugins", "#plugin-list section"),
                 ("health", "#/health", "svg.chart")]
        for name, frag, sel in pages:
            d.get(h.base + "/" + frag)
            wait_for(d, f"the {name} page at 375 px",
                     lambda: d.find_elements(By.CSS_SELECTOR, sel))
            width = d.execute_script("return document.documentElement.scrollWidth")
            assert width <= 375, f"the {name} page is {width} px wide at 375 px"
            shot(d, f"{name}-phone")

        bad = severe_logs(d, [r"/events/go .*400"])
        assert not bad, "browser errors:\n" + "\n".join(bad)

        # A listener with a token: the page asks for it and keeps it for
        # the session.
        t = Host(tmp, "token", token=True)
        hosts.append(t)
        d2 = browser(os.path.join(tmp, "profile2"))
        drivers.append(d2)
        d2.get(t.base + "/")
        wait_for(d2, "the token form",
                 lambda: d2.find_element(By.ID, "token-form").is_displayed())
        field = d2.find_element(By.ID, "token-input")
        field.send_keys("wrong")
        field.send_keys(Keys.ENTER)
        wait_for(d2, "the refusal of a wrong token",
                 lambda: "refused" in d2.find_element(By.ID, "token-error").text)
        field.clear()
        field.send_keys(TOKEN)
        field.send_keys(Keys.ENTER)
        wait_for(d2, "the workflows behind the token",
                 lambda: d2.find_elements(By.LINK_TEXT, WF))
        assert d2.execute_script("return sessionStorage.getItem('duro.token')") == TOKEN
        assert d2.execute_script("return localStorage.length") == 0
        bad = severe_logs(d2, [r"/healthz .*401"])
        assert not bad, "browser errors behind the token:\n" + "\n".join(bad)
        limited_key(t, os.path.join(tmp, "profile3"), drivers)
    finally:
        for d in drivers:
            d.quit()
        for h in hosts:
            h.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    start = time.time()
    try:
        main()
    except Exception as e:  # one line for the summary, the trace for the log
        import traceback
        traceback.print_exc()
        print(f"test_dashboard: FAIL: {e}".splitlines()[0])
        sys.exit(1)
    print(f"test_dashboard: pass ({time.time() - start:.1f} s; screenshots in {ARTEFACTS})")
