"""Needs you, wherever you are (docs/notify.md): each running team with ``[notify]`` gets a
``TeamNotifier`` that publishes what needs the operator to ntfy (with Approve / Deny buttons
where it can be answered) and to the Apprise alert channels, and applies the buttons' actions
that come back on the response topic.

What is sent is derived, each time the change feed moves, from the durable sources themselves
(``_needs_you.gather``: the approvals journal, the members' state, the board) minus what was
already sent; so nothing is lost while the ntfy server is down — the next pass after it
answers publishes what still waits (an item settled meanwhile is not sent at all) — and the
daemon's memory holds only the keys already sent (bounded by what waits, ≤ ``MAX_ITEMS``) and
at most ``MAX_RECEIPTS`` receipts not yet delivered. After a daemon restart the keys are
gone: what still waits is published again (its pending approvals expired with the restart,
and the runtimes' new requests are new items; an old button answers "expired").

Everything a team's notifier publishes shares one rate window (``max_per_minute``): the items,
the digest, the receipts of actions, `teamctl notify test`'s pushes. One push at a time
(``_publishing``), so a slot is looked at and taken with nothing in between. A receipt the
full window holds back waits for a slot (``_send_held``); what is posted to the response topic
can never buy a push of its own (notify_responses.py, notify_refusals.py).
"""

from __future__ import annotations

import os
import secrets
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from orchestrator.daemon.notify._alerts import Alerts
from orchestrator.daemon.notify._cursor import Cursor
from orchestrator.daemon.notify._journal import NotifyJournal
from orchestrator.daemon.notify._messages import Channel, Composer
from orchestrator.daemon.notify._needs_you import Landings, NeedsYou, Pulls, gather
from orchestrator.daemon.notify._policy import Backoff, RateWindow, in_quiet_hours
from orchestrator.daemon.notify._refusals import REFUSED_LOG_INTERVAL, RefusalTally
from orchestrator.daemon.notify._responses import Responder
from orchestrator.daemon.notify._tokens import Signer
from orchestrator.errors import NotifyUnreachable, StoreError, TeamctlError, UsageError
from orchestrator.notify_operator import read_operator
from orchestrator.protocol.notify import NotifyCheck, NotifyTestDoc

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from orchestrator.daemon.approvals import Approvals
    from orchestrator.daemon.board import Board
    from orchestrator.daemon.changes import Changes
    from orchestrator.daemon.journal import AsyncJournal
    from orchestrator.daemon.notify._responses import ReceiptKind
    from orchestrator.daemon.notify._tokens import Action
    from orchestrator.daemon.teams import Teams
    from orchestrator.notify_config import NotifySection
    from orchestrator.notify_operator import OperatorNotify
    from orchestrator.paths import Home

__all__ = ["Channel", "NotifyService", "TeamNotifier", "backoff_from_env",
           "check_can_start", "refused_interval_from_env"]

log = structlog.get_logger("teamctl.notify")

MAX_RECEIPTS = 100  # receipts kept for a server that is down (the oldest dropped first)
MAX_ALERTS_QUEUED = 100
MIN_PASS_INTERVAL = 0.02  # passes at most this often (a burst of changes is one pass)
CONCURRENT_ACTIONS = 16
_REFUSED_RETRY = 5.0  # seconds between two tries of a refused [notify] section
_IDLE_WAIT = 3600.0  # otherwise the teams are looked at again on a change (or hourly)


class TeamNotifier:
    """One team's publisher and responder (see the module's docstring)."""

    def __init__(self, team: str, section: NotifySection, channel: Channel | None,
                 *, gather_items: Callable[[], Awaitable[list[NeedsYou]]], changes: Changes,
                 responder: Responder | None, nonces: NotifyJournal | None,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.team, self.section, self.channel = team, section, channel
        self._gather = gather_items
        self._changes = changes
        self._responder = responder
        self._nonces = nonces
        self._clock = clock
        self._compose = Composer(team, section, channel, clock)
        self._window = RateWindow(section.max_per_minute, clock=monotonic)
        self._alerts = Alerts(section.apprise)
        self._published: set[str] = set()
        self._receipts: deque[dict[str, Any]] = deque(maxlen=MAX_RECEIPTS)
        self._publishing = anyio.Lock()  # one push at a time: a slot checked is a slot taken
        self._held = anyio.Event()  # set: a receipt waits for a slot of the window
        self._alert_out: MemoryObjectSendStream[tuple[str, str]] | None = None  # while run
        self._quiet_missed = 0
        self._tests: dict[str, anyio.Event] = {}

    # -- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Publish and answer until cancelled."""
        out, into = anyio.create_memory_object_stream[tuple[str, str]](MAX_ALERTS_QUEUED)
        self._alert_out = out
        async with anyio.create_task_group() as tg, out:
            tg.start_soon(self._send_alerts, into, name=f"notify alerts {self.team}")
            tg.start_soon(self._send_held, name=f"notify receipts {self.team}")
            if self.channel is not None and self._responder is not None:
                tg.start_soon(self._responder.refused.run, name=f"notify refused {self.team}")
                tg.start_soon(self._follow, name=f"notify responses {self.team}")
            await self._publish_loop()

    async def _publish_loop(self) -> None:
        backoff = self.channel.ntfy.backoff if self.channel else Backoff()
        delay = backoff.first
        seen = -1
        while True:
            wait = 3600.0
            try:
                wait = await self.publish_pass()
                delay = backoff.first
            except NotifyUnreachable as exc:
                log.warning("notify_publish_failed", team=self.team, error=exc.message,
                            retry_in=delay)
                wait, delay = delay, min(delay * 2, backoff.most)
            except StoreError as exc:  # the journal refused a read: try on the next change
                log.error("notify_gather_failed", team=self.team, error=exc.message)
            seen = await self._changes.wait(seen, wait)
            await anyio.sleep(MIN_PASS_INTERVAL)

    async def publish_pass(self) -> float:
        """Publish what is new; seconds until a pass is owed again without a change (a full
        rate window). NotifyUnreachable: the rest waits for the next pass."""
        items = [i for i in await self._gather() if i.kind in self.section.events]
        async with self._publishing:
            await self._flush_receipts()
            return await self._publish_items(items)

    async def _publish_items(self, items: list[NeedsYou]) -> float:
        self._published &= {i.key for i in items}
        new = [i for i in items if i.key not in self._published]
        plan = self._window.plan(new)
        quiet = in_quiet_hours(self.section.quiet_hours, self._clock())
        for item in plan.single:
            await self._push(self._compose.message(item, quiet), item.kind, quiet)
            self._published.add(item.key)
            self._window.sent()
            log.info("notify_published", team=self.team, item=item.key, kind=item.kind)
        if plan.digest:
            await self._push(self._compose.digest(plan.digest, quiet), "digest", quiet)
            self._published |= {i.key for i in plan.digest}
            self._window.sent()
            log.info("notify_digest_published", team=self.team, items=len(plan.digest))
        if not quiet and self._quiet_missed:
            self._alert(f"teamctl {self.team}: {self._quiet_missed} items needed you "
                        "during quiet hours", self._compose.link("see what waits"))
            self._quiet_missed = 0
        waiting = len(new) > len(plan.single) + len(plan.digest)
        return self._window.free_in() if waiting else 3600.0

    async def _push(self, message: dict[str, Any], kind: str, quiet: bool) -> None:
        if self.channel is not None:
            await self.channel.ntfy.publish({"topic": self.channel.topic, **message})
        if quiet:
            self._quiet_missed += 1
        else:
            self._alert(message["title"], self._compose.link(message["message"]))

    def _alert(self, title: str, body: str) -> None:
        if not self._alerts or self._alert_out is None:
            return
        try:
            self._alert_out.send_nowait((title, body))
        except anyio.WouldBlock:
            log.warning("notify_alert_dropped", team=self.team, queued=MAX_ALERTS_QUEUED)

    async def _send_alerts(self, into: MemoryObjectReceiveStream[tuple[str, str]]) -> None:
        async with into:
            async for title, body in into:
                await self._alerts.send(title, body)

    async def _follow(self) -> None:
        assert self.channel is not None and self._nonces is not None
        channel, nonces, responder = self.channel, self._nonces, self._responder
        assert responder is not None
        cursor_key = f"{channel.ntfy.server}/{channel.response_topic}"
        since = await nonces.cursor(cursor_key) or str(int(self._clock()))
        # a post is read once a slot is free: the reader goes as fast as posts are handled
        # (a junk post in microseconds), and a flood holds at most this many tasks
        slots = anyio.Semaphore(CONCURRENT_ACTIONS)
        cursor = Cursor(nonces, cursor_key)  # saved behind the reader, never waited on

        async with anyio.create_task_group() as tg:
            async def handle(text: str) -> None:
                try:
                    await responder.handle(text)
                finally:
                    slots.release()

            async def on_message(event: dict[str, Any]) -> None:
                await slots.acquire()
                tg.start_soon(handle, str(event.get("message", ""))[:8192])
                cursor.advance(str(event["id"]))

            tg.start_soon(cursor.run, name=f"notify cursor {self.team}")
            try:
                await channel.ntfy.follow(channel.response_topic, since, on_message)
            finally:
                await cursor.flush()

    # -- receipts -----------------------------------------------------------------------------

    async def receipt(self, item: str, text: str, kind: ReceiptKind = "result") -> None:
        """Publish what an action did, within the rate window: a ``result`` waits for a slot
        (kept, bounded, while the window is full or the server is down), a ``replay``'s is
        sent only if a slot is free now and no result waits, a ``test``'s now."""
        if self.channel is None:
            return
        message = {"topic": self.channel.topic, "title": f"teamctl: {text}",
                   "message": f"{item or 'an action'}: {text}",
                   "tags": ["white_check_mark" if text.startswith(("applied", "already"))
                            else "x"], "priority": 2}
        try:
            async with self._publishing:
                if kind == "result":
                    self._receipts.append(message)
                    await self._flush_receipts()
                elif kind == "test" or (not self._receipts and self._window.room() > 0):
                    await self._push_now(message)
                else:
                    log.info("notify_replay_receipt_dropped", team=self.team, item=item,
                             why="the rate window is full")
        except NotifyUnreachable as exc:
            log.warning("notify_receipt_waits" if kind == "result" else
                        "notify_receipt_failed", team=self.team, error=exc.message)

    async def _flush_receipts(self) -> None:
        """Publish the receipts kept, while the window has room (the caller holds
        ``_publishing``); what is left waits for ``_send_held``."""
        while self.channel is not None and self._receipts:
            if self._window.room() <= 0:
                self._held.set()
                return
            await self._push_now(self._receipts[0])
            self._receipts.popleft()
            log.info("notify_receipt_published", team=self.team)

    async def _push_now(self, message: dict[str, Any]) -> None:
        assert self.channel is not None
        await self.channel.ntfy.publish(message)
        self._window.sent()

    async def _send_held(self) -> None:
        """Publish the receipts the full window held back, as its slots free (a server that
        is down meanwhile: the next publish pass, with its backoff, sends them)."""
        while True:
            await self._held.wait()
            await anyio.sleep(self._window.free_in())
            self._held = anyio.Event()
            try:
                async with self._publishing:
                    await self._flush_receipts()
            except NotifyUnreachable as exc:
                log.warning("notify_receipt_waits", team=self.team, error=exc.message)

    # -- teamctl notify test ------------------------------------------------------------------

    def tested(self, action: Action) -> None:
        event = self._tests.get(action.item)
        if event is not None:
            event.set()

    async def self_test(self, timeout: float) -> NotifyTestDoc:
        checks = [await self._test_kind(kind) for kind in self.section.events]
        if self.channel is not None:
            checks.append(await self._round_trip(timeout))
        if self._alerts:
            started = time.monotonic()
            ok = await self._alerts.send(f"teamctl {self.team}: test alert",
                                         self._compose.link("a test of [notify] apprise"))
            checks.append(NotifyCheck(
                what="alerts", ok=ok, seconds=round(time.monotonic() - started, 4),
                detail="" if ok else "a channel refused the alert or did not answer in time; "
                                     "see notify_alert_failed in 'teamctl logs'"))
        return NotifyTestDoc(team=self.team, checks=checks,
                             server=self.channel.ntfy.server if self.channel else None)

    async def _test_kind(self, kind: Any) -> NotifyCheck:
        decisions: Any = {"approval": ("approve", "deny"), "question": ("answer", "deny"),
                          "review": ("approve", "deny")}.get(kind, ())
        item = NeedsYou(f"test-{kind}", kind, self.team, f"[test] {kind}",
                        f"a test {kind} notification from 'teamctl notify test'",
                        item=f"{self.team}/test:{kind}-{secrets.token_hex(4)}",
                        decisions=decisions)
        if self.channel is None:
            return NotifyCheck(what=kind, ok=True, detail="no ntfy: alerts only")
        started = time.monotonic()
        try:  # the operator's own command: never held back, its slots taken
            async with self._publishing:
                await self._push_now({"topic": self.channel.topic,
                                      **self._compose.message(item, quiet=False)})
        except NotifyUnreachable as exc:
            return NotifyCheck(what=kind, ok=False, detail=exc.message)
        return NotifyCheck(what=kind, ok=True, seconds=round(time.monotonic() - started, 4))

    async def _round_trip(self, timeout: float) -> NotifyCheck:
        assert self.channel is not None
        item = f"{self.team}/test:rt-{secrets.token_hex(6)}"
        arrived = self._tests[item] = anyio.Event()
        started = time.monotonic()
        try:
            await self.channel.ntfy.post_text(self.channel.response_topic,
                                              self._compose.sign(item, "approve"))
            with anyio.fail_after(timeout):
                await arrived.wait()
        except NotifyUnreachable as exc:
            return NotifyCheck(what="round trip", ok=False, detail=exc.message)
        except TimeoutError:
            return NotifyCheck(what="round trip", ok=False,
                               detail=f"the action did not come back within {timeout:g} s: "
                                      "is the daemon subscribed (see 'teamctl logs')?")
        finally:
            self._tests.pop(item, None)
        return NotifyCheck(what="round trip", ok=True,
                           seconds=round(time.monotonic() - started, 4),
                           detail="posted as the phone does, verified, receipt published")


def backoff_from_env(environ: Mapping[str, str] = os.environ) -> Backoff:
    """``TEAMCTL_NOTIFY_BACKOFF="FIRST,MOST"`` (seconds; a test makes them short)."""
    raw = environ.get("TEAMCTL_NOTIFY_BACKOFF")
    if raw is None:
        return Backoff()
    try:
        first, most = (float(x) for x in raw.split(","))
    except ValueError:
        first = most = -1.0
    if not 0 < first <= most < 3600:
        raise UsageError(f"TEAMCTL_NOTIFY_BACKOFF={raw!r} is not FIRST,MOST seconds "
                         "(0 < FIRST <= MOST < 3600); fix or unset it")
    return Backoff(first=first, most=most, read_timeout=max(most * 4, 5.0),
                   request_timeout=max(most * 2, 2.0))


def refused_interval_from_env(environ: Mapping[str, str] = os.environ) -> float:
    """``TEAMCTL_NOTIFY_REFUSED_INTERVAL``: seconds between two ``notify_posts_refused``
    events (60 unless set; a test makes it short)."""
    raw = environ.get("TEAMCTL_NOTIFY_REFUSED_INTERVAL")
    if raw is None:
        return REFUSED_LOG_INTERVAL
    try:
        interval = float(raw)
    except ValueError:
        interval = -1.0
    if not 0 < interval <= 3600:
        raise UsageError(f"TEAMCTL_NOTIFY_REFUSED_INTERVAL={raw!r} is not seconds in "
                         "(0, 3600]; fix or unset it")
    return interval


class NotifyService:
    """Every running team's notifier: started when a team with ``[notify]`` runs, replaced
    when its section changes, stopped with the team."""

    def __init__(self, home: Home, *, teams: Teams, approvals: Approvals, board: Board | None,
                 store: AsyncJournal, changes: Changes, backoff: Backoff | None = None,
                 environ: Mapping[str, str] = os.environ, land: Landings | None = None,
                 pulls: Pulls | None = None) -> None:
        """``land``: the merge queue, whose tasks that could not land need the operator;
        ``pulls``: the forge, whose pull requests past their CI retries need the operator."""
        self._home = home
        self._teams, self._approvals, self._board = teams, approvals, board
        self._land = land
        self._pulls = pulls
        self._store, self._changes = store, changes
        self._backoff = backoff or backoff_from_env(environ)
        self._refused_interval = refused_interval_from_env(environ)
        self._environ = environ
        self._nonces = NotifyJournal(store)
        self._running: dict[str, tuple[NotifySection, TeamNotifier, anyio.CancelScope]] = {}
        self._refused: dict[str, str] = {}  # the last refusal logged, by team

    async def run(self) -> None:
        """Follow the running teams until cancelled."""
        async with anyio.create_task_group() as tg:
            seen = -1
            while True:
                self._reconcile(tg)
                # a refused [notify] (a token file not there yet) is tried again every few
                # seconds; else only a change can start or stop a notifier (a team launched
                # or stopped bumps the feed): an idle daemon is not woken for it
                wait = _REFUSED_RETRY if self._refused else _IDLE_WAIT
                seen = await self._changes.wait(seen, wait)

    def _reconcile(self, tg: anyio.abc.TaskGroup) -> None:
        wanted = {name: config.notify for name in self._teams.names()
                  if (config := self._teams.running(name)) is not None and config.notify}
        for name, (section, _, scope) in list(self._running.items()):
            if wanted.get(name) != section:
                scope.cancel()
                del self._running[name]
                log.info("notify_stopped", team=name)
        for name, section in wanted.items():
            if name in self._running:
                continue
            try:
                notifier = self._notifier(name, section)
            except TeamctlError as exc:  # tried again at each change: once fixed, it starts
                if self._refused.get(name) != exc.message:
                    self._refused[name] = exc.message
                    log.error("notify_unconfigured", team=name, code=exc.code,
                              error=exc.message)
                continue
            self._refused.pop(name, None)
            scope = anyio.CancelScope()
            self._running[name] = (section, notifier, scope)
            tg.start_soon(self._run_one, notifier, scope, name=f"notify {name}")
            log.info("notify_started", team=name, ntfy=notifier.channel is not None,
                     alerts=len(section.apprise))

    @staticmethod
    async def _run_one(notifier: TeamNotifier, scope: anyio.CancelScope) -> None:
        with scope:
            try:
                await notifier.run()
            except Exception as exc:  # a bug: this team's notifications stop, nothing else
                log.error("notify_failed", team=notifier.team, error=type(exc).__name__,
                          detail=str(exc)[:300])
            finally:
                if notifier.channel is not None:
                    await notifier.channel.ntfy.aclose()

    def _notifier(self, team: str, section: NotifySection) -> TeamNotifier:
        channel = self._channel(section) if section.ntfy is not None else None
        responder = None
        if channel is not None:
            notifier_ref: list[TeamNotifier] = []

            async def receipt(item: str, text: str, kind: ReceiptKind) -> None:
                await notifier_ref[0].receipt(item, text, kind)

            responder = Responder(team, signer=channel.signer, nonces=self._nonces,
                                  approvals=self._approvals, store=self._store,
                                  board=self._board, receipt=receipt,
                                  on_test=lambda action: notifier_ref[0].tested(action),
                                  refused=RefusalTally(team, interval=self._refused_interval))

        async def items() -> list[NeedsYou]:
            return await gather(team, teams=self._teams, approvals=self._approvals,
                                board=self._board, land=self._land, pulls=self._pulls)

        notifier = TeamNotifier(team, section, channel, gather_items=items,
                                changes=self._changes, responder=responder,
                                nonces=self._nonces)
        if channel is not None:
            notifier_ref.append(notifier)
        return notifier

    def _channel(self, section: NotifySection) -> Channel:
        assert section.ntfy is not None
        settings = section.ntfy
        operator, topic, token = _ntfy_settings(self._home, section, self._environ)
        from orchestrator.daemon.notify._ntfy import Ntfy

        ntfy = Ntfy(settings.server or operator.server, token, self._backoff)
        return Channel(ntfy, topic, operator.response_topic, Signer(operator.key))

    async def test(self, team: str | None, timeout: float) -> NotifyTestDoc:
        """``teamctl notify test``: one of each configured kind, and the round trip."""
        name = self._teams.resolve(team).name
        running = self._running.get(name)
        if running is None:
            raise UsageError(f"team {name} sends no notifications: add [notify] to its team "
                             "file (docs/notify.md) and run 'teamctl notify init'; see "
                             "'teamctl logs' for notify_unconfigured")
        return await running[1].self_test(timeout)


def check_can_start(home: Home, section: NotifySection,
                    environ: Mapping[str, str] = os.environ) -> None:
    """Refuse a launch whose ``[notify]`` could not start (UsageError, exit 2, naming the
    fix): no ``notify.toml`` (``teamctl notify init``), an unreadable ``topic_file``, a
    ``token_env`` the daemon's environment does not set. Checked before anything of the team
    starts — it was a log line while the team ran with nobody told (issue 45). A team the
    daemon resumes is not refused: its notifier is tried again at each change."""
    if section.ntfy is not None:
        _ntfy_settings(home, section, environ)


def _ntfy_settings(home: Home, section: NotifySection, environ: Mapping[str, str]
                   ) -> tuple[OperatorNotify, str, str | None]:
    """The operator's file, the topic and the access token a team's ntfy channel uses."""
    assert section.ntfy is not None
    operator = read_operator(home)
    if operator is None:
        raise UsageError(f"[notify] ntfy needs the topics and key of "
                         f"{home.root / 'notify.toml'}: run 'teamctl notify init', then "
                         "launch the team again")
    settings = section.ntfy
    topic = settings.topic or operator.topic
    if settings.topic_file is not None:
        topic = _read_topic(settings.topic_file)
    token = None
    if settings.token_env is not None:
        token = environ.get(settings.token_env)
        if not token:
            raise UsageError(f"[notify] ntfy.token_env names {settings.token_env}, which "
                             "the daemon's environment does not set: export it where the "
                             "daemon starts ('teamctl stop', then launch again)")
    return operator, topic, token


def _read_topic(path: str) -> str:
    import re
    from pathlib import Path

    try:
        topic = Path(path).expanduser().read_text().strip()
    except OSError as exc:
        raise UsageError(f"[notify] ntfy.topic_file {path} cannot be read ({exc.strerror}); "
                         "write the topic name there") from None
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", topic):
        raise UsageError(f"[notify] ntfy.topic_file {path} does not hold a topic name "
                         "(letters, digits, '-' and '_', at most 64)")
    return topic
