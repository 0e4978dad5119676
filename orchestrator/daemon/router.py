"""The router: teammates' messages to each other, with their guards, and replies routed back.

A member reaches the router only through its MCP server (``teamctl mcp``), which presents the
member's per-launch token — never a name — from a process of that member's own (its runtime's
tree; orchestrator/daemon/control/_peers.py): a token read from a teammate's mcp.json is refused
(``mcp_token_not_yours``), and a token of an earlier launch is refused. Its message is
journaled like the operator's, with its sender, the chain it belongs to and its depth (hops
from the operator's message). When the recipient answers, the answer goes back to the sender
as a new message ("reply from reviewer to <id>: …"); a reply is never routed again, so no
pair of prompts can ping-pong through replies.

Guards live here, not in prompts (defaults, configurable in ``[team]``): a chain is at most
``max_chain_depth`` hops deep, counted over every member it passed through (A→B→C→A counts);
at most ``max_messages_per_minute`` per sender; ``pair_cooldown`` seconds between two messages
from one member to the same other; never to oneself; an unknown recipient is answered with the
names that exist. Every refusal is journaled, logged and returned to the sender as a typed tool
error — nothing is dropped silently.

A member's attachments are read with its own rights, in its own view (daemon/members/_view.py,
daemon/members/_attachments.py): each path is opened once, proven to be a file the member can
read itself, and read here; the message carries the bytes, so nothing later opens the name as
the operator. A path outside the view is ``attachment_outside_member_view``: logged once (the
member, the path, the rule), nothing read, nothing journaled.

A turn's message is sent once: ``send_message`` is idempotent per (the sender's turn in
flight, recipient, text), so a cut turn that is continued and sends it again gets the first
receipt, uncounted by the guards (docs/dev/architecture.md, "Effects once").
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.daemon.control import belongs_to
from orchestrator.daemon.members import read_in_view, view_of
from orchestrator.daemon.queue import Origin
from orchestrator.errors import AttachmentOutsideMemberView, TeamctlError
from orchestrator.protocol.members import (
    MemberCard,
    MessageStatus,
    Receipt,
    TeamCard,
    ToolsListedAck,
    receipt_of,
)
from orchestrator.protocol.messages import SendResult

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from orchestrator.attachments.intake import Original
    from orchestrator.config import TeamConfig
    from orchestrator.daemon.members import MemberState, Supervisor
    from orchestrator.daemon.queue import AsyncStore, Delivery
    from orchestrator.daemon.teams import Teams
    from orchestrator.paths import Home

__all__ = ["MessageRefused", "Router"]

log = structlog.get_logger("teamctl.router")


class MessageRefused(TeamctlError):
    """A teammate's message the router's guards refused (returned as a tool error)."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable


class Router:
    def __init__(self, teams: Teams, supervisor: Supervisor, store: AsyncStore, *,
                 home: Home, vision: Callable[[str, str | None, bool | None], bool | None],
                 working_on: Callable[[str, str], Awaitable[int | None]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._teams = teams
        self._supervisor = supervisor
        self._store = store
        self._home = home  # teamctl's state dir: outside every member's view
        self._vision = vision
        self._clock = clock
        self._sent: defaultdict[tuple[str, str], deque[float]] = defaultdict(deque)
        self._pairs: dict[tuple[str, str, str], float] = {}
        # one send_message at a time per sender: a repeat is looked up before it is sent
        self._sending: defaultdict[tuple[str, str], anyio.Lock] = defaultdict(anyio.Lock)
        # one reply routed at a time: a reply is looked up (owed or not) before it is sent
        self._routing = anyio.Lock()
        # the board's task a member holds in progress (team, member → its id; None: none): a
        # message it sends belongs to that task (docs/board.md)
        self._working_on = working_on

    # -- the tools ----------------------------------------------------------------------------

    async def send_message(self, token: str, to: str, text: str,
                           attachments: Sequence[str] = ()) -> Receipt:
        sender = self._sender(token)
        config = self._config(sender)
        origin = await self._origin(sender)
        async with self._sending[(config.name, sender.name)]:
            again = await self._sent_before(config.name, sender.name, origin, to, text)
            if again is not None:
                return again
            try:
                self._check(config, sender, to, origin)
                originals = await self._read_attachments(config, sender, attachments)
                result = await self._teams.send(config.name, to, text, wait=False,
                                                timeout=1.0, attachments=originals,
                                                origin=origin)
                assert isinstance(result, SendResult)
            except AttachmentOutsideMemberView as exc:
                log.warning("attachment_outside_member_view", team=config.name,
                            member=sender.name, recipient=to, path=exc.path, rule=exc.rule)
                raise
            except TeamctlError as exc:
                await self._refused(config.name, sender.name, to, exc, origin.chain_id)
                raise
        self._count(config.name, sender.name, to)
        log.info("teammate_message", team=config.name, sender=sender.name, recipient=to,
                 message_id=result.id, chain_id=origin.chain_id, depth=origin.depth)
        # its account's window held or past the reserve (docs/costs.md, "Quota windows")
        waits = "".join(f"; {to} waits — {note}" for note in result.notes
                        if note.startswith(("held: ", "paused: ")))
        return Receipt(id=result.id, to=to, depth=origin.depth,
                       text=f"queued as {result.id} for {to}; their reply will come to you as "
                            f"a new message (queued, not yet delivered){waits}")

    async def _read_attachments(self, config: TeamConfig, sender: MemberState,
                                paths: Sequence[str]) -> list[Original]:
        """The sender's attachments read in its own view, in a worker thread (file I/O)."""
        if not paths:
            return []
        view = await view_of(sender, config, self._home)
        return await anyio.to_thread.run_sync(read_in_view, view, list(paths))

    async def list_team(self, token: str) -> TeamCard:
        sender = self._sender(token)
        config = self._config(sender)
        cards = []
        for state in self._supervisor.members(config.name):
            spec = state.config
            sees = self._vision(spec.runtime, spec.model, spec.vision)
            described = spec.describe_with
            cards.append(MemberCard(name=state.name, runtime=spec.runtime, model=spec.model,
                                    sees_images=sees, launch=state.launch,
                                    images_described=None if described is None else
                                    f"{described.runtime}:{described.model}",
                                    readiness=state.readiness, you=state is sender))
        return TeamCard(team=config.name, members=cards)

    def tools_listed(self, token: str) -> ToolsListedAck:
        """The member's runtime listed teamctl's MCP tools (its ``teamctl mcp`` says so once,
        after its first ``tools/list``): a start that waits for them may go on."""
        sender = self._sender(token)
        if sender.mcp_listed is not None:
            sender.mcp_listed.set()
        return ToolsListedAck()

    async def message_status(self, token: str, message_id: str) -> MessageStatus:
        sender = self._sender(token)
        delivery = await self._store.delivery(message_id)
        if delivery is None or delivery.team != sender.team or sender.name not in (
                delivery.origin.sender, delivery.member):
            raise MessageRefused("messaging_unknown_message",
                                 f"no message {message_id} sent by or to you")
        return MessageStatus(id=message_id, to=delivery.member, state=delivery.state,
                             reply=delivery.reply, error=delivery.error_message,
                             receipt=receipt_of(delivery.state))

    # -- routed replies -----------------------------------------------------------------------

    async def on_answered(self, delivery: Delivery, reply: str) -> None:
        """A teammate's message was answered: the answer goes back to its sender, once."""
        origin = delivery.origin
        if origin.sender is None or origin.kind != "message":
            return
        if self._teams.running(delivery.team) is None:
            log.warning("reply_not_routed", team=delivery.team, message_id=delivery.message_id,
                        reason="the team is not running")
            return
        async with self._routing:  # the owed-replies pass may route it too: once
            owed = await self._store.owed_replies(delivery.team, delivery.message_id)
            if any(d.member == delivery.member for d in owed):
                await self._route(delivery, reply)

    async def route_owed_replies(self) -> None:
        """On daemon start: the replies a kill -9 left unrouted (the answer journaled, its
        reply not yet) are routed now, once."""
        async with self._routing:
            for team in self._teams.names():
                for delivery in await self._store.owed_replies(team):
                    log.warning("reply_owed", team=team, message_id=delivery.message_id,
                                member=delivery.member)
                    try:
                        await self._route(delivery, delivery.reply or "")
                    except TeamctlError as exc:
                        log.warning("reply_not_routed", team=team,
                                    message_id=delivery.message_id, reason=exc.message)

    async def _route(self, delivery: Delivery, reply: str) -> None:
        origin = delivery.origin
        assert origin.sender is not None
        # a reply is a hop too: whatever its receiver sends next is one deeper in the chain
        back = Origin(sender=delivery.member, kind="reply", chain_id=origin.chain_id,
                      depth=origin.depth + 1, reply_to=delivery.message_id)
        text = f"reply from {delivery.member} to {delivery.message_id}: {reply}"
        result = await self._teams.send(delivery.team, origin.sender, text, wait=False,
                                        timeout=1.0, origin=back)
        assert isinstance(result, SendResult)
        log.info("reply_routed", team=delivery.team, sender=delivery.member,
                 recipient=origin.sender, message_id=result.id, reply_to=delivery.message_id)

    # -- guards -------------------------------------------------------------------------------

    async def check_caller(self, token: str, pid: int | None, *,
                           socket_member: tuple[str, str] | None = None) -> None:
        """A current token is good only from its member's own processes (peers.belongs_to),
        and on a sandboxed member's own socket only if it is that member's (``socket_member``):
        ``mcp_token_not_yours`` otherwise, logged without the token; an unknown token is left
        to the tool (``messaging_token_unknown``)."""
        state = self._supervisor.by_token(token)
        mine = socket_member is None or state is None or (state.team, state.name) == socket_member
        if state is None or (mine and pid is not None and await belongs_to(state, pid)):
            return
        log.warning("mcp_token_not_yours", team=state.team, member=state.name, peer_pid=pid)
        raise MessageRefused(
            "mcp_token_not_yours",
            "this MCP token belongs to another member, and this process is not one of that "
            "member's (its runtime or a process it started); call the tools through your own "
            "teamctl MCP server; nothing was done")

    def _sender(self, token: str) -> MemberState:
        state = self._supervisor.by_token(token)
        if state is None:
            raise MessageRefused("messaging_token_unknown",
                                 "this MCP session's member token is not current (the member "
                                 "was restarted or stopped); nothing was sent", retryable=True)
        return state

    def _config(self, sender: MemberState) -> TeamConfig:
        config = self._teams.running(sender.team)
        if config is None:
            raise MessageRefused("messaging_team_stopped", f"team {sender.team} is not running")
        return config

    async def _origin(self, sender: MemberState) -> Origin:
        """The chain the sender is in: the message of its turn in flight (none: a new chain)."""
        turn = sender.slot.turn
        current = await self._store.delivery(turn, sender.name) \
            if turn else None
        task = await self._working_on(sender.team, sender.name)
        if current is None:
            return Origin(sender=sender.name, depth=1, task_id=task)
        return Origin(sender=sender.name, chain_id=current.origin.chain_id,
                      depth=current.origin.depth + 1, delivery=current.message_id,
                      task_id=task)

    async def _sent_before(self, team: str, sender: str, origin: Origin, to: str,
                           text: str) -> Receipt | None:
        """Effects once: the receipt of the same message (recipient, text) already sent from
        an earlier attempt of the sender's turn in flight (a redelivered turn doing its steps
        again) — not sent again, not counted by the guards; None when it is new."""
        if origin.delivery is None:
            return None
        first = await self._store.sent_from(team, origin.delivery, sender, to, text)
        if first is None:
            return None
        log.info("teammate_message_repeated", team=team, sender=sender, recipient=to,
                 message_id=first, turn=origin.delivery)
        return Receipt(id=first, to=to, depth=origin.depth,
                       text=f"already sent as {first} for {to} earlier in this turn (before "
                            "it was interrupted): not sent again; their reply will come to "
                            "you as a new message")

    def _check(self, config: TeamConfig, sender: MemberState, to: str, origin: Origin) -> None:
        names = [m.name for m in config.members]
        if to == sender.name:
            raise MessageRefused("messaging_to_self", "you cannot send a message to yourself")
        if to not in names:
            others = ", ".join(n for n in names if n != sender.name) or "none"
            raise MessageRefused("messaging_unknown_recipient",
                                 f"no teammate named {to!r}; your teammates: {others}")
        limits = config.team
        if origin.depth > limits.max_chain_depth:
            raise MessageRefused("messaging_chain_too_deep",
                                 f"this conversation is already {origin.depth - 1} hops deep "
                                 f"(the limit is {limits.max_chain_depth}); answer in your reply "
                                 "instead of sending a new message")
        now = self._clock()
        recent = self._sent[(config.name, sender.name)]
        while recent and now - recent[0] > 60.0:
            recent.popleft()
        if len(recent) >= limits.max_messages_per_minute:
            raise MessageRefused("messaging_rate_limited",
                                 f"at most {limits.max_messages_per_minute} messages a minute; "
                                 "wait, or put it all in one message", retryable=True)
        last = self._pairs.get((config.name, sender.name, to))
        if last is not None and now - last < limits.pair_cooldown:
            raise MessageRefused("messaging_pair_cooldown",
                                 f"you messaged {to} {now - last:.1f}s ago (the minimum gap is "
                                 f"{limits.pair_cooldown:g}s); wait for their reply",
                                 retryable=True)

    def _count(self, team: str, sender: str, to: str) -> None:
        now = self._clock()
        self._sent[(team, sender)].append(now)
        self._pairs[(team, sender, to)] = now

    async def _refused(self, team: str, sender: str, to: str, exc: TeamctlError,
                       chain_id: str | None) -> None:
        log.warning("teammate_message_refused", team=team, sender=sender, recipient=to,
                    code=exc.code, error=exc.message)
        await self._store.add_refusal(team, sender, to, exc.code, exc.message, chain_id)
