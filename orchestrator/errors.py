"""Every failure teamctl reports, as one flat tree.

Each exception is named for its condition, carries structured fields and builds its own
user message (which says what to do). ``code`` is the stable machine-readable name shown in
``--json`` output and logs; ``retryable`` says whether the same request may succeed later;
``exit_code`` is the CLI's exit status for it (DESIGN §1).

    TeamctlError
    ├── UsageError                  exit 2
    │   └── TeamFileError           the team file is invalid (file, line, key, fix)
    ├── DaemonUnavailable           exit 4: no daemon answers on the control socket
    ├── DaemonAlreadyRunning        a second daemon on the same TEAMCTL_HOME
    ├── ProtocolError               a peer spoke something that is not the protocol
    │   └── LineTooLong             a framed line went past its bound
    ├── NotFound                    unknown team or member (names those that exist)
    ├── TeamAlreadyRunning
    ├── AmbiguousTeam               several teams run and --team was not given
    ├── ReplyTimeout                a --wait deadline passed
    ├── MemberStartFailed           the runtime did not become ready
    │   └── ExecutableNotFound      the runtime's executable is missing
    ├── RuntimeExited               the member's process ended while a turn was in flight
    ├── RuntimeStuck                no output for turn_idle_timeout during a turn
    ├── TurnFailed                  the runtime ended the turn with an error (API errors)
    └── StoreError                  the journal could not be read or written
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AmbiguousTeam",
    "DaemonAlreadyRunning",
    "DaemonUnavailable",
    "ExecutableNotFound",
    "LineTooLong",
    "MemberStartFailed",
    "NotFound",
    "ProtocolError",
    "ReplyTimeout",
    "RuntimeExited",
    "RuntimeStuck",
    "StoreError",
    "TeamAlreadyRunning",
    "TeamFileError",
    "TeamctlError",
    "TurnFailed",
    "UsageError",
    "error_from_wire",
]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_NO_DAEMON = 4


class TeamctlError(Exception):
    """Root of every teamctl failure."""

    code = "teamctl_error"
    retryable = False
    exit_code = EXIT_FAILED

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_wire(self) -> dict[str, Any]:
        """The JSON form sent from the daemon to the CLI (already redacted by the caller)."""
        return {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "exit_code": self.exit_code,
            "details": self.details,
        }


class UsageError(TeamctlError):
    code = "usage_error"
    exit_code = EXIT_USAGE


class TeamFileError(UsageError):
    code = "team_file_invalid"

    def __init__(self, path: str, problems: list[str]) -> None:
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{path}: invalid team file\n{lines}", path=path, problems=problems)


class DaemonUnavailable(TeamctlError):
    code = "daemon_unavailable"
    exit_code = EXIT_NO_DAEMON

    def __init__(self, socket_path: str, reason: str) -> None:
        super().__init__(
            f"no teamctl daemon is reachable at {socket_path} ({reason}); "
            "start one with 'teamctl launch TEAMFILE' or 'teamctl daemon'",
            socket=socket_path,
        )


class DaemonAlreadyRunning(TeamctlError):
    code = "daemon_already_running"

    def __init__(self, home: str, pid: int | None) -> None:
        who = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"a teamctl daemon ({who}) already runs on {home}; "
            "use it, or stop it with 'teamctl stop'",
            home=home,
            pid=pid,
        )


class ProtocolError(TeamctlError):
    code = "protocol_error"


class LineTooLong(ProtocolError):
    code = "protocol_line_too_long"

    def __init__(self, limit_bytes: int) -> None:
        super().__init__(f"a line went past the {limit_bytes}-byte limit", limit_bytes=limit_bytes)


class NotFound(TeamctlError):
    code = "not_found"

    def __init__(self, kind: str, name: str, existing: list[str]) -> None:
        known = ", ".join(existing) if existing else "none"
        super().__init__(f"no {kind} named {name!r}; {kind}s: {known}", kind=kind, name=name)


class TeamAlreadyRunning(TeamctlError):
    code = "team_already_running"

    def __init__(self, team: str) -> None:
        super().__init__(
            f"team {team!r} is already running; see 'teamctl status {team}', "
            f"or stop it first with 'teamctl stop {team}'",
            team=team,
        )


class AmbiguousTeam(TeamctlError):
    code = "team_ambiguous"
    exit_code = EXIT_USAGE

    def __init__(self, teams: list[str]) -> None:
        super().__init__(
            f"several teams run ({', '.join(teams)}); name one with --team", teams=teams
        )


class ReplyTimeout(TeamctlError):
    code = "reply_timeout"
    retryable = True

    def __init__(self, message_id: str, state: str, timeout: float) -> None:
        super().__init__(
            f"no reply to {message_id} within {timeout:g}s (delivery is {state}); "
            f"it stays journaled: follow it with 'teamctl history' or 'teamctl logs -f'",
            message_id=message_id,
            state=state,
        )


class MemberStartFailed(TeamctlError):
    code = "member_start_failed"
    retryable = True

    def __init__(self, member: str, reason: str, stderr_tail: list[str] | None = None) -> None:
        super().__init__(f"member {member!r} did not start: {reason}", member=member)
        self.member = member
        self.stderr_tail = stderr_tail or []


class ExecutableNotFound(MemberStartFailed):
    code = "runtime_executable_not_found"
    retryable = False

    def __init__(self, member: str, executable: str, env_var: str) -> None:
        reason = (
            f"executable {executable!r} not found; install {executable} "
            f"or set command = \"/path/to/{executable}\" on the member (or {env_var})"
        )
        super().__init__(member, reason)


class RuntimeExited(TeamctlError):
    code = "runtime_exited"
    retryable = True

    def __init__(self, member: str, exit_code: int | None, stderr_tail: list[str]) -> None:
        how = "was killed" if exit_code is None or exit_code < 0 else f"exited {exit_code}"
        super().__init__(
            f"member {member!r} {how} during the turn", member=member, exit=exit_code
        )
        self.member = member
        self.exit = exit_code
        self.stderr_tail = stderr_tail


class RuntimeStuck(TeamctlError):
    code = "runtime_stuck"
    retryable = True

    def __init__(self, member: str, idle_timeout: float) -> None:
        super().__init__(
            f"member {member!r} printed nothing for {idle_timeout:g}s during a turn; "
            "it is being restarted",
            member=member,
        )


class TurnFailed(TeamctlError):
    code = "turn_failed"

    def __init__(self, member: str, message: str, *, api_status: int | None, retryable: bool):
        super().__init__(message, member=member, api_status=api_status)
        self.retryable = retryable


class StoreError(TeamctlError):
    code = "store_error"
    retryable = True


class RemoteError(TeamctlError):
    """An error the daemon reported, rebuilt on the CLI side from its wire form."""

    def __init__(self, code: str, message: str, retryable: bool, exit_code: int) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable
        self.exit_code = exit_code


def error_from_wire(data: dict[str, Any]) -> TeamctlError:
    """Rebuild a daemon-side error in the CLI (``to_wire`` in reverse)."""
    err = RemoteError(
        str(data.get("code", "teamctl_error")),
        str(data.get("message", "the daemon reported an error")),
        bool(data.get("retryable", False)),
        int(data.get("exit_code", EXIT_FAILED)),
    )
    err.details = dict(data.get("details") or {})
    return err
