"""The control server: JSON-RPC 2.0 over the Unix socket, for this user only.

Each connection is checked with SO_PEERCRED (a peer of another uid is refused), each request is
one line of at most REQUEST_LIMIT_BYTES, each method's params are validated by a pydantic model
(unknown keys refused). Application errors travel as ``error.data`` (code, message, retryable,
exit code), redacted.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator import rpc
from orchestrator.config import NAME_PATTERN, TeamConfig
from orchestrator.errors import TeamctlError, TeamFileError
from orchestrator.redaction import redact, redact_value

if TYPE_CHECKING:
    from orchestrator.teams import Teams

__all__ = ["ControlServer", "peer_uid"]

log = structlog.get_logger("teamctl.api")

Handler = Callable[[Any], Awaitable[Any]]


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LaunchParams(_Params):
    config: dict[str, Any]
    file: str
    wait: bool = True
    timeout: float | None = Field(default=None, gt=0)


class TeamParams(_Params):
    team: str | None = Field(default=None, pattern=NAME_PATTERN)


class MemberParams(TeamParams):
    member: str = Field(pattern=NAME_PATTERN)


class SendParams(MemberParams):
    text: str
    attachments: list[str] = Field(default=[], max_length=32)
    wait: bool = False
    dry_run: bool = False
    timeout: float = Field(default=600.0, gt=0)


class EmptyParams(_Params):
    pass


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (Linux SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class ControlServer:
    """Serves the control API until cancelled; ``shutdown`` is called for ``stop`` (all)."""

    def __init__(self, teams: Teams, *, on_stop_all: Callable[[], None],
                 allowed_uid: int | None = None) -> None:
        self._teams = teams
        self._allowed_uid = os.getuid() if allowed_uid is None else allowed_uid
        self._on_stop_all = on_stop_all
        self._stop_all_requested = False
        self._methods: dict[str, tuple[type[_Params], Handler]] = {
            "ping": (EmptyParams, self._ping),
            "launch": (LaunchParams, self._launch),
            "status": (TeamParams, self._status),
            "send": (SendParams, self._send),
            "history": (MemberParams, self._history),
            "restart": (MemberParams, self._restart),
            "stop": (TeamParams, self._stop),
        }

    async def handle_connection(self, stream: SocketStream) -> None:
        async with stream:
            raw = stream.extra(SocketAttribute.raw_socket)
            uid = peer_uid(raw)
            if uid != self._allowed_uid:
                log.warning("control_peer_refused", peer_uid=uid)
                return
            reader = BufferedByteReceiveStream(stream)
            while True:
                try:
                    line = await reader.receive_until(b"\n", rpc.REQUEST_LIMIT_BYTES)
                except anyio.DelimiterNotFound:
                    await stream.send(rpc.error_response(
                        None, rpc.INVALID_REQUEST,
                        f"request larger than {rpc.REQUEST_LIMIT_BYTES} bytes"))
                    return
                except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
                    return
                try:
                    await stream.send(await self.dispatch(line))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return
                finally:
                    if self._stop_all_requested:
                        self._on_stop_all()  # after the answer to 'stop' went out

    async def dispatch(self, line: bytes) -> bytes:
        try:
            message = json.loads(line)
        except ValueError:
            return rpc.error_response(None, rpc.PARSE_ERROR, "not JSON")
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return rpc.error_response(None, rpc.INVALID_REQUEST, "not a JSON-RPC 2.0 request")
        request_id, method = message.get("id"), message.get("method")
        entry = self._methods.get(str(method))
        if entry is None:
            return rpc.error_response(request_id, rpc.METHOD_NOT_FOUND, f"no method {method!r}")
        model, handler = entry
        try:
            params = model.model_validate(message.get("params") or {})
        except ValidationError as exc:
            return rpc.error_response(request_id, rpc.INVALID_PARAMS, redact(str(exc)))
        try:
            return rpc.result_response(request_id, await handler(params))
        except TeamctlError as exc:
            log.warning("control_request_failed", method=method, code=exc.code,
                        error=exc.message)
            return rpc.error_response(request_id, rpc.APP_ERROR, redact(exc.message),
                                      redact_value(exc.to_wire()))
        except Exception:
            log.exception("control_request_crashed", method=method)
            return rpc.error_response(request_id, rpc.INTERNAL_ERROR,
                                      "internal error in the daemon; see 'teamctl logs'")

    async def _ping(self, _params: EmptyParams) -> dict[str, Any]:
        return {"pid": os.getpid()}

    async def _launch(self, params: LaunchParams) -> dict[str, Any]:
        try:
            config = TeamConfig.model_validate(params.config)
        except ValidationError as exc:
            raise TeamFileError(params.file, [redact(str(exc))]) from exc
        return await self._teams.launch(config, params.file, wait=params.wait,
                                        timeout=params.timeout)

    async def _status(self, params: TeamParams) -> dict[str, Any]:
        return await self._teams.status(params.team)

    async def _send(self, params: SendParams) -> dict[str, Any]:
        return await self._teams.send(params.team, params.member, params.text,
                                      wait=params.wait, timeout=params.timeout,
                                      attachments=params.attachments, dry_run=params.dry_run)

    async def _history(self, params: MemberParams) -> dict[str, Any]:
        return await self._teams.history(params.team, params.member)

    async def _restart(self, params: MemberParams) -> dict[str, Any]:
        return await self._teams.restart(params.team, params.member)

    async def _stop(self, params: TeamParams) -> dict[str, Any]:
        stopped = await self._teams.stop(params.team)
        if params.team is None:
            self._stop_all_requested = True
        return {"stopped": stopped, "daemon_stopping": params.team is None}
