"""The router, in process: a teammate's message with its sender, the reply routed back once,
and every guard (unknown recipient, oneself, chain depth, rate, pair cooldown, an old token)
refusing with a typed error that is journaled — nothing dropped silently."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.contracts import Confined, TextPart, TurnResult
from orchestrator.daemon.router import MessageRefused
from orchestrator.errors import AttachmentOutsideMemberView
from orchestrator.protocol.members import receipt_of
from runtimes.hosts.local.host import LocalHost
from tests.support.chains import quiet
from tests.support.fakes import FakeRuntime, ManualClock, core, team_config
from tests.support.settle import all_blocked

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from orchestrator.contracts import Turn
    from tests.support.fakes import Core, FakeProcess

pytestmark = pytest.mark.anyio


def _text(turn: Turn) -> str:
    return " ".join(p.text for p in turn.parts if isinstance(p, TextPart))


class Team:
    """Members whose turns follow a rule: ``SEND <to> <text>`` in a message makes the member
    call send_message during its turn, as a model calling the MCP tool would."""

    def __init__(self) -> None:
        self.c: Core | None = None
        self.errors: list[str] = []
        self.always_to: dict[str, str] = {}  # member → teammate it messages on every turn

    async def turn(self, process: FakeProcess, turn: Turn) -> TurnResult:
        assert self.c is not None
        member = process.spec.member
        token = self.c.supervisor.member("web", member).token
        assert token is not None
        text = _text(turn)
        target = self.always_to.get(member)
        if text.startswith("SEND "):
            _, target, text = text.split(" ", 2)
        if target:
            try:
                await self.c.router.send_message(token, target, f"{member} says: {text}")
            except MessageRefused as exc:
                self.errors.append(exc.code)
        return TurnResult(reply=f"{member} done with: {text}")


async def _team(tmp_path: Path, team: Team, *names: str, clock: ManualClock | None = None,
                **limits: object):  # type: ignore[no-untyped-def]
    runtime = FakeRuntime()
    runtime.script = [team.turn] * 200
    config = team_config(tmp_path, *({"name": n} for n in names))
    config = config.model_copy(update={"team": config.team.model_copy(update=limits)})
    return runtime, config


async def test_a_message_carries_its_sender_and_the_reply_comes_back_once(
        tmp_path: Path) -> None:
    team = Team()
    runtime, config = await _team(tmp_path, team, "lead", "rev")
    async with core(tmp_path, runtime) as c:
        team.c = c
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        sent = await c.teams.send(None, "lead", "SEND rev check the diff", wait=True,
                                  timeout=10)
        assert sent.state == "answered"
        await quiet(c)
        [to_rev] = (await c.teams.history(None, "rev")).messages
        assert (to_rev.sender, to_rev.text, to_rev.depth) == ("lead", "lead says: check the diff",
                                                              1)
        assert to_rev.chain_id == sent.id
        lead = (await c.teams.history(None, "lead")).messages
        assert [m.kind for m in lead] == ["message", "reply"]
        reply = lead[1]
        assert reply.sender == "rev" and reply.reply_to == to_rev.id
        assert reply.text.startswith(f"reply from rev to {to_rev.id}: rev done with:")
        assert len((await c.teams.history(None, "rev")).messages) == 1, \
            "lead's answer to the reply was not routed again"
        thread = await c.teams.thread(to_rev.id)
        assert [(m.sender, m.kind) for m in thread.messages] == [
            ("operator", "message"), ("lead", "message"), ("rev", "reply")]


async def test_unknown_recipients_and_oneself_are_refused_and_journaled(tmp_path: Path) -> None:
    team = Team()
    runtime, config = await _team(tmp_path, team, "lead", "rev", "des")
    async with core(tmp_path, runtime) as c:
        team.c = c
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        token = c.supervisor.member("web", "lead").token
        assert token is not None
        with pytest.raises(MessageRefused, match="your teammates: rev, des") as caught:
            await c.router.send_message(token, "nobody", "hi")
        assert caught.value.code == "messaging_unknown_recipient"
        with pytest.raises(MessageRefused) as caught:
            await c.router.send_message(token, "lead", "hi")
        assert caught.value.code == "messaging_to_self"
        refusals = c.store.sync.refusals("web")
        assert [r["code"] for r in refusals] == ["messaging_unknown_recipient",
                                                 "messaging_to_self"]


async def test_a_ping_pong_stops_at_the_chain_depth_limit(tmp_path: Path) -> None:
    """Three members told to always message the next one (A→B→C→A): the chain ends at depth 5
    — replies count as hops, so every branch of it ends there — the refusal is journaled, and
    the number of messages is bounded (each message can cause at most one message and one
    reply, one hop deeper: fewer than 2^6 in all)."""
    team = Team()
    team.always_to = {"a": "b", "b": "c", "c": "a"}  # A→B→C→A counts too
    runtime, config = await _team(tmp_path, team, "a", "b", "c", pair_cooldown=0.0)
    async with core(tmp_path, runtime) as c:
        team.c = c
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        await c.teams.send(None, "a", "start", wait=True, timeout=10)
        await quiet(c)
        assert "messaging_chain_too_deep" in team.errors
        messages = []
        for name in "abc":
            messages += (await c.teams.history(None, name)).messages
        assert max(m.depth for m in messages if m.kind == "message") == 5
        assert max(m.depth for m in messages) == 6, "the last replies still come back"
        assert len(messages) < 2 ** 6
        assert any(r["code"] == "messaging_chain_too_deep" for r in c.store.sync.refusals("web"))


async def test_rate_and_pair_cooldown_guards_use_the_clock(tmp_path: Path) -> None:
    clock = ManualClock()
    team = Team()
    runtime, config = await _team(tmp_path, team, "lead", "rev", "des",
                                  max_messages_per_minute=3, pair_cooldown=3.0)
    async with core(tmp_path, runtime, clock=clock) as c:
        team.c = c
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        token = c.supervisor.member("web", "lead").token
        assert token is not None
        await c.router.send_message(token, "rev", "one")
        with pytest.raises(MessageRefused) as caught:
            await c.router.send_message(token, "rev", "again at once")
        assert caught.value.code == "messaging_pair_cooldown" and caught.value.retryable
        await c.router.send_message(token, "des", "another pair is fine")
        clock.advance(3.5)
        await c.router.send_message(token, "rev", "after the cooldown")
        clock.advance(3.5)
        with pytest.raises(MessageRefused) as caught:
            await c.router.send_message(token, "des", "a fourth within the minute")
        assert caught.value.code == "messaging_rate_limited"
        clock.advance(61)
        await c.router.send_message(token, "des", "a new minute")


async def test_a_token_of_an_earlier_launch_is_refused(tmp_path: Path) -> None:
    team = Team()
    runtime, config = await _team(tmp_path, team, "lead", "rev")
    async with core(tmp_path, runtime) as c:
        team.c = c
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        old = c.supervisor.member("web", "lead").token
        assert old is not None
        await c.teams.restart(None, "lead")
        with pytest.raises(MessageRefused) as caught:
            await c.router.send_message(old, "rev", "from the past")
        assert caught.value.code == "messaging_token_unknown"
        fresh = c.supervisor.member("web", "lead").token
        assert fresh and fresh != old
        card = await c.router.list_team(fresh)
        assert [(m.name, m.you) for m in card.members] == [("lead", True), ("rev", False)]


async def test_a_members_attachment_outside_its_view_is_refused_logged_once_never_journaled(
        tmp_path: Path) -> None:
    """``send_message`` with a file outside the sender's view (the operator's, beside its
    workdir): the typed error ``attachment_outside_member_view``, one event naming the member,
    the path and the rule, no message and no refusal in the journal — while a file of its
    workdir goes through, read from the view (its sha256 in the journal)."""
    team = Team()
    runtime, config = await _team(tmp_path, team, "lead", "rev")
    secret = tmp_path.parent / f"{tmp_path.name}-secret.txt"
    secret.write_text("the operator's secret\n")
    (tmp_path / "notes.txt").write_text("my notes\n")
    async with core(tmp_path, runtime) as c:
        team.c = c
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        token = c.supervisor.member("web", "lead").token
        assert token is not None
        with capture_logs() as logs, pytest.raises(AttachmentOutsideMemberView) as caught:
            await c.router.send_message(token, "rev", "look", [str(secret)])
        assert caught.value.code == "attachment_outside_member_view"
        events = [e for e in logs if e["event"] == "attachment_outside_member_view"]
        assert [(e["member"], e["path"], e["rule"]) for e in events] == [
            ("lead", str(secret), "outside")]
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
            "attachment_outside_member_view"]
        assert c.store.sync.refusals("web") == []
        assert (await c.teams.history(None, "rev")).messages == []
        receipt = await c.router.send_message(token, "rev", "[Doc #1]",
                                              [str(tmp_path / "notes.txt")])
        [planned] = c.store.sync.attachments(receipt.id, "rev")
        assert planned.original_sha256 == hashlib.sha256(b"my notes\n").hexdigest()


class _Elsewhere(LocalHost):
    """A member's host on another machine, as the router sees it: nothing of it runs here
    (``confine`` is None, as ``SshHost``'s and a pod's)."""

    name = "gpu1"

    async def confine(self, argv: Sequence[str], *, env: Mapping[str, str],
                      workdir: Path | None = None) -> Confined | None:
        return None


async def test_a_member_on_another_host_attaches_nothing_read_here(tmp_path: Path) -> None:
    """Its path names a file of its host; the daemon once opened the same path on *this*
    machine, as the operator. Now: ``attachment_outside_member_view`` (rule ``elsewhere``,
    naming the host), even for a path that exists here; nothing journaled."""
    team = Team()
    runtime, config = await _team(tmp_path, team, "lead", "rev")
    (tmp_path / "here.txt").write_text("a file of the operator's machine\n")
    async with core(tmp_path, runtime, hosts=lambda team, member: _Elsewhere()) as c:
        team.c = c
        await c.teams.launch(config, "t.toml", wait=True, timeout=10)
        token = c.supervisor.member("web", "lead").token
        assert token is not None
        with pytest.raises(AttachmentOutsideMemberView) as caught:
            await c.router.send_message(token, "rev", "look", [str(tmp_path / "here.txt")])
        assert caught.value.rule == "elsewhere" and "host gpu1" in caught.value.message
        assert (await c.teams.history(None, "rev")).messages == []
        await c.router.send_message(token, "rev", "the text still goes")


async def test_a_senders_receipt_says_queued_then_read_then_answered(tmp_path: Path) -> None:
    """``message_status``'s receipt (issue 49): queued until the recipient's turn takes it
    (prepared too), read once the turn that carries the message began, answered at its
    end."""
    gate = anyio.Event()
    began = anyio.Event()

    async def held(process: FakeProcess, turn: Turn) -> TurnResult:
        began.set()
        await gate.wait()
        return TurnResult(reply="looked")

    runtime = FakeRuntime([held])
    async with core(tmp_path, runtime) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "lead"}, {"name": "rev"}), "t.toml",
                             wait=True, timeout=10)
        token = c.supervisor.member("web", "lead").token
        assert token is not None
        receipt = await c.router.send_message(token, "rev", "look at this")
        with anyio.fail_after(10):
            await began.wait()
        read = await c.router.message_status(token, receipt.id)
        gate.set()
        with anyio.fail_after(10):
            while (done := await c.router.message_status(token, receipt.id)).state != "answered":
                await all_blocked()
    assert (read.state, read.receipt) == ("sent", "read")
    assert done.receipt == "answered" and done.reply == "looked"
    assert [receipt_of(s) for s in ("queued", "prepared", "failed")] == [
        "queued", "queued", "failed"]
