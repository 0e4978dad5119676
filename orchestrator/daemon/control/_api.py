"""The control server: JSON-RPC 2.0 over the Unix socket, for this user only.

Each connection is checked with SO_PEERCRED (a peer of another uid is refused), each request is
one line of at most REQUEST_LIMIT_BYTES nesting at most MAX_DEPTH levels (``rpc.decode``). The
methods are the rows of ``orchestrator.protocol``'s table: ``dispatch`` puts each handler on its
row (one handler per row, none for a row the table lacks), a request's params are validated by
its row's pydantic model (unknown keys refused), and a member's own socket reaches only the
``caller="member"`` rows. Application errors
travel as ``error.data`` (code, message, retryable, exit code); every answer — results and
errors alike — passes through the redactor before it leaves the daemon. Connection limits and
deadlines live in ``orchestrator.daemon.control._connections``.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import structlog
from pydantic import BaseModel, ValidationError

from orchestrator import protocol, rpc
from orchestrator.config import TeamConfig, missing_workdirs
from orchestrator.daemon.control._peers import peer_pid
from orchestrator.daemon.mcp import McpServer, opened
from orchestrator.errors import (
    DaemonStopping,
    InternalError,
    RequestTooLarge,
    TeamctlError,
    TeamFileError,
    UsageError,
    error_from_wire,
)
from orchestrator.protocol.live import ChangesDoc, UiDoc
from orchestrator.protocol.teams import Ping, StopResult
from orchestrator.redaction import redact, redact_value

if TYPE_CHECKING:
    from orchestrator.daemon.approvals import Approvals
    from orchestrator.daemon.board import BoardApi, MemberBoardApi
    from orchestrator.daemon.control._connections import Connection
    from orchestrator.daemon.live_view import LazyLiveView
    from orchestrator.daemon.mcp import Caller
    from orchestrator.daemon.teams import Teams
    from orchestrator.protocol.approvals import (
        AnswerParams,
        ApprovalRulesParams,
        ApprovalsParams,
        ApproveParams,
        DenyParams,
        RevokeRuleParams,
    )
    from orchestrator.protocol.common import EmptyParams, MemberParams, TeamParams, TokenParams
    from orchestrator.protocol.costs import BudgetParams, UsageParams
    from orchestrator.protocol.export import ExportParams
    from orchestrator.protocol.live import ChangesParams, UiParams
    from orchestrator.protocol.members import (
        MemberSendParams,
        MemberStatusParams,
        MessageStatus,
        Receipt,
        TeamCard,
        ToolsListedAck,
    )
    from orchestrator.protocol.messages import HistoryParams, SendParams, ThreadParams
    from orchestrator.protocol.teams import LaunchParams
    from orchestrator.protocol.worktrees import DiffParams, WorktreesParams

__all__ = ["ControlServer", "Served", "dispatch", "peer_uid"]

log = structlog.get_logger("teamctl.api")

Handler = Callable[[Any], Awaitable[Any]]


# the pid of the process at the other end of the connection being served (SO_PEERCRED); None
# for a request that did not come over the socket
_PEER_PID: ContextVar[int | None] = ContextVar("peer_pid", default=None)
# a sandboxed member's own socket (daemon/control/_member_sockets.py): its team and name; None
# on the control socket. There only member.* methods with that member's token are served.
_SOCKET_MEMBER: ContextVar[tuple[str, str] | None] = ContextVar("socket_member", default=None)
# answers that are a secret for the caller itself, over the 0600 socket to the same uid: the
# live view's one-time sign-in link (it is never logged; the page redeems it once)
_OWN_SECRET = frozenset({protocol.UI.name})


class MemberRouter(Protocol):
    """What the ``member.*`` methods ask of the router (``daemon/router.py``'s ``Router``; a
    protocol here, so the control wing and the router, which asks it who a peer is, do not
    import each other)."""

    async def check_caller(self, token: str, pid: int | None, *,
                           socket_member: tuple[str, str] | None = None) -> None: ...

    async def send_message(self, token: str, to: str, text: str,
                           attachments: Sequence[str] = ()) -> Receipt: ...

    async def list_team(self, token: str) -> TeamCard: ...

    def tools_listed(self, token: str) -> ToolsListedAck: ...

    async def message_status(self, token: str, message_id: str) -> MessageStatus: ...


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (Linux SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class ControlServer:
    """Serves the control API until cancelled; ``shutdown`` is called for ``stop`` (all)."""

    def __init__(self, teams: Teams, *, on_stop_all: Callable[[], None],
                 allowed_uid: int | None = None, router: MemberRouter | None = None,
                 approvals: Approvals | None = None, web: LazyLiveView | None = None,
                 board: BoardApi | None = None,
                 member_board: MemberBoardApi | None = None,
                 more_handlers: dict[str, Handler] | None = None) -> None:
        self._teams = teams
        self._web = web
        self._router = router
        self._approvals = approvals
        self._allowed_uid = os.getuid() if allowed_uid is None else allowed_uid
        self._on_stop_all = on_stop_all
        self._stop_all_requested = False
        handlers: dict[str, Handler] = {
            protocol.PING.name: self._ping,
            protocol.LAUNCH.name: self._launch,
            protocol.STATUS.name: self._status,
            protocol.SEND.name: self._send,
            protocol.HISTORY.name: self._history,
            protocol.EXPORT.name: self._export,
            protocol.RESTART.name: self._restart,
            protocol.STOP.name: self._stop,
            protocol.WORKTREES.name: self._worktrees,
            protocol.THREAD.name: self._thread,
            protocol.MEMBER_SEND_MESSAGE.name: self._member_send,
            protocol.MEMBER_LIST_TEAM.name: self._member_team,
            protocol.MEMBER_MESSAGE_STATUS.name: self._member_status,
            protocol.MEMBER_TOOLS_LISTED.name: self._member_tools_listed,
            protocol.DIFF.name: self._diff,
            protocol.APPROVALS.name: self._list_approvals,
            protocol.APPROVAL_RULES.name: self._approval_rules,
            protocol.REVOKE_RULE.name: self._revoke_rule,
            protocol.APPROVE.name: self._approve,
            protocol.DENY.name: self._deny,
            protocol.ANSWER.name: self._answer,
            protocol.UI.name: self._ui,
            protocol.CHANGES.name: self._changes,
            protocol.USAGE.name: self._usage,
            protocol.BUDGET.name: self._budget,
        }
        self._methods = dispatch(
            handlers,
            board.handlers() if board is not None else {},  # task_add, ... (daemon.board)
            # member.task_*: a member's MCP task tools
            member_board.handlers(self._member) if member_board is not None else {},
            more_handlers or {})  # notify_test (daemon.notify)
        self._mcp = McpServer(self._call_as_member)

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
            caller = opened(line)
            if caller is not None:
                await self._serve_mcp(connection, caller)
                return
            try:
                if not await connection.send(await self.dispatch(line)):
                    return
            finally:
                if self._stop_all_requested:
                    self._on_stop_all()  # after the answer to 'stop' went out

    async def _serve_mcp(self, connection: Connection, caller: Caller) -> None:
        """A member's relay: its one MCP message answered as that member; after a tools/list,
        the member's start is told once the relay has passed the answer on (its EOF)."""
        try:
            line = await connection.receive_line()
        except RequestTooLarge as exc:
            log.warning("mcp_request_too_large", limit_bytes=rpc.REQUEST_LIMIT_BYTES)
            await connection.send(rpc.error_response(None, rpc.INVALID_REQUEST, exc.message))
            return
        if line is None:
            return
        reply = await self._mcp.answer(caller, line)
        if await connection.send(reply.line) and reply.listed:
            await connection.receive_line()  # None: the relay wrote the answer and closed
            await self._mcp.tell_listed(caller)

    async def _call_as_member(self, row: protocol.Method, params: dict[str, Any]) -> Any:
        """A member method called by the MCP server: through ``dispatch``, as a call on this
        connection (its params model, the caller's peer check, redaction); its result, or
        the refusal raised."""
        answer = json.loads(await self.dispatch(rpc.request(1, row.name, params)))
        error = answer.get("error")
        if error is None:
            return answer.get("result")
        data = error.get("data")
        if isinstance(data, dict):
            raise error_from_wire(data)
        raise TeamctlError(f"the request was refused: {error.get('message')}")

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
        if entry is None or (_SOCKET_MEMBER.get() is not None and entry.row.caller != "member"):
            return rpc.error_response(request_id, rpc.METHOD_NOT_FOUND,
                                      f"no method {redact(method[:64])!r}")
        model, handler = entry.params, entry.handler
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

    def _routing(self) -> MemberRouter:
        if self._router is None:
            raise UsageError("this daemon routes no teammates' messages")
        return self._router

    async def _member(self, token: str) -> MemberRouter:
        """The router, once the caller is known to be the token's member's own process
        (daemon/control/_peers.py): a token read from a teammate's mcp.json is refused."""
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


class Served(NamedTuple):
    """A row of the protocol's table with its params model and the handler serving it."""

    row: protocol.Method
    params: type[BaseModel]
    handler: Handler


def dispatch(*groups: Mapping[str, Handler]) -> dict[str, Served]:
    """The dispatch table: each handler on its row of ``orchestrator.protocol``. A method
    handled twice, or a handler for a method the table does not have, is a bug at start."""
    handlers: dict[str, Handler] = {}
    for group in groups:
        twice = handlers.keys() & group.keys()
        unknown = {name for name in group if protocol.by_name(name) is None}
        if twice or unknown:
            raise ValueError(f"handled twice: {sorted(twice)}; in no row: {sorted(unknown)}")
        handlers.update(group)
    return {row.name: Served(row, protocol.model(row.params), handlers[row.name])
            for row in protocol.METHODS if row.name in handlers}


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
