"""Types that cross from the orchestrator into runtimes (DESIGN §2).

Runtimes import only this module (and ``runtimes.kit.base``/``runtimes.kit.framing``): the runtime
port they implement (``orchestrator.ports``), the launch spec of a member, the turn to deliver, the
prepared parts of a message, the outcome of a turn, the capabilities an adapter declares, the
errors a runtime may raise, and the process facts both sides read (``orchestrator.processes``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, cast

from orchestrator.acp_agents import AcpAgent, acp_agent, acp_agent_reporting
from orchestrator.beneath import (
    link_beneath,
    open_dir,
    read_beneath,
    read_regular,
    unlink_link_beneath,
    write_beneath,
)
from orchestrator.ceilings import Ceiling
from orchestrator.costs.figures import token_count, usd  # the one usage-figure gate
from orchestrator.errors import (
    BudgetReached,
    CodexSandboxUnusable,
    ExecutableNotFound,
    HostUnavailable,
    LineTooLong,
    MemberStartFailed,
    PayloadTooLarge,
    ProtocolError,
    RateLimited,
    ResourceLimitsUnavailable,
    RuntimeExited,
    RuntimeNotLoggedIn,
    RuntimeStuck,
    SandboxUnavailable,
    SessionLost,
    TurnFailed,
    map_exceptions,
    unwrap_group,
)
from orchestrator.processes import TreeUsage, process_stopped, process_tree, resolve_executable
from orchestrator.runtime_table import RuntimeInfo, runtime_info

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from contextlib import AbstractAsyncContextManager

    from anyio.abc import Process

__all__ = [
    "CGROUPS_MODULE",
    "RUNTIME_HOME",
    "AcpAgent",
    "ApprovalAnswer",
    "ApprovalRequest",
    "Approver",
    "BudgetReached",
    "Capabilities",
    "Ceiling",
    "CgroupClosed",
    "CgroupHost",
    "CgroupsThere",
    "CodexSandboxUnusable",
    "Confined",
    "Description",
    "DocumentPart",
    "DocumentText",
    "ExecutableNotFound",
    "Host",
    "HostProfile",
    "HostUnavailable",
    "ImageDescriber",
    "ImagePart",
    "InboundHost",
    "LaunchSpec",
    "LineTooLong",
    "McpServer",
    "MemberStartFailed",
    "Meter",
    "OnSent",
    "PausingHost",
    "PayloadTooLarge",
    "Placed",
    "PreparedPart",
    "ProtocolError",
    "RateLimited",
    "ResourceLimitsUnavailable",
    "Runtime",
    "RuntimeExited",
    "RuntimeInfo",
    "RuntimeNotLoggedIn",
    "RuntimeProcess",
    "RuntimeStuck",
    "SandboxUnavailable",
    "SessionLost",
    "Spawner",
    "TextPart",
    "TokenUsage",
    "ToolLog",
    "ToolStatus",
    "TreeUsage",
    "Turn",
    "TurnFailed",
    "TurnResult",
    "UsageReading",
    "WindowReading",
    "acp_agent",
    "acp_agent_reporting",
    "cgroup_host",
    "cgroups_there",
    "inbound",
    "link_beneath",
    "map_exceptions",
    "open_dir",
    "pausing",
    "process_stopped",
    "process_tree",
    "read_beneath",
    "read_regular",
    "redact",
    "resolve_executable",
    "runtime_home",
    "runtime_info",
    "token_count",
    "unlink_link_beneath",
    "unwrap_group",
    "usd",
    "write_beneath",
]


@dataclass(frozen=True)
class Capabilities:
    """What a runtime's transport can carry (not what the member's model can see).

    ``image_purpose`` names the variant the adapter delivers; ``inline_base64`` says images
    travel base64-encoded inside one message whose serialized size must stay within
    ``max_payload_bytes`` (checked before anything is written)."""

    image_input: bool
    image_mimes: frozenset[str] = frozenset()
    image_purpose: str = ""
    inline_base64: bool = False
    max_payload_bytes: int | None = None
    # documents the transport carries natively (docs/documents.md): ``application/pdf`` (a
    # Claude ``document`` block, an OpenCode ``file`` part, an ACP embedded resource) and
    # ``text/plain`` (a text document block or resource); anything else reaches the member
    # derived (page images through the image path, the text page by page, as text)
    document_mimes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class McpServer:
    """teamctl's own MCP server for one member (``teamctl mcp``): its command line and the
    environment it must get — the member's per-launch token among it (never an argument).
    What the runtime starts is ``RELAY``, which hands each line to the daemon's MCP server."""

    command: tuple[str, ...]
    env: Mapping[str, str]

    # the relay (orchestrator/client/mcp_bridge.py): the standard library of any python3 >= 3.8,
    # run as ``python -I -S RELAY`` here, in a sandbox (teamctl's package is bound in), on an
    # SSH host or in a pod (copied there); docs/dev/performance.md, "teamctl's own cost"
    RELAY: ClassVar[Path] = Path(__file__).parent / "client" / "mcp_bridge.py"

    TOOLS: ClassVar[tuple[str, ...]] = (
        "send_message", "list_team", "message_status",
        # the team's board (docs/board.md)
        "task_list", "task_get", "task_create", "task_claim", "task_update", "task_complete",
        "task_release", "task_review")


@dataclass(frozen=True)
class ApprovalRequest:
    """Something a member's runtime asks the operator (the ``ask`` profile): a tool it wants to
    use, or a question it has. ``summary`` says what — the whole command, never a cut of it
    (the queue redacts it). ``asked``: the runtime's own request as it came (its JSON
    object), what the operator's decision is bound to by its sha256."""

    kind: Literal["permission", "question"]
    tool: str
    summary: str
    questions: tuple[str, ...] = ()
    asked: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ApprovalAnswer:
    """The operator's answer (or a rule's): ``approve`` (``always``: for the rest of the
    session, and as a rule for later launches), ``deny`` with an optional message for the
    model, or ``answer`` with the text of an answer to a question."""

    request_id: str
    decision: Literal["approve", "deny", "answer"]
    always: bool = False
    message: str | None = None
    text: str | None = None


class Approver(Protocol):
    """The operator's approvals queue, as one member's runtime sees it. ``ask`` waits as long
    as it takes (no timer); ``confirmed`` records that the runtime applied the answer."""

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer: ...

    async def confirmed(self, request_id: str) -> None: ...


ToolStatus = Literal["running", "completed", "failed"]


class ToolLog(Protocol):
    """The daemon's record of the tool calls a member's runtime reports (Claude's
    ``tool_use``, Codex's items, OpenCode's tool parts, ACP's ``tool_call``): each becomes a
    child span of its turn (docs/telemetry.md). ``tool`` is called whenever the runtime says
    something of call ``call_id`` of turn ``message_id`` — the first time it starts it, a
    ``completed`` or ``failed`` status ends it; a repeat changes nothing. ``name``: the tool as
    the runtime names it; ``arguments``: what it was called with, as the runtime gave them
    (kept redacted, exported only with ``include_content``). Never waits."""

    def tool(self, message_id: str, call_id: str, name: str, status: ToolStatus,
             arguments: object = None) -> None: ...


RUNTIME_HOME = "runtime"


def runtime_home(state_dir: Path) -> Path:
    """The runtime's own home inside a member's private dir (``state_dir``): the one place the
    member's runtime writes (its config dir, sessions, caches) and, in a sandbox, the only
    one of teamctl's that it may write. Everything else in ``state_dir`` is the daemon's —
    its files for the runtime (prompt, settings, the MCP config with the token), the pid
    record, the member's socket — and never writable by the member (docs/security.md, "The
    daemon is never a confused deputy")."""
    return state_dir / RUNTIME_HOME


@dataclass(frozen=True)
class Placed:
    """What the runtime must find at ``at`` (relative) inside its runtime ``home``
    (``Host.place``): the daemon's own file ``source`` (in the member's private dir), a
    symlink to ``link`` (the operator's login file, for ``login = "operator"``), or — with
    neither — a directory it writes in (its config dir, its temp dir)."""

    home: Path
    at: str
    source: Path | None = None
    link: str | None = None
    unlink: bool = False  # no link of teamctl's at ``at`` (a real file there is kept)

    @property
    def path(self) -> Path:
        return self.home / self.at


@dataclass(frozen=True)
class Confined:
    """A one-shot command as the member runs it (``Host.confine``): the argv and environment
    that start it here inside the member's boundary."""

    argv: tuple[str, ...]
    env: Mapping[str, str]


@dataclass(frozen=True)
class HostProfile:
    """What the adapters and the core may know of a member's host, as fields: they read its
    ``Host.profile``, never its class (a new kind of host states its own)."""

    # the member's CLI uses the operator's login and settings on this machine: the adapter
    # checks the login (``runtime_not_logged_in``) and reads the operator's config here first
    checks_local_login: bool = True
    # teamctl's own boundary (bubblewrap) holds the member's processes: a CLI's own sandbox
    # cannot nest inside it (Codex's), and need not
    confines_processes: bool = False
    # the runtime's loopback port is reached through a Unix socket here (``InboundHost``)
    inbound_socket: bool = False
    # an asleep member's place is paused and resumed too (``PausingHost``: a pod's Sandbox)
    pauses: bool = False
    # its processes start inside the cgroups the daemon names (``CgroupHost``): a member's
    # ceiling is a cgroup the daemon makes (this machine, a sandbox here)
    cgroups: bool = False
    # the host holds a member's ceiling itself (a pod's resources): the daemon makes no cgroup
    holds_ceiling: bool = False
    # a member's ceiling is a cgroup the host makes on its own machine, the daemon asking
    # (``CgroupsThere``: an SSH host's remote side)
    cgroups_there: bool = False
    # the member's processes live on this machine and hold its memory: memory admission
    # counts it (docs/scaling.md, "Starts that fit"); another host's memory is its own
    local_memory: bool = True


class InboundHost(Protocol):
    """A host whose runtime's loopback port the daemon reaches through a Unix socket here
    (a sandbox in its own network namespace), not over TCP (``HostProfile.inbound_socket``)."""

    def inbound_socket(self, port: int) -> Path | None:
        """The socket that reaches ``127.0.0.1:port`` of the runtime (``forward_port``'s
        port) while it runs; None: that port is reached over TCP as usual."""
        ...


class PausingHost(Protocol):
    """A host whose asleep member's place is paused too (``HostProfile.pauses``: a pod). Every
    host's member sleeps (its process stopped: the member's ``pause_after``, the team's
    ``max_running``); such a host also lets go of what the place holds."""

    async def suspend(self) -> None:
        """Pause the member's place once its runtime has stopped for its sleep (a pod: its
        Sandbox suspended, its volume kept); the next ``spawn`` resumes it. Raises
        HostUnavailable when the place could not be paused (the member is then started again
        at once)."""
        ...


class CgroupHost(Protocol):
    """A host whose processes start inside the cgroups the daemon names
    (``HostProfile.cgroups``: this machine, a sandbox here)."""

    def enter_cgroups(self, procs: Sequence[Path]) -> None:
        """Every later ``spawn`` starts its process inside these cgroups — each a
        ``cgroup.procs`` file the daemon made, the process's pid written there before its
        program is executed, so nothing it starts is ever outside; ``()``: none."""
        ...


# orchestrator/cgroups.py (standard library, python 3.8's): its source is shipped to another
# machine whose side makes a member's cgroup there (``CgroupsThere``: an SSH host)
CGROUPS_MODULE = Path(__file__).with_name("cgroups.py")


@dataclass(frozen=True)
class CgroupClosed:
    """What a member's cgroup on its host saw, read once its process had ended, and what was
    done with it: the processes the kernel's OOM killer ended in it, the most memory it held
    (None: the kernel keeps no peak), what was still running in it (killed), whether it was
    removed (False: something outlived the deadline; the next start takes it over), and its
    path there."""

    oom_kills: int
    peak: int | None
    left: tuple[int, ...]
    removed: bool
    where: str


class CgroupsThere(Protocol):
    """A host that makes a member's cgroup on its own machine, as the daemon asks
    (``HostProfile.cgroups_there``: an SSH host, through its remote side), holding the whole
    tree it starts there to the member's ceiling."""

    async def cgroup_problem(self, controllers: frozenset[str], top: str) -> str | None:
        """Whether a member needing ``controllers`` can have a cgroup there: one made under
        ``top`` (teamctl's group) and removed. None, or why not and what to enable there
        (naming the host). Raises HostUnavailable where the host cannot be asked."""
        ...

    async def make_cgroup(self, top: str, name: str, ceiling: Ceiling) -> str:
        """The member's cgroup ``top/name`` made there with ``ceiling``'s limits (one an
        earlier start left is emptied and taken over), and every later ``spawn`` started
        inside it before its program runs; its path there. ResourceLimitsUnavailable (why,
        what to enable) where it cannot be made; HostUnavailable where the host cannot be
        asked."""
        ...

    async def close_cgroup(self, deadline: float) -> CgroupClosed | None:
        """Once the member's process has ended: its cgroup read (its OOM kills, its peak),
        what it left running killed (waited for up to ``deadline`` seconds) and the cgroup
        removed; later spawns start outside. None: none was made. HostUnavailable where the
        host cannot be asked (the cgroup stays there, for the next start to take over)."""
        ...


def cgroups_there(host: Host) -> CgroupsThere | None:
    """``host`` as a ``CgroupsThere`` where its profile says it is one, else None."""
    return cast("CgroupsThere", host) if host.profile.cgroups_there else None


def cgroup_host(host: Host) -> CgroupHost | None:
    """``host`` as a ``CgroupHost`` where its profile says it is one, else None."""
    return cast("CgroupHost", host) if host.profile.cgroups else None


def inbound(host: Host) -> InboundHost | None:
    """``host`` as an ``InboundHost`` where its profile says it is one, else None."""
    return cast("InboundHost", host) if host.profile.inbound_socket else None


def pausing(host: Host) -> PausingHost | None:
    """``host`` as a ``PausingHost`` where its profile says it pauses, else None."""
    return cast("PausingHost", host) if host.profile.pauses else None


class Host(Protocol):
    """Where a member's runtime runs: this machine (``runtimes.hosts.local.host.LocalHost``) or
    another one over SSH (``runtimes.hosts.ssh.host.SshHost``). Every member has one
    (``LaunchSpec.host``); the supervisor and the adapters ask it, never which one it is.

    A new place to run a teammate (a sandbox, a pod) is one more class implementing these
    members — start a process there (``spawn``), place a file there (``put_file``), look for
    files (``exists``) and the CLI (``find_executable``, ``version``) there, map paths
    (``remote_path``, ``local_path``), reach a port there (``forward_port``), offer teamctl's
    MCP server there (``mcp_server``, ``forwarder``), prove the way there alive (``answers``),
    state what the adapters may know of it (``profile``), and let go of it (``close``) — and no
    adapter changes (docs/runtimes.md, docs/dev/new-host.md). What only some hosts do is a
    protocol of its own the profile names (``InboundHost``, ``PausingHost``)."""

    @property
    def name(self) -> str | None:
        """The host's name in the team file, as status shows it (None: this machine)."""
        ...

    @property
    def profile(self) -> HostProfile:
        """What the adapters and the core may know of this host (never its class)."""
        ...

    def find_executable(self, member: str, command: str | None, *, env_var: str,
                        default: str) -> str:
        """The executable the member is started with: here, found on PATH (its ``command``,
        else ``$env_var``, else ``default``; ExecutableNotFound); on another host, named as it
        is there and looked for at the start (``host_runtime_missing``)."""
        ...

    def local_path(self, path: str) -> str | None:
        """``path`` of the member's (its workdir, its executable) as a file of this machine,
        to check or read here; None when it is not one (it is on another host)."""
        ...

    def remote_path(self, path: str) -> str:
        """A local path (or ``~``) as the runtime sees it (over SSH: known once connected)."""
        ...

    async def spawn(self, argv: Sequence[str], *, cwd: Path,
                    env: Mapping[str, str]) -> Process:
        """A Spawner: the process whose stdio is the runtime's (over SSH: the ssh client; the
        member's private dir is mirrored there first, and paths under it and under the
        operator's home are rewritten to their place there)."""
        ...

    async def put_file(self, image: ImagePart) -> Path | None:
        """Where the runtime reads ``image``'s file: here, the artifact file itself; over
        SSH, a content-addressed copy there (verified against its sha256)."""
        ...

    async def exists(self, pattern: str) -> bool:
        """Whether a glob (a local path, as ``remote_path`` maps it) matches a file there."""
        ...

    async def version(self, executable: str, *, env: Mapping[str, str] | None = None,
                      cwd: Path | None = None, timeout: float = 60.0) -> dict[str, Any]:
        """``EXECUTABLE --version`` there within ``timeout`` seconds: ``found``, ``path``,
        ``version``; ``error`` (what to tell the operator) and ``stderr`` (its last lines)
        when it ran and failed."""
        ...

    def place(self, files: Sequence[Placed]) -> None:
        """Before the next ``spawn``: each of ``files`` in the runtime home (a directory, the
        daemon's file, a link). Here, made there without following a name the member made
        (``orchestrator.beneath``); in a sandbox the daemon makes nothing there — bubblewrap
        makes the directories and links inside, and binds the daemon's file read-only at its
        place; over SSH and in a pod, made here and mirrored there."""
        ...

    async def confine(self, argv: Sequence[str], *, env: Mapping[str, str],
                      workdir: Path | None = None) -> Confined | None:
        """``argv`` as the member itself would run it, for what teamctl runs on the member's
        behalf (its board check, git on its worktree, ``doctor``'s ``--version``): here,
        the same argv; in a sandbox, the bubblewrap command line of the member's own policy
        and network rule (never teamctl's MCP socket), ``SandboxUnavailable`` where
        bubblewrap cannot run; None where the member does not run on this machine (a host,
        a pod). ``workdir``: where it runs instead of the member's workdir (the merge queue's
        scratch worktree, read-write inside as the workdir would be). Never the daemon's own
        rights on what the member controls
        (docs/security.md, "The daemon is never a confused deputy")."""
        ...

    async def forward_port(self, port: int) -> int:
        """While the member runs, ``127.0.0.1:port`` here reaches the returned port on the
        runtime's loopback (OpenCode's serve; here: the same port)."""
        ...

    def mcp_server(self, token: str, *, home: Path, socket: Path,
                   state_dir: Path) -> McpServer:
        """``teamctl mcp`` for this launch as the runtime starts it there, acting as the
        member whose ``token`` it carries (in its env, never argv): here, this python with
        the daemon's ``home``; over SSH, shipped into ``state_dir`` (mirrored there) with the
        daemon's ``socket`` forwarded to a new path for this launch."""
        ...

    async def forwarder(self) -> int | None:
        """The pid of the local process whose connections to the daemon's socket come from
        the host (its ssh ControlMaster, checked now); None if there is none (this machine:
        the member's own processes connect)."""
        ...

    async def answers(self, deadline: float) -> bool:
        """Liveness of the way to the host, the probe's second half: True if it answers within
        ``deadline`` seconds (over SSH: its ControlMaster's ``ssh -O check``; this machine:
        nothing to ask)."""
        ...

    async def close(self) -> None:
        """Let go of what is kept open to the host (its ControlMaster), at ``teamctl stop``."""
        ...


@dataclass(frozen=True)
class LaunchSpec:
    """Everything a runtime needs to start one member's process."""

    team: str
    member: str
    executable: str
    model: str | None
    prompt: str | None
    workdir: Path
    state_dir: Path  # the member's private dir: the daemon's; ``runtime_home`` is the runtime's
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    start_timeout: float = 60.0
    turn_idle_timeout: float = 600.0
    interrupt_grace: float = 10.0  # a stuck turn's interrupt, then the process is killed
    # What the vision catalog (or the operator's ``vision``) says of the member's model:
    # runtimes that gate images themselves (OpenCode) are configured to agree with it.
    image_input: bool | None = None
    # whether teamctl sends this member PDFs natively (the catalog's ``pdf``, or the operator's
    # ``documents = "native"``): OpenCode is configured to accept them (its modalities)
    pdf_input: bool = False
    # "operator": the CLI's own login and user-level settings, as the operator's own CLI would
    # use them; "isolated": private state, credentials only from ``env`` (docs/logins.md)
    login: Literal["operator", "isolated"] = "isolated"
    # what the member may do (docs/permissions.md); "ask": the rest goes to ``approver``
    permissions: Literal["read", "edit", "full", "ask"] = "edit"
    # teamctl's MCP tools for this member (None: ``messaging = false``)
    mcp: McpServer | None = None
    # returns once the runtime has listed ``mcp``'s tools (its ``teamctl mcp`` tells the daemon
    # after its first tools/list): for an agent that does not wait for its MCP servers before
    # the first prompt (Qwen Code over ACP). None: nobody tells.
    mcp_listed: Callable[[], Awaitable[object]] | None = None
    # the member's keys only its runtime reads (``RuntimeInfo.options``: Codex's
    # ``transport``, ACP's ``acp_agent``), as the team file gave them: the adapter types and
    # reads them (runtimes/codex ``CodexOptions``, runtimes/acp ``AcpOptions``)
    options: Mapping[str, Any] = field(default_factory=dict)
    # the operator's approvals queue, for the "ask" profile (None: nothing may ask)
    approver: Approver | None = None
    # the daemon's ledger: usage readings and rate limits (None: nothing is counted)
    meter: Meter | None = None
    # the daemon's record of the turn's tool calls (None: nobody records them)
    tools: ToolLog | None = None
    # Claude only: the CLI's own --max-budget-usd backstop (what is left of the budget)
    max_budget_usd: float | None = None
    # where the runtime runs (runtimes.hosts.local.host.LocalHost: this machine); on another host
    # ``workdir`` is a path there ("~": the remote home) and the adapter spawns through it
    # (docs/scaling.md). Always given: a launch names its host.
    host: Host = field(kw_only=True)

    @property
    def runtime_home(self) -> Path:
        """Where the runtime itself writes (``runtime_home``)."""
        return runtime_home(self.state_dir)


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    """A normalized image variant, verified against its sha256, ready for the adapter."""

    mime: str
    width: int
    height: int
    sha256: str
    data: bytes = field(repr=False)
    path: Path | None = None  # the artifact file, for runtimes that take image files
    # its ``[Image #N]`` number, and the offset in the turn's text right after the marker that
    # first names it (None: the text does not name it). A turn's images come in marker order;
    # an adapter that interleaves (Claude) puts each one at its anchor.
    number: int = 1
    anchor: int | None = None
    # a document's rendered page (route pages): ``number`` is then the document's ``[Doc #N]``
    page: int | None = None


@dataclass(frozen=True)
class DocumentPart:
    """A document the runtime carries natively (its route is ``native``): a PDF's bytes
    (``application/pdf``) or a text file as UTF-8 (``text/plain``), verified against its
    sha256. Documents that reach a member derived arrive as ImageParts (the pages) and a
    TextPart (their text), never as this."""

    mime: str
    name: str
    sha256: str
    data: bytes = field(repr=False)
    pages: int | None = None  # a PDF's page count
    # its ``[Doc #N]`` number and anchor, as for ImagePart
    number: int = 1
    anchor: int | None = None


@dataclass(frozen=True)
class DocumentText(TextPart):
    """A document's text when it reaches the member derived (routes pages and text). It is a
    TextPart to every adapter; a runtime whose tools read files (Codex: ``on_host``) also gets
    the file itself placed where it runs, its path added to the text."""

    name: str = ""
    mime: str = ""
    sha256: str = ""  # of the original file
    original: bytes = field(default=b"", repr=False)
    path: Path | None = None  # the original's artifact file


PreparedPart = TextPart | ImagePart | DocumentPart


@dataclass(frozen=True)
class Turn:
    """One message to deliver to one member, as parts the runtime's adapter serializes."""

    message_id: str
    parts: tuple[PreparedPart, ...]
    # the parts continue an interrupted turn of this message in the same session (docs/dev/
    # architecture.md, "Effects once"): a runtime that finds the session gone raises
    # SessionLost rather than send them to a new one (the message is then sent whole)
    continues: bool = False
    # the W3C ``traceparent`` of this attempt's span in teamctl's trace (docs/telemetry.md):
    # a runtime that takes a trace context per request passes it on (Codex's ``exec``)
    traceparent: str | None = None


@dataclass(frozen=True)
class TokenUsage:
    """Token counts: of one turn, or a runtime's running total (see ``UsageReading``).
    ``input_tokens`` counts every input token, cached ones included; ``cached_input_tokens``
    is the cached part of it; ``reasoning_output_tokens`` is the reasoning part of
    ``output_tokens``."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0

    FIELDS: ClassVar[tuple[str, ...]] = ("input_tokens", "cached_input_tokens",
                                         "output_tokens", "reasoning_output_tokens")

    def as_dict(self) -> dict[str, int]:
        return {name: int(getattr(self, name)) for name in self.FIELDS}

    @property
    def total(self) -> int:
        """What ``budget_tokens`` counts: input plus output."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:  # spelt out: several per turn
        return TokenUsage(self.input_tokens + other.input_tokens,
                          self.cached_input_tokens + other.cached_input_tokens,
                          self.output_tokens + other.output_tokens,
                          self.reasoning_output_tokens + other.reasoning_output_tokens)

    def __sub__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(self.input_tokens - other.input_tokens,
                          self.cached_input_tokens - other.cached_input_tokens,
                          self.output_tokens - other.output_tokens,
                          self.reasoning_output_tokens - other.reasoning_output_tokens)

    def below(self, other: TokenUsage) -> bool:
        """Whether any count is smaller than ``other``'s (a running total went backwards)."""
        return any(getattr(self, n) < getattr(other, n) for n in self.FIELDS)


@dataclass(frozen=True)
class UsageReading:
    """What a runtime reports of a turn's usage, as often as it learns something.

    ``counter`` None: the figures are this turn's own so far (they replace the last reading).
    Otherwise they are a running total the runtime keeps — a process's (Claude's
    ``total_cost_usd``), a thread's (Codex's token usage) — named by ``counter`` (unique to
    that process or thread): the ledger charges the increase since it last settled it, so a
    total is never counted twice across turns, restarts, resumes and re-deliveries.
    ``baseline``: for a counter the ledger has never seen, its value before this turn when the
    runtime can tell (Codex's ``total − last``). ``cost_usd`` None: priced from the price
    table by ``model``. ``estimate``: provisional (during the turn), replaced by any later
    reading that is not."""

    tokens: TokenUsage
    cost_usd: float | None = None
    model: str | None = None
    counter: str | None = None
    baseline: TokenUsage | None = None
    estimate: bool = False
    # the counter's cost is a running total but ``tokens`` are this turn's own (Claude: the
    # session's total_cost_usd, and the result's per-turn usage)
    turn_tokens: bool = False


@dataclass(frozen=True)
class WindowReading:
    """What a runtime said of its account's rate-limit window (docs/costs.md, "Quota
    windows"): ``allowed``, ``warning`` (past a threshold the provider warns at) or
    ``rejected`` (spent: the account is held until ``resets_at``). ``window``: the provider's
    name of it (``five_hour``, ``seven_day``: Claude's words; Codex's minutes named the same
    way); ``used``: the fraction used, 0-1 (None: not reported); ``resets_at``: epoch seconds
    (None: not named)."""

    status: Literal["allowed", "warning", "rejected"]
    window: str | None = None
    used: float | None = None
    resets_at: float | None = None


class Meter(Protocol):
    """The daemon's ledger, as one member's runtime sees it (``LaunchSpec.meter``).

    ``reading`` returns True when the turn must stop now (a budget was crossed): the runtime
    interrupts it as it would a stuck turn and raises ``BudgetReached``. ``rate_limited``
    says the runtime's account hit a limit (``until``: the reset time it named, epoch seconds;
    ``window``: which window, as ``WindowReading.window``): every member of the account is held
    until then. ``window`` is any other report of the account's window (its use so far)."""

    def reading(self, message_id: str, reading: UsageReading) -> bool: ...

    def rate_limited(self, until: float | None, message: str, *,
                     window: str | None = None) -> None: ...

    def window(self, reading: WindowReading) -> None: ...

    def counted(self, counter: str) -> float:
        """The cost a running total was last charged up to (0: never seen) — e.g. where a
        resumed session's own total starts."""
        ...

    def on_stop(self, message_id: str, stop: Callable[[], None]) -> None:
        """``stop`` interrupts the turn ``message_id`` now, as a reading answered True would:
        the ledger calls it (once) when another member's turn crossed the team's budget while
        this one is in flight (docs/costs.md). Registered when the turn starts."""
        ...


@dataclass(frozen=True)
class TurnResult:
    """The runtime's own end-of-turn event for that turn: the delivery proof."""

    reply: str
    session_id: str | None = None
    cost_usd: float | None = None
    # what the runtime refused during the turn ("permission denied: Write <path>: …"), for
    # the message's history line — a refusal never hides inside a "success"
    notes: tuple[str, ...] = ()
    usage: TokenUsage | None = None  # this turn's tokens, where the runtime reports them


def redact(text: str) -> str:
    """The one redactor (orchestrator.redaction), for runtimes that keep stderr or errors."""
    from orchestrator.redaction import redact as _redact

    return _redact(text)


@dataclass(frozen=True)
class Description:
    """What a describer's one-shot side call said of one image (``describe_with``)."""

    text: str
    seconds: float
    usage: TokenUsage | None = None
    cost_usd: float | None = None


class ImageDescriber(Protocol):
    """A runtime that can describe an image in one side call through its real CLI: no tools,
    no session kept, ``spec.turn_idle_timeout`` as its whole deadline. Raises a TeamctlError
    (TurnFailed, RuntimeStuck, ExecutableNotFound...) when it cannot."""

    async def describe(self, spec: LaunchSpec, image: ImagePart,
                       instruction: str) -> Description: ...


# The runtime port (``orchestrator.ports`` is the core's name for it): what the core asks of a
# runtime adapter, and nothing of how one works.

OnSent = Callable[[], Awaitable[None]]


class RuntimeProcess(Protocol):
    """A running member process, ready for turns (one at a time)."""

    @property
    def pid(self) -> int | None: ...

    @property
    def session_id(self) -> str | None: ...

    @property
    def resumed(self) -> bool:
        """Whether the process went on with a session that existed before it started (Claude's
        ``--resume``, Codex's thread resume, OpenCode's session found again): what earlier
        turns on it did, a cut one included, is in the session."""
        ...

    @property
    def exit_code(self) -> int | None:
        """The exit status once the process has exited (negative: killed by that signal)."""
        ...

    @property
    def usable(self) -> bool:
        """False once the process has exited or is being killed: no turn may start on it."""
        ...

    @property
    def healthy(self) -> bool:
        """Liveness evidence beyond the pid (e.g. OpenCode's event stream heartbeats)."""
        ...

    @property
    def activity(self) -> str | None:
        """What the runtime says it is doing now, for status (e.g. "retrying (attempt 2)")."""
        ...

    def stderr_tail(self) -> list[str]: ...

    async def run_turn(self, turn: Turn, *, on_sent: OnSent) -> TurnResult:
        """Deliver ``turn``; call ``on_sent`` once the transport accepted it; return at the
        runtime's end-of-turn event. Raises RuntimeExited, RuntimeStuck or TurnFailed."""
        ...

    async def wait(self) -> int | None:
        """Wait until the process has exited; its exit status (negative: killed by signal)."""
        ...

    async def probe(self, timeout: float) -> bool:
        """Liveness of an idle member: True if the runtime answered within ``timeout``."""
        ...

    def send_probe(self, answered: Callable[[], None]) -> Callable[[], None] | None:
        """The same probe written now, without awaiting (a round of the team's idle members
        goes out in one turn of the event loop; the round holds the deadline):
        ``answered()`` runs when the runtime's answer is read. The callable that forgets the
        probe (its round is over); None when it cannot be written at once — a runtime whose
        probe must be awaited, a write already in progress — and ``probe`` is awaited."""
        ...

    def kill(self) -> None:
        """SIGKILL the member's process group now (an unresponsive member); the supervisor
        sees it exit and restarts it by policy."""
        ...


class Runtime(Protocol):
    """One runtime adapter: its row of ``orchestrator.runtime_table`` (name, executable, and
    the capability fields the core reads), what its transport carries, and how it opens a
    member's process."""

    name: str
    default_executable: str
    env_var: str
    capabilities: Capabilities

    def open(self, spec: LaunchSpec) -> AbstractAsyncContextManager[RuntimeProcess]: ...


class Spawner(Protocol):
    async def __call__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]
    ) -> Process: ...
