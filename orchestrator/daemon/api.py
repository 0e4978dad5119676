"""The control server: JSON-RPC 2.0 over the Unix socket, for this user only.

Each connection is checked with SO_PEERCRED (a peer of another uid is refused), each request is
one line of at most REQUEST_LIMIT_BYTES nesting at most MAX_DEPTH levels (``rpc.decode``), each
method's params are validated by a pydantic model (unknown keys refused). Application errors
travel as ``error.data`` (code, message, retryable, exit code); every answer — results and
errors alike — passes through the redactor before it leaves the daemon. Connection limits and
deadlines live in ``orchestrator.daemon.connections``.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator import rpc
from orchestrator.config import TeamConfig, missing_workdirs
from orchestrator.daemon.peers import peer_pid
from orchestrator.errors import (
    DaemonStopping,
    InternalError,
    RequestTooLarge,
    TeamctlError,
    TeamFileError,
    UsageError,
)
from orchestrator.limits import (
    APPROVAL_ID_PATTERN,
    APPROVAL_SHA256_PATTERN,
    MAX_ATTACHMENTS,
    MAX_PAGE_ROWS,
    MAX_SEQ,
    MAX_WAIT_SECONDS,
    NAME_PATTERN,
    ULID_PATTERN,
)
from orchestrator.redaction import redact, redact_value
from orchestrator.wire import ChangesDoc, Ping, StopResult, UiDoc

if TYPE_CHECKING:
    from orchestrator.daemon.approvals import Approvals
    from orchestrator.daemon.board_api import BoardApi
    from orchestrator.daemon.board_members import MemberBoardApi
    from orchestrator.daemon.connections import Connection
    from orchestrator.daemon.live_view import LazyLiveView
    from orchestrator.daemon.router import Router
    from orchestrator.daemon.teams import Teams

__all__ = ["ControlServer", "peer_uid"]

log = structlog.get_logger("teamctl.api")

Handler = Callable[[Any], Awaitable[Any]]


# the pid of the process at the other end of the connection being served (SO_PEERCRED); None
# for a request that did not come over the socket
_PEER_PID: ContextVar[int | None] = ContextVar("peer_pid", default=None)
# a sandboxed member's own socket (daemon/member_sockets.py): its team and name; None on the
# control socket. There only member.* methods with that member's token are served.
_SOCKET_MEMBER: ContextVar[tuple[str, str] | None] = ContextVar("socket_member", default=None)
# answers that are a secret for the caller itself, over the 0600 socket to the same uid: the
# live view's one-time sign-in link (it is never logged; the page redeems it once)
_OWN_SECRET = frozenset({"ui"})


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LaunchParams(_Params):
    config: dict[str, Any]
    file: str
    wait: bool = True
    timeout: float | None = Field(default=None, gt=0, le=MAX_WAIT_SECONDS, allow_inf_nan=False)


class TeamParams(_Params):
    team: str | None = Field(default=None, pattern=NAME_PATTERN)


class MemberParams(TeamParams):
    member: str = Field(pattern=NAME_PATTERN)


class SendParams(MemberParams):
    text: str
    attachments: list[str] = Field(default=[], max_length=MAX_ATTACHMENTS)
    wait: bool = False
    dry_run: bool = False
    timeout: float = Field(default=600.0, gt=0, le=MAX_WAIT_SECONDS, allow_inf_nan=False)


class HistoryParams(MemberParams):
    limit: int = Field(default=50, ge=1, le=MAX_PAGE_ROWS)
    before: str | None = Field(default=None, pattern=ULID_PATTERN)


class ExportParams(TeamParams):
    member: str | None = Field(default=None, pattern=NAME_PATTERN)  # None: every member


class WorktreesParams(TeamParams):
    prune: bool = False


class DiffParams(MemberParams):
    stat: bool = False


class TokenParams(_Params):
    token: str = Field(min_length=16, max_length=128)


class MemberSendParams(TokenParams):
    to: str = Field(max_length=200)
    text: str = Field(max_length=200_000)
    attachments: list[str] = Field(default=[], max_length=MAX_ATTACHMENTS)


class MemberStatusParams(TokenParams):
    id: str = Field(pattern=ULID_PATTERN)


class ThreadParams(_Params):
    id: str = Field(pattern=ULID_PATTERN)


class EmptyParams(_Params):
    pass


class ApprovalsParams(TeamParams):
    id: str | None = Field(default=None, pattern=APPROVAL_ID_PATTERN)  # that one request
    all: bool = False
    after: int = Field(default=0, ge=0, le=MAX_SEQ)
    wait: float = Field(default=0.0, ge=0, le=25.0, allow_inf_nan=False)
    limit: int = Field(default=MAX_PAGE_ROWS, ge=1, le=MAX_PAGE_ROWS)
    offset: int = Field(default=0, ge=0, le=MAX_SEQ)


class ApprovalRulesParams(TeamParams):
    member: str | None = Field(default=None, pattern=NAME_PATTERN)
    all: bool = False


class RevokeRuleParams(TeamParams):
    member: str | None = Field(default=None, pattern=NAME_PATTERN)
    rule: str = Field(min_length=1, max_length=600)


class _DecisionParams(_Params):
    id: str = Field(pattern=APPROVAL_ID_PATTERN)
    # the request's sha256 (or its start) as the operator read it: another request's is refused
    sha256: str | None = Field(default=None, pattern=APPROVAL_SHA256_PATTERN)


class ApproveParams(_DecisionParams):
    always: bool = False
    preview: bool = False  # --always: what would be kept, nothing settled
    rule: str | None = Field(default=None, max_length=600)  # the rule the operator was shown


class DenyParams(_DecisionParams):
    message: str | None = Field(default=None, max_length=10_000)


class ChangesParams(_Params):
    after: int = Field(default=0, ge=0, le=MAX_SEQ)
    wait: float = Field(default=0.0, ge=0, le=25.0, allow_inf_nan=False)


class UiParams(_Params):
    port: int | None = Field(default=None, ge=1024, le=65535)


class UsageParams(TeamParams):
    by: Literal["member", "model", "day"] = "member"
    prices: bool = False


_USD = Field(default=None, ge=0, le=1_000_000, allow_inf_nan=False)
_TOKENS = Field(default=None, ge=0, le=10**13)


class BudgetParams(TeamParams):
    """Strict: "5" and true are refused, not coerced to 5.0 and 1.0 (an int is a float)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    member: str | None = Field(default=None, pattern=NAME_PATTERN)
    usd: float | None = _USD
    add_usd: float | None = _USD
    tokens: int | None = _TOKENS
    add_tokens: int | None = _TOKENS
    clear: bool = False


class AnswerParams(_DecisionParams):
    text: str = Field(min_length=1, max_length=100_000)


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (Linux SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class ControlServer:
    """Serves the control API until cancelled; ``shutdown`` is called for ``stop`` (all)."""

    def __init__(self, teams: Teams, *, on_stop_all: Callable[[], None],
                 allowed_uid: int | None = None, router: Router | None = None,
                 approvals: Approvals | None = None, web: LazyLiveView | None = None,
                 board: BoardApi | None = None,
                 member_board: MemberBoardApi | None = None,
                 more_methods: dict[str, tuple[type[BaseModel], Handler]] | None = None
                 ) -> None:
        self._teams = teams
        self._web = web
        self._router = router
        self._approvals = approvals
        self._allowed_uid = os.getuid() if allowed_uid is None else allowed_uid
        self._on_stop_all = on_stop_all
        self._stop_all_requested = False
        self._methods: dict[str, tuple[type[BaseModel], Handler]] = {
            "ping": (EmptyParams, self._ping),
            "launch": (LaunchParams, self._launch),
            "status": (TeamParams, self._status),
            "send": (SendParams, self._send),
            "history": (HistoryParams, self._history),
            "export": (ExportParams, self._export),
            "restart": (MemberParams, self._restart),
            "stop": (TeamParams, self._stop),
            "worktrees": (WorktreesParams, self._worktrees),
            "thread": (ThreadParams, self._thread),
            # a member's MCP server (teamctl mcp): it acts as the member its token names
            "member.send_message": (MemberSendParams, self._member_send),
            "member.list_team": (TokenParams, self._member_team),
            "member.message_status": (MemberStatusParams, self._member_status),
            "member.tools_listed": (TokenParams, self._member_tools_listed),
            "diff": (DiffParams, self._diff),
            "approvals": (ApprovalsParams, self._list_approvals),
            "approval_rules": (ApprovalRulesParams, self._approval_rules),
            "revoke_rule": (RevokeRuleParams, self._revoke_rule),
            "approve": (ApproveParams, self._approve),
            "deny": (DenyParams, self._deny),
            "answer": (AnswerParams, self._answer),
            "ui": (UiParams, self._ui),
            "changes": (ChangesParams, self._changes),
            "usage": (UsageParams, self._usage),
            "budget": (BudgetParams, self._budget),
        }
        if board is not None:  # task_add, task_list, ... (daemon.board_api)
            self._methods.update(board.methods())
        if member_board is not None:  # member.task_*: a member's MCP task tools
            self._methods.update(member_board.methods(self._member))
        self._methods.update(more_methods or {})  # notify_test (daemon.notify_api)

    async def handle_member_connection(self, connection: Connection, team: str,
                                       member: str) -> None:
        """A connection on ``member``'s own socket: ``member.*`` calls with its token only."""
        _SOCKET_MEMBER.set((team, member))  # this connection's task only
        await self.handle_connection(connection)

    async def handle_connection(self, connection: Connection) -> None:
        """Serve one connection's requests in order until the client closes it."""
        uid = peer_uid(connection.raw_socket)
        if uid != self._allowed_uid:
            log.warning("control_peer_refused", peer_uid=uid)
            return
        _PEER_PID.set(peer_pid(connection.raw_socket))  # this connection's task only
        while True:
            try:
                line = await connection.receive_line()
            except RequestTooLarge as exc:
                log.warning("control_request_too_large", limit_bytes=rpc.REQUEST_LIMIT_BYTES)
                await connection.send(_app_error(None, exc))
                return
            if line is None:
                return
            try:
                if not await connection.send(await self.dispatch(line)):
                    return
            finally:
                if self._stop_all_requested:
                    self._on_stop_all()  # after the answer to 'stop' went out

    async def dispatch(self, line: bytes) -> bytes:
        """One request line → one answer line; never raises (a bug is an internal error)."""
        try:
            message = rpc.decode(line)
        except rpc.RequestRejected as exc:
            return rpc.error_response(None, exc.code, exc.message,
                                      UsageError(f"bad request: {exc.message}").to_wire())
        request_id, method = message.get("id"), message.get("method")
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            return rpc.error_response(request_id, rpc.INVALID_REQUEST,
                                      "not a JSON-RPC 2.0 request")
        entry = self._methods.get(method)
        if entry is None or (_SOCKET_MEMBER.get() is not None
                             and not method.startswith("member.")):
            return rpc.error_response(request_id, rpc.METHOD_NOT_FOUND,
                                      f"no method {redact(method[:64])!r}")
        model, handler = entry
        try:
            params = model.model_validate(message.get("params") or {})
        except ValidationError as exc:
            error = UsageError(f"invalid request: {_describe(exc)}")
            return rpc.error_response(request_id, rpc.INVALID_PARAMS, error.message,
                                      redact_value(error.to_wire()))
        try:
            result = _document(await handler(params))
            if method not in _OWN_SECRET:
                result = redact_value(result)
            return rpc.result_response(request_id, result)
        except TeamctlError as exc:
            log.warning("control_request_failed", method=method, code=exc.code,
                        error=exc.message)
            return _app_error(request_id, exc)
        except Exception as exc:
            log.exception("control_request_crashed", method=method)
            return _app_error(request_id, InternalError(f"handling '{method}'", exc))

    async def _ping(self, _params: EmptyParams) -> Ping:
        return Ping(pid=os.getpid())

    async def _launch(self, params: LaunchParams) -> BaseModel:
        if self._stop_all_requested:  # answered 'stop' for everything, exiting: a team
            raise DaemonStopping()    # launched now would be stopped with it
        try:
            config = TeamConfig.model_validate(params.config)
        except ValidationError as exc:
            raise TeamFileError(params.file, [redact(str(exc))]) from exc
        problems = missing_workdirs(config)
        if problems:
            raise TeamFileError(params.file, problems)
        return await self._teams.launch(config, params.file, wait=params.wait,
                                        timeout=params.timeout)

    async def _status(self, params: TeamParams) -> BaseModel:
        return await self._teams.status(params.team)

    async def _send(self, params: SendParams) -> BaseModel:
        return await self._teams.send(params.team, params.member, params.text,
                                      wait=params.wait, timeout=params.timeout,
                                      attachments=params.attachments, dry_run=params.dry_run)

    async def _history(self, params: HistoryParams) -> BaseModel:
        return await self._teams.history(params.team, params.member, limit=params.limit,
                                         before=params.before)

    async def _export(self, params: ExportParams) -> BaseModel:
        return await self._teams.export(params.team, params.member)

    async def _restart(self, params: MemberParams) -> BaseModel:
        return await self._teams.restart(params.team, params.member)

    async def _usage(self, params: UsageParams) -> BaseModel:
        if params.prices:
            return self._teams.prices()
        return await self._teams.usage(params.team, params.by)

    async def _budget(self, params: BudgetParams) -> BaseModel:
        return await self._teams.budget(
            params.team, params.member, usd=params.usd, add_usd=params.add_usd,
            tokens=params.tokens, add_tokens=params.add_tokens, clear=params.clear)

    async def _thread(self, params: ThreadParams) -> BaseModel:
        return await self._teams.thread(params.id)

    def _queue(self) -> Approvals:
        if self._approvals is None:
            raise UsageError("this daemon keeps no approvals queue")
        return self._approvals

    async def _list_approvals(self, params: ApprovalsParams) -> BaseModel:
        if params.id is not None:
            return await self._queue().one(params.id)
        return await self._queue().query(params.team, everything=params.all,
                                         after=params.after, wait=params.wait,
                                         limit=params.limit, offset=params.offset)

    async def _approval_rules(self, params: ApprovalRulesParams) -> BaseModel:
        return await self._queue().rules(params.team, params.member, everything=params.all)

    async def _revoke_rule(self, params: RevokeRuleParams) -> BaseModel:
        return await self._queue().revoke(params.rule, params.team, params.member)

    async def _approve(self, params: ApproveParams) -> BaseModel:
        if params.preview:
            return await self._queue().preview(params.id)
        return await self._queue().decide(params.id, "approve", always=params.always,
                                          rule=params.rule, sha256=params.sha256)

    async def _deny(self, params: DenyParams) -> BaseModel:
        return await self._queue().decide(params.id, "deny", message=params.message,
                                          sha256=params.sha256)

    async def _answer(self, params: AnswerParams) -> BaseModel:
        return await self._queue().decide(params.id, "answer", text=params.text,
                                          sha256=params.sha256)

    async def _changes(self, params: ChangesParams) -> BaseModel:
        if self._web is None:
            raise UsageError("this daemon keeps no change feed")
        version = await self._web.changes.wait(params.after, params.wait)
        return ChangesDoc(version=version)

    async def _ui(self, params: UiParams) -> BaseModel:
        if self._web is None:
            raise UsageError("this daemon serves no live view")
        return UiDoc(url=self._web.url(params.port))

    def _routing(self) -> Router:
        if self._router is None:
            raise UsageError("this daemon routes no teammates' messages")
        return self._router

    async def _member(self, token: str) -> Router:
        """The router, once the caller is known to be the token's member's own process
        (orchestrator/daemon/peers.py): a token read from a teammate's mcp.json is refused."""
        router = self._routing()
        await router.check_caller(token, _PEER_PID.get(), socket_member=_SOCKET_MEMBER.get())
        return router

    async def _member_send(self, params: MemberSendParams) -> BaseModel:
        return await (await self._member(params.token)).send_message(
            params.token, params.to, params.text, params.attachments)

    async def _member_team(self, params: TokenParams) -> BaseModel:
        return await (await self._member(params.token)).list_team(params.token)

    async def _member_tools_listed(self, params: TokenParams) -> BaseModel:
        """No peer check: it comes while the member starts (its process is not known as its
        own yet), and it does nothing but end that start's wait for its tools — the current
        launch's token is still required."""
        return self._routing().tools_listed(params.token)

    async def _member_status(self, params: MemberStatusParams) -> BaseModel:
        return await (await self._member(params.token)).message_status(params.token, params.id)

    async def _worktrees(self, params: WorktreesParams) -> BaseModel:
        return await self._teams.worktrees(params.team, prune=params.prune)

    async def _diff(self, params: DiffParams) -> BaseModel:
        return await self._teams.diff(params.team, params.member, stat=params.stat)

    async def _stop(self, params: TeamParams) -> BaseModel:
        stopped = await self._teams.stop(params.team)
        if params.team is None:
            self._stop_all_requested = True
        return StopResult(stopped=stopped, daemon_stopping=params.team is None)


def _document(result: Any) -> Any:
    """A wire model as its JSON form (every answer is one; the stub teams of tests may
    answer plain dicts)."""
    return result.model_dump(mode="json") if isinstance(result, BaseModel) else result


def _app_error(request_id: Any, exc: TeamctlError) -> bytes:
    return rpc.error_response(request_id, rpc.APP_ERROR, redact(exc.message),
                              redact_value(exc.to_wire()))


def _describe(exc: ValidationError) -> str:
    """Pydantic's errors in one line: ``field: problem`` (values never shown)."""
    problems = []
    for error in exc.errors()[:5]:
        where = ".".join(str(part) for part in error["loc"]) or "params"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)
