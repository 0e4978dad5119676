"""Every failure teamctl reports, as one flat tree.

Each exception is named for its condition, carries structured fields and builds its own
user message (which says what to do). ``code`` is the stable machine-readable name shown in
``--json`` output and logs; ``retryable`` says whether the same request may succeed later;
``exit_code`` is the CLI's exit status for it (DESIGN §1).

    TeamctlError
    ├── UsageError                  exit 2
    │   ├── TeamFileError           the team file is invalid (file, line, key, fix)
    │   ├── OutputExists            --out names an existing file and --force was not given
    │   ├── OutputNotRegular        --out names a symlink, FIFO or other non-regular file
    │   │                           (both in client.out_file)
    │   ├── RequestTooLarge         a control request over the socket's size bound
    │   ├── TaskInvalid             a board task's title, body or other text refused
    │   ├── TelemetryConfigInvalid  [telemetry] or an OTEL_EXPORTER_OTLP_* variable refused
    │   │   │                       (which one; a header's text never shown)
    │   │   └── TelemetryExporterMissing  protocol = "grpc" without teamctl's grpc extra
    │   │                           (the pip command that installs it in the message)
    │   ├── MemoryReserveTooLarge   [team] memory_reserve leaves a member of this machine no
    │   │                           room even with nothing else running (it would wait for ever)
    │   └── TaskCycle               a dependency that would close a cycle (the cycle named)
    ├── RemoteError                 a daemon-side error rebuilt by the CLI (its code, exit code)
    ├── DaemonUnavailable           exit 4: no daemon answers on the control socket
    │   └── ConnectionLost          the daemon went away after the request was written
    ├── DaemonAlreadyRunning        a second daemon on the same TEAMCTL_HOME
    ├── DaemonBusy                  every control connection slot is serving a request
    ├── ProtocolError               a peer spoke something that is not the protocol
    │   ├── LineTooLong             a framed line went past its bound
    │   └── EgressRefused           a sandboxed member's egress proxy refused a request
    │                               (its code: egress_denied, egress_bad_request, ...; the
    │                               HTTP status the member's client gets)
    ├── NotFound                    unknown team or member (names those that exist)
    │   └── TaskNotFound            no board task of that id (in that team)
    ├── TaskRefused                 a board operation refused: not ready (the blockers),
    │                               owned (the owner), outside the role, over max_tasks, not
    │                               the owner, settled (its code says which)
    ├── ForgeError                  the forge (GitHub) answered no: forge_unauthorized (401),
    │                               forge_forbidden (403: the permission named),
    │                               forge_not_found (404), forge_invalid (422),
    │                               forge_rate_limited (retryable, until its reset),
    │                               forge_unreachable (retryable), forge_token_missing
    ├── IntegrateRefused            a task the merge queue cannot take (no [team] integrate,
    │                               not done, its owner in no worktree, its team not running)
    ├── CheckRefused                a board check its owner's boundary does not run (a host
    │                               or pod elsewhere, no sandbox here, its command not there):
    │                               the reason in the task's events, the task in progress
    ├── TeamAlreadyRunning          a launch of a running team from a different definition
    ├── AmbiguousTeam               several teams run and --team was not given (nor is the
    │                               member named in only one of them)
    ├── ReplyTimeout                a --wait deadline passed
    ├── MemberUnavailable           a --wait on a member that is fatal or stopped
    ├── MemberHeld                  a --wait on a member paused by a budget or a rate limit
    ├── ApprovalSettled             an answer to an approval that is no longer pending
    │   └── ApprovalExpired         ...because its runtime process is gone (it will ask again)
    ├── ApprovalMismatch            a decision named a sha256 the request does not have
    ├── MemberStartFailed           the runtime did not become ready
    │   ├── ExecutableNotFound      the runtime's executable is missing
    │   ├── HostUnavailable         a member's SSH host: unreachable, key mismatch, login
    │   │                           refused, no CLI there, a connection that hangs (its code)
    │   ├── SandboxUnavailable      sandbox = "process" where bubblewrap is missing or cannot
    │   │                           make its namespaces (the install command in the message)
    │   ├── CodexSandboxUnusable    codex's own sandbox would run none of the member's commands
    │   │                           (its helper links refused under the TMPDIR its env names)
    │   ├── ResourceLimitsUnavailable  a member's ceiling (memory_max, cpu_weight, ...) where
    │   │                           no cgroup can hold it: refused at launch, never ignored
    │   └── RuntimeNotLoggedIn      the member's CLI has no credential (the fix is in the message)
    ├── SessionLost                 the runtime no longer knows the member's session (Claude
    │                               --resume, Codex "no rollout"): replaced once, never looped
    ├── RuntimeExited               the member's process ended while a turn was in flight
    ├── RuntimeStuck                no output for turn_idle_timeout during a turn
    ├── TurnFailed                  the runtime ended the turn with an error (API errors)
    ├── TurnHeld                    the turn stopped because its member must pause: the message
    │   │                           goes back to the queue without spending an attempt
    │   ├── BudgetReached           a budget (member or team) was reached before or during it
    │   └── RateLimited             the runtime's subscription or API limit, until a reset time
    ├── PayloadTooLarge             exit 3: the serialized turn exceeds what the transport takes
    ├── AttachmentError             exit 3: one attachment failure with its typed code
    │   │                           (in attachments.failures, beside the failure codes)
    │   └── ArtifactMissing         a stored variant is gone and cannot be rebuilt
    │                               (attachments.artifacts)
    ├── AttachmentRefused           exit 3: the whole message, with every failure
    │                               (attachments.failures)
    ├── AttachmentOutsideMemberView exit 3: a path a member gave send_message lies outside
    │                               what it can read itself (its rule named: outside, private,
    │                               not_regular, hard_link, unreadable, remote, ...); nothing
    │                               read, nothing journaled
    ├── ClipboardError              exit 3: ``send --paste`` read no image (the code says why:
    │                               clipboard_reader_missing, clipboard_empty,
    │                               clipboard_no_image, clipboard_too_large, clipboard_read_failed)
    ├── NotifyUnreachable           an ntfy server did not take a publish or a subscription
    │                               (down, refused, a deadline passed): items wait, retried
    ├── GitFailed                   a git command teamctl ran failed, passed its deadline
    │                               (git_timeout) or could not run inside the member's
    │                               boundary (git_sandbox_unavailable)
    ├── WorktreeError               a member's worktree cannot be made (not a repository, no
    │                               such base, its branch checked out elsewhere)
    ├── SlotsExhausted              a launch found no value left in a slot's range ([team]
    │                               slots): the range, who holds it and the fix named
    ├── InternalError               a bug: it fails one delivery or request, never the daemon
    ├── TransitionRefused           a bug: a member's launch state asked to move where its
    │                               table has no arrow (members.state.TRANSITIONS)
    └── StoreError                  the journal could not be read or written
        └── JournalMissing          state.db is missing or empty beside an existing home

    rpc.RequestRejected (a ValueError, standard library only) is the parse failure of one
    request line; the server answers it as a usage error.

Foreign errors never leave the layer that met them: ``map_exceptions`` translates them at the
boundary (``sqlite3.Error`` in the journal, ``httpx.HTTPError`` during OpenCode's start-up,
``TimeoutError`` and ``OSError`` around processes) into the errors above.

Errors raised inside a task group come out of it as an ExceptionGroup; ``unwrap_group``
re-raises a lone error as itself, so callers catch the typed error rather than the group.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

__all__ = [
    "AmbiguousTeam",
    "ApprovalExpired",
    "ApprovalSettled",
    "AttachmentOutsideMemberView",
    "BudgetReached",
    "CheckRefused",
    "ClipboardError",
    "CodexSandboxUnusable",
    "ConnectionLost",
    "DaemonAlreadyRunning",
    "DaemonBusy",
    "DaemonStopping",
    "DaemonUnavailable",
    "EgressRefused",
    "ExecutableNotFound",
    "ForgeError",
    "GitFailed",
    "HostUnavailable",
    "IntegrateRefused",
    "InternalError",
    "JournalMissing",
    "LineTooLong",
    "MemberHeld",
    "MemberStartFailed",
    "MemberUnavailable",
    "MemoryReserveTooLarge",
    "NotFound",
    "NotifyUnreachable",
    "PayloadTooLarge",
    "ProtocolError",
    "RateLimited",
    "RemoteError",
    "ReplyTimeout",
    "RequestTooLarge",
    "ResourceLimitsUnavailable",
    "RuntimeExited",
    "RuntimeNotLoggedIn",
    "RuntimeStuck",
    "SandboxUnavailable",
    "SessionLost",
    "SlotsExhausted",
    "StoreError",
    "TaskCycle",
    "TaskInvalid",
    "TaskNotFound",
    "TaskRefused",
    "TeamAlreadyRunning",
    "TeamFileError",
    "TeamctlError",
    "TelemetryConfigInvalid",
    "TelemetryExporterMissing",
    "TransitionRefused",
    "TurnFailed",
    "TurnHeld",
    "UsageError",
    "WorktreeError",
    "error_from_wire",
    "map_exceptions",
    "unwrap_group",
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


class DaemonStopping(TeamctlError):
    """A request that would start something, on a daemon told to stop: it would stop with it."""

    code = "daemon_stopping"
    retryable = True

    def __init__(self) -> None:
        super().__init__("the daemon is stopping (`teamctl stop` was run): nothing new starts on "
                         "it; run the command again once it has exited, and a new daemon "
                         "starts")


class RequestTooLarge(UsageError):
    code = "request_too_large"

    def __init__(self, limit_bytes: int, size_bytes: int | None = None) -> None:
        size = f" is {size_bytes / 1048576:.1f} MiB," if size_bytes else ""
        super().__init__(
            f"the request{size} over the control socket's {limit_bytes // 1048576} MiB limit; "
            "put long text in a file the member can read and send its path instead",
            limit_bytes=limit_bytes,
        )


class ConnectionLost(DaemonUnavailable):
    code = "daemon_connection_lost"

    def __init__(self, socket_path: str, method: str, reason: str, *,
                 member: str | None = None) -> None:
        who = member or "MEMBER"
        hint = (f"; it may have been journaled: check 'teamctl history {who}'"
                if method == "send" else "")
        TeamctlError.__init__(
            self, f"the daemon at {socket_path} went away before answering '{method}' "
            f"({reason}){hint}", socket=socket_path, method=method)


class DaemonBusy(TeamctlError):
    code = "daemon_busy"
    retryable = True

    def __init__(self, max_connections: int) -> None:
        super().__init__(
            f"the daemon is serving {max_connections} requests at once (its limit); "
            "try again in a moment", max_connections=max_connections)


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


class EgressRefused(ProtocolError):
    """A request on a sandboxed member's egress proxy refused (daemon/egress/_proxy.py): ``code``
    says why, ``status`` is the HTTP status its client is answered with."""

    def __init__(self, code: str, status: int, message: str, *,
                 retryable: bool = False) -> None:
        super().__init__(message, status=status)
        self.code, self.status, self.retryable = code, status, retryable


class NotFound(TeamctlError):
    code = "not_found"

    def __init__(self, kind: str, name: str, existing: list[str]) -> None:
        known = ", ".join(existing) if existing else "none"
        super().__init__(f"no {kind} named {name!r}; {kind}s: {known}", kind=kind, name=name)


class TaskNotFound(NotFound):
    code = "task_not_found"

    def __init__(self, task_id: int, team: str | None) -> None:
        where = f" in team {team!r}" if team else ""
        TeamctlError.__init__(self, f"no task T{task_id}{where}; see 'teamctl task list'",
                              kind="task", name=f"T{task_id}")


class TaskRefused(TeamctlError):
    """A board operation that cannot apply to the task as it is; ``code`` says why
    (task_not_ready, task_owned, task_role, task_limit, task_not_owner, task_settled,
    task_forbidden) and the message names the blockers, the owner or the role."""

    code = "task_refused"

    def __init__(self, code: str, message: str, *, task_id: int | None,
                 retryable: bool = False, **details: Any) -> None:
        super().__init__(message, task=task_id, **details)
        self.code = code
        self.retryable = retryable


class ForgeError(TeamctlError):
    """The forge (docs/forge.md) refused or could not answer a request: ``code`` says which
    (``forge_unauthorized``, ``forge_forbidden``, ``forge_not_found``, ``forge_invalid``,
    ``forge_rate_limited``, ``forge_unreachable``, ``forge_token_missing``), the message what
    to do; ``until`` is a rate limit's reset (epoch seconds). Never carries the token."""

    code = "forge_error"

    def __init__(self, code: str, message: str, *, status: int | None = None,
                 retryable: bool = False, until: float | None = None) -> None:
        super().__init__(message, status=status, until=until)
        self.code = code
        self.status = status
        self.retryable = retryable
        self.until = until


class IntegrateRefused(TeamctlError):
    """A task the merge queue (docs/land.md) cannot take now: the message says why and what
    to do (``teamctl integrate``)."""

    code = "integrate_refused"

    def __init__(self, task_id: int, reason: str, fix: str) -> None:
        super().__init__(f"T{task_id} cannot enter the merge queue: {reason}; {fix}",
                         task=f"T{task_id}")


class CheckRefused(TeamctlError):
    """A board check (docs/board.md, "The check before done") that the owner's boundary does
    not run: its ``reason``, and what to change. Never run elsewhere instead."""

    code = "check_refused"

    def __init__(self, member: str, command: str, reason: str, fix: str) -> None:
        super().__init__(f"the check {command!r} did not run as {member}: {reason}; {fix}",
                         member=member)
        self.reason = reason


class TaskInvalid(UsageError):
    code = "task_invalid"


class TelemetryConfigInvalid(UsageError):
    """``[telemetry]`` or a standard ``OTEL_EXPORTER_OTLP_*`` variable the exporter cannot
    use: ``where`` names the key or variable; a header's text is never in the message (it
    may hold an API key)."""

    code = "telemetry_config_invalid"

    def __init__(self, where: str, message: str) -> None:
        super().__init__(message, where=where)


class TelemetryExporterMissing(TelemetryConfigInvalid):
    """OTLP over gRPC asked for (``where``: the key or variable) where the SDK's gRPC exporter
    and grpcio, teamctl's ``grpc`` extra, are not installed: the message names the pip command
    for ``python``, the daemon's interpreter. Never an ImportError's traceback; installing is
    the fix, so not retryable."""

    code = "telemetry_grpc_missing"
    retryable = False

    def __init__(self, where: str, python: str) -> None:
        super().__init__(where, f"{where} asks for OTLP over gRPC, but teamctl's grpc extra "
                         "(grpcio and opentelemetry-exporter-otlp-proto-grpc) is not installed "
                         f"beside the daemon: run {python} -m pip install 'teamctl[grpc]' and "
                         "launch again, or use protocol = \"http/protobuf\"")
        self.python = python


class MemoryReserveTooLarge(UsageError):
    """A team whose ``memory_reserve`` and a member's expected footprint exceed this machine's
    memory: that member could never start (docs/scaling.md, "Starts that fit")."""

    code = "memory_reserve_too_large"

    def __init__(self, team: str, reserve: str, member: str, needs: str, total: str) -> None:
        super().__init__(
            f"team {team!r}: [team] memory_reserve = \"{reserve}\" leaves member {member!r} "
            f"(~{needs}) no room in this machine's {total} of memory: it could never start; "
            "lower memory_reserve (e.g. \"1G\") and launch again",
            team=team, member=member, reserve=reserve)


class TaskCycle(UsageError):
    code = "task_cycle"

    def __init__(self, cycle: list[int]) -> None:
        named = " → ".join(f"T{t}" for t in cycle)
        edge = f"T{cycle[1]} --remove T{cycle[2]}" if len(cycle) > 2 else "ID --remove ID2"
        super().__init__(f"refused: that dependency would close a cycle {named}; remove one "
                         f"of its edges first (e.g. 'teamctl task deps {edge}')", cycle=cycle)


class TeamAlreadyRunning(TeamctlError):
    code = "team_already_running"

    def __init__(self, team: str, differences: list[str] | None = None) -> None:
        what = ("; the running team differs from this file: " + "; ".join(differences)
                if differences else "")
        super().__init__(
            f"team {team!r} is already running{what}. To apply the file: 'teamctl stop {team}' "
            f"then launch it again; to keep it: see 'teamctl status {team}'",
            team=team, differences=differences or [],
        )


class AmbiguousTeam(TeamctlError):
    code = "team_ambiguous"
    exit_code = EXIT_USAGE

    def __init__(self, teams: list[str], *, member: str | None = None) -> None:
        said = f"several teams run ({', '.join(teams)})" if member is None else \
            f"member {member!r} is in several running teams ({', '.join(teams)})"
        super().__init__(f"{said}; name one with --team {teams[0]}", teams=teams)


class ReplyTimeout(TeamctlError):
    code = "reply_timeout"
    retryable = True

    def __init__(self, message_id: str, state: str, timeout: float, *, team: str,
                 member: str) -> None:
        super().__init__(
            f"no reply to {message_id} within {timeout:g}s (delivery is {state}); it stays "
            f"journaled: follow it with 'teamctl history --team {team} {member}' or "
            "'teamctl logs -f'",
            message_id=message_id,
            state=state,
        )


class MemberUnavailable(TeamctlError):
    code = "member_unavailable"

    def __init__(self, member: str, launch: str, reason: str | None,
                 message_id: str | None = None) -> None:
        why = f" ({reason})" if reason else ""
        kept = (f"; the message {message_id} stays queued and is delivered once it runs again"
                if message_id else "")
        super().__init__(
            f"member {member!r} is {launch}{why}{kept}; start it again with "
            f"'teamctl restart {member}'", member=member, launch=launch, message_id=message_id)


class MemberHeld(TeamctlError):
    """A --wait on a member whose queue is held (a budget, a rate limit): the message stays
    queued and is delivered once the member resumes."""

    code = "member_held"
    retryable = True

    def __init__(self, member: str, hold: str, message_id: str, *, budget: bool) -> None:
        fix = f"raise it with 'teamctl budget {member} --add USD'" if budget \
            else "it resumes by itself at the reset time"
        super().__init__(f"member {member!r} is paused ({hold}); the message {message_id} stays "
                         f"queued and is delivered once it resumes: {fix}", member=member,
                         message_id=message_id)


class ApprovalSettled(TeamctlError):
    code = "approval_settled"

    def __init__(self, approval_id: str, state: str, reason: str | None = None) -> None:
        why = f" ({reason})" if reason else ""
        super().__init__(
            f"approval {approval_id} is already {state}{why}; nothing was applied. See "
            "'teamctl approvals' for what waits now", approval_id=approval_id, state=state)


class ApprovalExpired(ApprovalSettled):
    code = "approval_expired"

    def __init__(self, approval_id: str, reason: str) -> None:
        super().__init__(approval_id, "expired", reason)
        self.message = (f"approval {approval_id} expired ({reason}); nothing was applied. The "
                        "message is delivered again and its runtime asks again: answer the new "
                        "request in 'teamctl approvals'")


class ApprovalMismatch(TeamctlError):
    """A decision was bound (``--sha256``) to a request other than the one its id names:
    nothing is applied; the operator reads the request again."""

    code = "approval_mismatch"

    def __init__(self, approval_id: str, given: str, actual: str) -> None:
        super().__init__(
            f"approval {approval_id} is the request with sha256 {actual[:12]}…, not "
            f"{given[:12]}…; nothing was applied. Read it whole with 'teamctl approvals "
            f"{approval_id} --full' and decide again", approval_id=approval_id, given=given,
            actual=actual)


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


class HostUnavailable(MemberStartFailed):
    """A member's host could not be used over SSH; ``code`` says why (host_unreachable,
    host_key_mismatch, host_auth_failed, host_runtime_missing, host_connect_hung); the message
    says what to do. Only an unreachable or hung host is worth retrying."""

    def __init__(self, member: str, host: str, code: str, reason: str, *,
                 retryable: bool) -> None:
        super().__init__(member, f"on host {host}: {reason}")
        self.details["host"] = host
        self.reason = reason
        self.code = code
        self.retryable = retryable


class SandboxUnavailable(MemberStartFailed):
    """``sandbox = "process"`` cannot be had here: bubblewrap is missing, or it cannot make
    the namespaces it needs (some containers). Refused, never run unsandboxed."""

    code = "sandbox_unavailable"
    retryable = False

    def __init__(self, member: str, reason: str) -> None:
        super().__init__(member, f"sandbox = \"process\" is unavailable: {reason}; install "
                         "bubblewrap (apt-get install bubblewrap), run where user namespaces "
                         "are allowed, or set sandbox = \"none\" for this member")
        self.reason = reason


class ResourceLimitsUnavailable(MemberStartFailed):
    """A member has a ceiling (``memory_max``, ``memory_high``, ``cpu_weight``, ``pids_max``)
    and nothing where it runs can hold it: no cgroup can be made here (the controller is not
    enabled or not delegated to this user), or its host cannot take it. Refused at launch
    (and at a start, should it change since), never run unlimited."""

    code = "resource_limits_unavailable"
    retryable = False

    def __init__(self, member: str, keys: tuple[str, ...], reason: str) -> None:
        super().__init__(member, f"its {', '.join(keys)} cannot be held: {reason}; or remove "
                         f"{' and '.join(keys)} for it (docs/operations.md, \"A ceiling per "
                         "teammate\")")
        self.keys = keys
        self.reason = reason


class CodexSandboxUnusable(MemberStartFailed):
    """A Codex member that codex sandboxes with a system bubblewrap would run no command:
    codex makes its helper's links only outside its temp dir, and the member's own env names
    a TMPDIR that holds its CODEX_HOME. Refused at launch rather than answered turn by turn
    with ``bwrap: execvp codex-linux-sandbox`` (docs/runtimes.md, Codex)."""

    code = "codex_sandbox_unusable"
    retryable = False

    def __init__(self, member: str, reason: str, fix: str) -> None:
        super().__init__(member, f"codex's own sandbox would run none of its commands: "
                         f"{reason}; {fix}")


class SessionLost(TeamctlError):
    code = "runtime_session_lost"
    retryable = True

    def __init__(self, member: str, session_id: str | None, reason: str) -> None:
        super().__init__(f"member {member!r}: the runtime no longer knows session "
                         f"{session_id} ({reason}); a new one is started",
                         member=member, session_id=session_id)
        self.member = member
        self.session_id = session_id


class PayloadTooLarge(TeamctlError):
    """The serialized message would exceed what the runtime's transport takes at once."""

    code = "attachment_serialized_payload_too_large"
    exit_code = EXIT_REFUSED

    def __init__(self, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(
            f"the message would be {size_bytes // 1024} KiB once serialized, over the "
            f"runtime's {limit_bytes // 1024} KiB; send fewer or smaller images",
            size_bytes=size_bytes, limit_bytes=limit_bytes,
        )


class AttachmentOutsideMemberView(TeamctlError):
    """A member's attachment that is not a file it can read with its own rights: the daemon
    reads a teammate's attachments in the member's view, never with the operator's
    (docs/security.md, "A member's attachments are read with its own rights"). ``rule`` names
    which part of the rule refused it; ``fix`` says what the member (or the operator) can do.
    Nothing was read and nothing journaled."""

    code = "attachment_outside_member_view"
    retryable = False
    exit_code = EXIT_REFUSED

    def __init__(self, member: str, path: str, rule: str, why: str, fix: str) -> None:
        super().__init__(f"{path}: {why} — a teammate's attachment is read with its own "
                         f"rights, in its own view ({rule}); nothing was sent."
                         + (f" {fix}" if fix else ""),
                         member=member, path=path, rule=rule)
        self.member = member
        self.path = path
        self.rule = rule


class ClipboardError(TeamctlError):
    """``send --paste`` could not read an image from the clipboard; nothing was sent."""

    exit_code = EXIT_REFUSED

    def __init__(self, code: str, message: str, *, retryable: bool = False,
                 **details: Any) -> None:
        super().__init__(message, **details)
        self.code = code
        self.retryable = retryable


class NotifyUnreachable(TeamctlError):
    """An ntfy server did not take a publish or a subscription (docs/notify.md)."""

    code = "notify_unreachable"
    retryable = True

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"the ntfy server {server} could not be reached ({reason}); what "
                         "needs you is published when it answers again — check the server "
                         "and [notify] ntfy.server", server=server)


class RuntimeNotLoggedIn(MemberStartFailed):
    code = "runtime_not_logged_in"
    retryable = False

    def __init__(self, member: str, runtime: str, fix: str) -> None:
        super().__init__(member, f"{runtime} is not logged in for this member: {fix}")


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


class TurnHeld(TeamctlError):
    """A turn stopped because its member must pause (a budget, a rate limit): the message is
    held in the queue, never failed — no attempt is spent on it."""

    code = "turn_held"
    retryable = True


class BudgetReached(TurnHeld):
    code = "budget_reached"

    def __init__(self, member: str, why: str) -> None:
        super().__init__(f"{why}; the member is paused with its queue held: raise the budget "
                         f"with 'teamctl budget {member} --add USD' (or --set)", member=member)
        self.why = why


class RateLimited(TurnHeld):
    code = "rate_limited"

    def __init__(self, member: str, message: str, *, until: float | None,
                 window: str | None = None) -> None:
        super().__init__(f"{message} (every member of its account is paused with its queue "
                         "held and resumes by itself at the reset time)", member=member,
                         until=until)
        self.until = until
        self.window = window


class GitFailed(TeamctlError):
    """A git command teamctl ran on a member's tree (or to make one) failed: git's own words,
    cut; ``git_timeout`` (retryable) when it passed its deadline; ``git_sandbox_unavailable``
    when it must run inside a sandboxed member's boundary and bubblewrap cannot run here."""

    code = "git_failed"

    def __init__(self, command: str, reason: str, *, code: str = "git_failed",
                 retryable: bool = False) -> None:
        super().__init__(f"git {command}: {reason}", command=command)
        self.code = code
        self.retryable = retryable


class WorktreeError(TeamctlError):
    """A member's worktree (``worktree = true``) cannot be made or found; the fix is named."""

    code = "worktree_failed"

    def __init__(self, member: str, problem: str, fix: str) -> None:
        super().__init__(f"member {member!r}: {problem}; {fix}", member=member)


class SlotsExhausted(TeamctlError):
    """A team's launch found no value left for a member's slot (``[team] slots``): every
    value of its range is held by a member of a running team or, for a port, in use by
    another program here. Nothing of the launch was started; a team stopped frees values."""

    code = "slots_exhausted"
    retryable = True

    def __init__(self, team: str, member: str, slot: str, kind: str, *, size: int,
                 held: int, wider: str) -> None:
        busy = size - held
        super().__init__(
            f"team {team!r}: no value of {slot} ({kind}) is left for member {member!r}: "
            f"{held} of the {size} are held by members of running teams"
            + (f" and {busy} in use by other programs here" if busy > 0 else "")
            + f"; widen the range in [team] slots (e.g. {slot} = \"{wider}\"), or stop a "
            "team that holds some ('teamctl status' shows each member's slots)",
            team=team, member=member, slot=slot, kind=kind, size=size, held=held)


class InternalError(TeamctlError):
    code = "internal_error"

    def __init__(self, what: str, exc: BaseException) -> None:
        super().__init__(f"internal error while {what}: {type(exc).__name__}; "
                         "see 'teamctl logs' (this is a bug in teamctl)")


class TransitionRefused(TeamctlError):
    """A member's launch state was asked to move where its transition table has no arrow: a
    bug in teamctl (the member ends ``fatal``, the daemon serves on)."""

    code = "transition_refused"

    def __init__(self, team: str, member: str, was: str, to: str, why: str) -> None:
        super().__init__(f"member {member!r} of team {team!r}: its launch cannot move from "
                         f"{was} to {to} ({why}); this is a bug in teamctl", member=member,
                         was=str(was), to=str(to))
        self.was, self.to = str(was), str(to)


class StoreError(TeamctlError):
    code = "store_error"
    retryable = True


class JournalMissing(StoreError):
    code = "journal_missing"
    retryable = False

    def __init__(self, path: str, home: str, state: str) -> None:
        super().__init__(
            f"the journal {path} is {state}, but {home} holds member state and artifacts of "
            "earlier runs: teamctl will not start an empty journal over them (queued messages "
            "and sessions would be forgotten). Restore state.db (with state.db-wal) from a "
            f"backup, or move {home} aside to start afresh", path=path)


class RemoteError(TeamctlError):
    """An error the daemon reported, rebuilt on the CLI side from its wire form."""

    def __init__(self, code: str, message: str, retryable: bool, exit_code: int) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable
        self.exit_code = exit_code


@contextmanager
def map_exceptions(mapping: Mapping[type[BaseException], Callable[[BaseException], TeamctlError]]
                   ) -> Iterator[None]:
    """Translate foreign errors at a boundary (httpcore's ``map_exceptions``): an exception of
    a mapped type is raised again as the TeamctlError its builder makes, chained to it."""
    try:
        yield
    except Exception as exc:
        for source, build in mapping.items():
            if isinstance(exc, source):
                raise build(exc) from exc
        raise


@contextmanager
def unwrap_group() -> Iterator[None]:
    """Re-raise a task group's lone exception as itself (nested groups too), so callers catch
    their typed errors (RuntimeStuck, MemberStartFailed, ...) rather than an ExceptionGroup."""
    try:
        yield
    except BaseExceptionGroup as group:
        inner: BaseException = group
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if inner is group:
            raise
        raise inner from group


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
