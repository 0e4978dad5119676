"""The response topic's messages, applied (docs/notify.md): a tapped button posts its token;
a question's reply is the answer token, a space, and the text. Each is verified (signature,
then expiry), its nonce used once (journaled: a replay after a restart is refused too), and
applied through the same calls as the CLI — ``Approvals.decide`` (``teamctl approve|deny|
answer``) or ``Board.review`` (``teamctl task review``) — and the result is published back.

Phones retry and people double-tap: the same decision again is "already decided: approved"
(nothing applied twice); the opposite decision after one is a conflict. None of these is an
error of the daemon's. A tap that arrives while the same button's first tap is still being
applied is told the decision once that first tap has applied it — never "used already"
about an item that is being decided that moment.

Only what a signed, fresh action did is published back, and only through the notifier's rate
window (``receipt``). Everything else posted to the topic — not a token, a forged or expired
one, another team's, a replay — is counted (``_refusals``) and never answered one by one:
the topic's name is in every button, so anyone who saw one could otherwise make the daemon
push to the operator's phone once for each post. A replayed valid token is told the item's
decision once (the first replay of its nonce since the daemon started), within the window.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Literal

import anyio
import structlog

from orchestrator.daemon.approvals import CONFIRM_WAIT, ApprovalJournal
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.notify._tokens import TokenRefused
from orchestrator.errors import (
    ApprovalExpired,
    ApprovalSettled,
    NotFound,
    TaskRefused,
    TeamctlError,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from orchestrator.daemon.approvals import Approvals
    from orchestrator.daemon.board import Board
    from orchestrator.daemon.journal import AsyncJournal
    from orchestrator.daemon.notify._journal import NotifyJournal
    from orchestrator.daemon.notify._refusals import RefusalTally
    from orchestrator.daemon.notify._tokens import Action, Signer

__all__ = ["ReceiptKind", "Responder"]

log = structlog.get_logger("teamctl.notify")

_STATES = {"approve": "approved", "deny": "denied", "answer": "answered"}
_TASK = {"approve": "done", "deny": "in_progress"}
MAX_ANSWER_CHARS = 4000
MAX_NONCES_SEEN = 4096  # nonces remembered since the start (only signed tokens have one)
# how long a second tap waits for the first tap's apply (a decision waits CONFIRM_WAIT at most
# for the runtime's confirmation; the journal's writes are the rest)
FIRST_TAP_WAIT = CONFIRM_WAIT + 5.0

# what a receipt answers: an action applied (``result``: it waits for a slot of the rate
# window), the first replay of a nonce (``replay``: sent only if a slot is free), or the
# operator's own `teamctl notify test` (``test``: never held back, its slot taken)
ReceiptKind = Literal["result", "replay", "test"]


class _Nonces:
    """The nonces seen since the daemon started, and whether a replay of each was answered:
    a replay known here costs no journal write, and each is answered at most once. Bounded:
    the oldest are forgotten (the journal still refuses them; one more answer each)."""

    def __init__(self, limit: int = MAX_NONCES_SEEN) -> None:
        self._limit = limit
        self._answered: OrderedDict[str, bool] = OrderedDict()

    def __contains__(self, nonce: str) -> bool:
        return nonce in self._answered

    def note(self, nonce: str) -> None:
        """A nonce now used (applied here, or found used in the journal)."""
        self._answered.setdefault(nonce, False)
        while len(self._answered) > self._limit:
            self._answered.popitem(last=False)

    def first_answer(self, nonce: str) -> bool:
        """Whether a replay of ``nonce`` is to be answered: True once."""
        first = not self._answered.get(nonce, False)
        self._answered[nonce] = True
        return first


class Responder:
    """One team's actions. ``receipt(item, text, kind)`` publishes a result; ``on_test``
    hears a ``notify test`` tap; ``refused`` counts the posts that apply nothing."""

    def __init__(self, team: str, *, signer: Signer, nonces: NotifyJournal,
                 approvals: Approvals, store: AsyncJournal, board: Board | None,
                 receipt: Callable[[str, str, ReceiptKind], Awaitable[None]],
                 on_test: Callable[[Action], None],
                 refused: RefusalTally, clock: Callable[[], float] = time.time) -> None:
        self.team = team
        self._signer, self._nonces = signer, nonces
        self._approvals, self._rows, self._board = approvals, ApprovalJournal(store), board
        self._receipt = receipt
        self.refused = refused
        self._clock = clock
        self._seen = _Nonces()
        self._applying: dict[str, anyio.Event] = {}  # nonces whose first post is handled now
        self._on_test = on_test  # `teamctl notify test`

    async def handle(self, text: str) -> None:
        """One message of the response topic."""
        token, _, answer = text.strip().partition(" ")
        try:
            action = self._signer.verify(token, self._clock())
        except TokenRefused as refused:
            self.refused.count(refused.why)
            return
        team, _, local = action.item.partition("/")
        if team != self.team:  # another team's notifier shares this response topic
            self.refused.count("other_team")
            return
        first = self._applying.get(action.nonce)
        if first is not None:  # the same button while its first post is handled: a double tap
            await self._replayed(action, local, first)
            return
        handled = self._applying[action.nonce] = anyio.Event()
        try:
            await self._first(action, local, answer)
        finally:
            del self._applying[action.nonce]
            handled.set()

    async def _first(self, action: Action, local: str, answer: str) -> None:
        """The first post of a nonce in this process: used (journaled), then applied — or
        a replay of one used before (an old message, a daemon restarted since)."""
        if not await self._use(action):
            await self._replayed(action, local)
            return
        if local.startswith("test:"):
            # the receipt first: `notify test` reports "receipt published" once this returns
            await self._receipt(action.item, "applied: test", "test")
            self._on_test(action)
            return
        started = time.monotonic()
        result = await self._apply(local, action, answer.strip()[:MAX_ANSWER_CHARS])
        log.info("notify_action_applied", team=self.team, item=action.item,
                 decision=action.decision, result=result,
                 seconds=round(time.monotonic() - started, 4))
        await self._receipt(action.item, result, "result")

    async def _replayed(self, action: Action, local: str,
                        first: anyio.Event | None = None) -> None:
        """A replay: counted, and the first one answered with the item's decision — after
        ``first`` (the same button's first post, still being handled) is done, so a double
        tap is told what that tap did, never the item halfway."""
        self.refused.count("replay")
        if not self._seen.first_answer(action.nonce):
            return  # answered once already: a flood of replays holds no slot
        if first is not None:
            with anyio.move_on_after(FIRST_TAP_WAIT):
                await first.wait()
        await self._receipt(action.item, await self._current(local, action), "replay")

    async def _use(self, action: Action) -> bool:
        """Use the action's nonce: False when it was used before (a replay). One seen since
        the start is refused without a journal write."""
        if action.nonce in self._seen:
            return False
        fresh = await self._nonces.use(action, self._clock())
        self._seen.note(action.nonce)
        return fresh

    async def _apply(self, local: str, action: Action, answer: str) -> str:
        try:
            if local.startswith("T") and local[1:].isdigit():
                return await self._review(int(local[1:]), action)
            if action.decision == "answer" and not answer:
                return "refused: an answer needs text after the token"
            doc = await self._approvals.decide(
                local, action.decision, text=answer if action.decision == "answer" else None,
                message="denied from a phone (teamctl notify)"
                if action.decision == "deny" else None)
        except ApprovalExpired:
            return "expired"
        except ApprovalSettled as settled:
            return _settled(action, str(settled.details.get("state")))
        except NotFound:
            return "refused: unknown item"
        except TeamctlError as exc:
            return f"refused: {exc.code}"
        told = "the runtime confirmed it" if doc.confirmed else "not yet confirmed by the runtime"
        return f"applied: {doc.approval.state} ({told})"

    async def _review(self, task_id: int, action: Action) -> str:
        if self._board is None or action.decision == "answer":
            return "refused: not a task review"
        try:
            await self._board.review(task_id, by=OPERATOR, approve=action.decision == "approve",
                                     note="from a phone (teamctl notify)", team=self.team)
        except TaskRefused:
            return await self._current(f"T{task_id}", action)
        except NotFound:
            return "refused: unknown item"
        return "applied: approved (done)" if action.decision == "approve" else \
            "applied: rejected (back in progress)"

    async def _current(self, local: str, action: Action) -> str:
        """What a replayed or late action is told: the item's decision now."""
        if local.startswith("T") and local[1:].isdigit() and self._board is not None:
            try:
                status = (await self._board.get(int(local[1:]), self.team)).task.status
            except NotFound:
                return "refused: unknown item"
            if status == _TASK.get(action.decision):
                return f"already decided: {'approved' if status == 'done' else 'rejected'}"
            return f"conflict: the task is {status}"
        if local.startswith("test:"):
            return "already decided: test"
        row = await self._rows.get(local)
        if row is None:
            return "refused: unknown item"
        if row["state"] == "pending":
            return "refused: this button was used already; answer in 'teamctl approvals'"
        return "expired" if row["state"] == "expired" else _settled(action, row["state"])


def _settled(action: Action, state: str) -> str:
    if state == "expired":
        return "expired"
    if state == _STATES[action.decision]:
        return f"already decided: {state}"
    return f"conflict: already {state}"
