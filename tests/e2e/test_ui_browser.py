"""The live view in a real headless Chromium (Debian's chromium and chromedriver, driven by
Selenium) against a running team of fake members: the page lists the members, a message sent
from the composer with an image is answered and its thumbnail appears, a refused attachment
shows its code, an approval clicked in the page is applied, and a member killed by the test
turns to `backoff` on the page without a reload; what the operator types survives the journal's
changes. At a phone's width (390 CSS pixels, Chromium's mobile emulation) the page never
scrolls sideways and the composer still sends. Screenshots go to docs/images/."""

from __future__ import annotations

import base64
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.support import images
from tests.support.driver import REPO
from tests.support.members import codex_member, fake_member, opencode_member

if TYPE_CHECKING:
    from collections.abc import Iterator

    from selenium.webdriver.remote.webdriver import WebDriver

    from tests.support.driver import Teamctl

pytestmark = pytest.mark.e2e
CHROMIUM = Path(os.environ.get("TEAMCTL_E2E_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("TEAMCTL_E2E_CHROMEDRIVER", "/usr/bin/chromedriver"))
DEADLINE = 30
PHONE_WIDTH = 390


def _chromium(phone: bool = False) -> WebDriver:
    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), \
        "Debian's chromium and chromium-driver are needed: apt-get install chromium " \
        "chromium-driver (.ci/run does)"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1400,1100"):
        options.add_argument(argument)
    if phone:  # a phone's viewport: 390 CSS pixels wide, touch, a phone's user agent
        options.add_experimental_option("mobileEmulation", {
            "deviceMetrics": {"width": PHONE_WIDTH, "height": 844, "pixelRatio": 2.0,
                              "touch": True},
            "userAgent": "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) "
                         "AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148"})
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    driver = _chromium()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def phone() -> Iterator[WebDriver]:
    driver = _chromium(phone=True)
    try:
        yield driver
    finally:
        driver.quit()


def _until(driver: WebDriver, what: str, check: object) -> None:
    WebDriverWait(driver, DEADLINE).until(lambda d: check(d), message=what)  # type: ignore[operator]


def _text(driver: WebDriver, css: str) -> str:
    return " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, css))


def test_the_live_view_in_chromium(teamctl: Teamctl, browser: WebDriver) -> None:
    team = teamctl.write_team("web", [
        fake_member("lead", backoff=[30.0, 60.0]),
        fake_member("asker", permissions="ask")])
    assert teamctl.run("launch", str(team)).returncode == 0
    url = teamctl.run("ui").stdout.strip()
    browser.get(url)
    _until(browser, "the members are listed",
           lambda d: "web/lead" in _text(d, "#members") and "web/asker" in _text(d, "#members"))

    shot = images.save(images.screenshot(1280, 720), teamctl.workdir / "button.png", "PNG")
    Select(browser.find_element(By.ID, "send-member")).select_by_value("web/lead")
    browser.find_element(By.ID, "send-text").send_keys("why is this button misaligned?")
    browser.find_element(By.ID, "send-files").send_keys(str(shot))
    browser.find_element(By.ID, "send-button").click()
    _until(browser, "the answer and its thumbnail", lambda d: d.execute_script(
        "const img = document.querySelector('#conversation img.thumb');"
        "return !!img && img.complete && img.naturalWidth > 0 && document.querySelector("
        "'#conversation li.message[data-state=\"answered\"]') !== null;"))
    assert "received: why is this button misaligned?" in _text(browser, "#conversation")

    text_file = teamctl.workdir / "notes.png"  # binary, neither image nor PDF nor text
    text_file.write_bytes(b"\x00\x01\x02 this is not an image")
    browser.find_element(By.ID, "send-text").send_keys("and this?")
    browser.find_element(By.ID, "send-files").send_keys(str(text_file))
    browser.find_element(By.ID, "send-button").click()
    _until(browser, "the refusal's code", lambda d: "attachment_unsupported_mime" in
           _text(d, "#send-result"))

    teamctl.run("send", "asker", "WRITE approved.txt from the page")
    _until(browser, "the approval card", lambda d: d.find_elements(
        By.CSS_SELECTOR, "#needs-you li.approval button[data-post*='/approve?sha256=']"))
    browser.find_element(By.CSS_SELECTOR,
                         "#needs-you li.approval button[data-post*='/approve?sha256=']").click()
    _until(browser, "the approval applied", lambda d: (
        teamctl.workdir / "approved.txt").exists() and "nothing waits on you" in
        _text(d, "#needs-you"))

    [lead] = [m for m in teamctl.json("status")["teams"][0]["members"] if m["name"] == "lead"]
    os.kill(lead["pid"], signal.SIGKILL)
    _until(browser, "lead in backoff, without a reload", lambda d: d.execute_script(
        "const row = document.querySelector('#members tr[data-member=\"lead\"] td.launch');"
        "return row && row.textContent === 'backoff';"))
    assert "backoff" in _text(browser, "#needs-you"), "a member in backoff needs you"
    target = REPO / "docs" / "images" / "live-view.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(target))


def test_a_messages_trace_is_a_waterfall_in_chromium(teamctl: Teamctl,
                                                     browser: WebDriver) -> None:
    """A lead (Claude's fake) asks a reviewer (Codex's fake) who asks a designer (OpenCode's
    fake): the lead's message's "trace" link shows the whole chain as a waterfall — a row per
    span, indented under its parent, each bar drawn — and the hostile text the operator wrote
    stays text. The screenshot goes to docs/images/trace-waterfall.png."""
    import json

    team = teamctl.write_team("web", [fake_member("lead"), codex_member("reviewer"),
                                      opencode_member("designer")])
    assert teamctl.run("launch", str(team)).returncode == 0
    hostile = "<img src=x onerror=document.title='owned'>"
    inner = json.dumps({"to": "designer", "text": f"check the colours {hostile}"})
    outer = json.dumps({"to": "reviewer", "text": f"MCP send_message {inner}"})
    sent = teamctl.json("send", "lead", f"MCP send_message {outer}", "--wait")
    for member in ("reviewer", "designer"):  # their queues are FIFO: this comes after
        assert teamctl.run("send", member, "noop", "--wait").returncode == 0
    url = teamctl.run("ui").stdout.strip()
    browser.get(url)
    link = f"#conversation a[data-trace-link='{sent['id']}']"
    _until(browser, "the lead's message and its trace link",
           lambda d: d.find_elements(By.CSS_SELECTOR, link))
    browser.find_element(By.CSS_SELECTOR, link).click()
    _until(browser, "the waterfall, delivery and attempt of each member", lambda d: len(
        d.find_elements(By.CSS_SELECTOR, "#trace li.span")) >= 6 and "reviewer → designer"
        in _text(d, "#trace"))
    widths = browser.execute_script(
        "return Array.from(document.querySelectorAll('#trace rect')).map("
        "r => r.getBoundingClientRect().width);")
    assert widths and all(w > 0 for w in widths), widths
    depths = {e.get_attribute("class").split()[-1]
              for e in browser.find_elements(By.CSS_SELECTOR, "#trace li.span")}
    assert {"depth-0", "depth-1", "depth-2", "depth-3", "depth-4", "depth-5"} <= depths
    assert "turn designer #1 opencode/" in _text(browser, "#trace")
    assert browser.title != "owned" and not browser.find_elements(By.CSS_SELECTOR,
                                                                  "#trace img")
    assert "<img src=x" in _text(browser, "#conversation")
    target = REPO / "docs" / "images" / "trace-waterfall.png"
    browser.find_element(By.ID, "trace").screenshot(str(target))
    assert target.stat().st_size > 0


_TYPING = """const el = document.activeElement;
const row = el.closest('li.approval');
return {probe: el.probe || null, value: el.value, start: el.selectionStart,
        end: el.selectionEnd, member: row ? row.dataset.member : null};"""


def _deny_field(member: str) -> str:
    return f"#needs-you li.approval[data-member='{member}'] form.deny input[name='message']"


def test_a_half_typed_deny_reason_survives_journal_changes(teamctl: Teamctl,
                                                           browser: WebDriver) -> None:
    """Every journal change replaced the Needs-you panel's HTML, so a half-typed deny reason,
    the focus and the caret were gone at the next change (another member asking, a message
    answered). The promise: the page patches its panels row by row (data-key) — the field being
    typed in is the same element with its text, focus and caret; a field typed in and left keeps
    its text; the new rows appear; and the finished reason is what the model is told."""
    team = teamctl.write_team("web", [fake_member("lead"),
                                      fake_member("asker", permissions="ask"),
                                      fake_member("other", permissions="ask")])
    assert teamctl.run("launch", str(team)).returncode == 0
    browser.get(teamctl.run("ui").stdout.strip())
    asked = teamctl.run("send", "asker", "WRITE denied.txt never").stdout.strip()
    assert len(asked) == 26, asked  # its id
    _until(browser, "asker's approval", lambda d: d.find_elements(By.CSS_SELECTOR,
                                                                  _deny_field("asker")))
    field = browser.find_element(By.CSS_SELECTOR, _deny_field("asker"))
    field.click()
    field.send_keys("the tests are")
    field.send_keys(Keys.ARROW_LEFT * 4)  # the caret inside the text: "the tests| are"
    browser.execute_script("arguments[0].probe = 'kept';", field)

    teamctl.run("send", "other", "WRITE other.txt later")
    assert teamctl.run("send", "lead", "hello", "--wait").returncode == 0
    _until(browser, "the new approval and the answer", lambda d: d.find_elements(
        By.CSS_SELECTOR, _deny_field("other")) and "received: hello" in _text(d, "#conversation"))
    assert browser.execute_script(_TYPING) == {
        "probe": "kept", "value": "the tests are", "start": 9, "end": 9, "member": "asker"}

    draft = browser.find_element(By.ID, "send-text")  # the deny field is left, dirty
    draft.click()
    draft.send_keys("a draft")
    assert teamctl.run("send", "lead", "again", "--wait").returncode == 0
    _until(browser, "the second answer", lambda d: "received: again" in
           _text(d, "#conversation"))
    assert browser.execute_script(_TYPING) == {
        "probe": None, "value": "a draft", "start": 7, "end": 7, "member": None}
    assert browser.find_element(By.CSS_SELECTOR, _deny_field("asker")).get_attribute(
        "value") == "the tests are"

    field.click()
    field.send_keys(Keys.END, " red", Keys.ENTER)
    # the applied deny takes its row out of Needs you, which moves the members table up: the
    # link is clicked where it is after that, not where it was (a click at the old place lands
    # on the next member's link, and the asker's conversation is never shown)
    _until(browser, "the deny applied", lambda d: not d.find_elements(
        By.CSS_SELECTOR, _deny_field("asker")))
    browser.find_element(By.CSS_SELECTOR, "#members a[data-member-link='asker']").click()
    _until(browser, "the model told the whole reason", lambda d: d.find_elements(
        By.CSS_SELECTOR, f"#conversation li#m-{asked}[data-state='answered']"))
    assert "denied: the tests are red" in _text(browser, f"#conversation li#m-{asked}")


_SIDEWAYS = """const page = document.scrollingElement;
const wide = [...document.querySelectorAll('body *')].filter(
  e => e.getBoundingClientRect().right > innerWidth + 0.5).map(
  e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + '.' + e.className);
return {scroll: page.scrollWidth, inner: innerWidth, wide: wide.slice(0, 8)};"""


def test_the_live_view_at_a_phones_width_never_scrolls_sideways(teamctl: Teamctl,
                                                                 phone: WebDriver) -> None:
    """At 390 CSS pixels (an iPhone's width) with a full page — a long approval, the team
    table, the board, a conversation with a screenshot, the log — the page is no wider than
    the screen (``scrollWidth <= innerWidth``: it scrolled sideways on every panel), and a
    message typed on the phone is sent and answered."""
    team = teamctl.write_team("web", [
        fake_member("lead"), fake_member("asker", permissions="ask"),
        fake_member("designer-with-a-long-name", model="claude-sonnet-4-5-20250929")])
    assert teamctl.run("launch", str(team)).returncode == 0
    for title in ("wire the login form to /api/session and show errors under each field",
                  "write the docs"):
        assert teamctl.run("task", "add", title).returncode == 0
    shot = images.save(images.screenshot(1280, 720), teamctl.workdir / "wide.png", "PNG")
    assert teamctl.run("send", "--attach", str(shot), "lead", "look at this",
                       "--wait").returncode == 0
    long_path = "docs/" + "a-very-long-directory-name/" * 6 + "notes.md"
    teamctl.run("send", "asker", f"WRITE {long_path} from the phone")
    phone.get(teamctl.run("ui").stdout.strip())
    _until(phone, "the approval and the thumbnail", lambda d: d.find_elements(
        By.CSS_SELECTOR, "#needs-you li.approval button[data-post*='/approve?sha256=']"))
    phone.find_element(By.CSS_SELECTOR, "#members a[data-member-link='lead']").click()
    _until(phone, "lead's conversation", lambda d: d.execute_script(
        "const img = document.querySelector('#conversation img.thumb');"
        "return !!img && img.complete && img.naturalWidth > 0;"))

    measured = phone.execute_script(_SIDEWAYS)
    assert measured["inner"] == PHONE_WIDTH, measured
    assert measured["scroll"] <= measured["inner"], measured
    phone.execute_script("window.scrollTo(0, 0)")
    target = REPO / "docs" / "images" / "live-view-phone.png"
    assert phone.save_screenshot(str(target))
    if os.environ.get("TEAMCTL_E2E_FULL_PAGE"):  # the whole page, to look at it by hand
        shot = phone.execute_cdp_cmd("Page.captureScreenshot", {"captureBeyondViewport": True})
        Path(os.environ["TEAMCTL_E2E_FULL_PAGE"]).write_bytes(base64.b64decode(shot["data"]))

    Select(phone.find_element(By.ID, "send-member")).select_by_value("web/lead")
    phone.find_element(By.ID, "send-text").send_keys("sent from the phone")
    phone.find_element(By.ID, "send-button").click()
    _until(phone, "the phone's message answered", lambda d: "received: sent from the phone"
           in _text(d, "#conversation"))
    assert phone.execute_script(_SIDEWAYS)["scroll"] <= PHONE_WIDTH
