"""Types that cross from the orchestrator into runtimes (DESIGN §2).

Runtimes import only this module (and ``runtimes.base``/``runtimes.framing``): the launch spec
of a member, the turn to deliver, the prepared parts of a message, the outcome of a turn, the
capabilities an adapter declares, and the errors a runtime may raise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from orchestrator.costs.figures import token_count, usd  # the one usage-figure gate
from orchestrator.errors import (
    BudgetReached,
    ExecutableNotFound,
    HostUnavailable,
    LineTooLong,
    MemberStartFailed,
    PayloadTooLarge,
    ProtocolError,
    RateLimited,
    RuntimeExited,
    RuntimeNotLoggedIn,
    RuntimeStuck,
    SessionLost,
    TurnFailed,
    map_exceptions,
    unwrap_group,
)
from orchestrator.runtime_table import RuntimeInfo, runtime_info

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path

    from anyio.abc import Process

__all__ = [
    "ApprovalAnswer",
    "ApprovalRequest",
    "Approver",
    "BudgetReached",
    "Capabilities",
    "Description",
    "ExecutableNotFound",
    "HostUnavailable",
    "ImageDescriber",
    "ImagePart",
    "LaunchSpec",
    "LineTooLong",
    "McpServer",
    "MemberStartFailed",
    "Meter",
    "PayloadTooLarge",
    "PreparedPart",
    "ProtocolError",
    "RateLimited",
    "RemoteHost",
    "RuntimeExited",
    "RuntimeInfo",
    "RuntimeNotLoggedIn",
    "RuntimeStuck",
    "SessionLost",
    "TextPart",
    "TokenUsage",
    "Turn",
    "TurnFailed",
    "TurnResult",
    "UsageReading",
    "map_exceptions",
    "redact",
    "runtime_info",
    "token_count",
    "unwrap_group",
    "usd",
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


@dataclass(frozen=True)
class McpServer:
    """teamctl's own MCP server for one member (``teamctl mcp``): its command line and the
    environment it must get — the member's per-launch token among it (never an argument)."""

    command: tuple[str, ...]
    env: Mapping[str, str]

    TOOLS: ClassVar[tuple[str, ...]] = ("send_message", "list_team", "message_status")


@dataclass(frozen=True)
class ApprovalRequest:
    """Something a member's runtime asks the operator (the ``ask`` profile): a tool it wants to
    use, or a question it has. ``summary`` says what, in a line (the queue redacts it)."""

    kind: Literal["permission", "question"]
    tool: str
    summary: str
    questions: tuple[str, ...] = ()


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


class RemoteHost(Protocol):
    """Another machine, reached over SSH (runtimes/ssh.py). ``spawn`` is a Spawner: the local
    process it returns is the ssh client, whose stdio is the remote runtime's, and the member's
    private dir is mirrored there first; paths under it and under the operator's home are
    rewritten to their place on the host."""

    @property
    def name(self) -> str: ...

    async def spawn(self, argv: Sequence[str], *, cwd: Path,
                    env: Mapping[str, str]) -> Process: ...

    async def put_file(self, data: bytes, sha256: str) -> str:
        """The path on the host of a content-addressed copy of ``data`` (verified there)."""
        ...

    async def exists(self, pattern: str) -> bool:
        """Whether a glob (a local path, rewritten to the host's) matches a file there."""
        ...

    async def version(self, executable: str) -> dict[str, Any]:
        """``EXECUTABLE --version`` there: ``found``, ``path``, ``version``."""
        ...

    async def close(self) -> None:
        """Stop what is kept open to the host (its ControlMaster)."""
        ...

    async def master_answers(self, deadline: float) -> bool:
        """Liveness of the way to the host: its ControlMaster answers ``ssh -O check`` within
        ``deadline`` seconds (True when no master is kept: nothing to ask)."""
        ...

    def remote_path(self, path: str) -> str:
        """A local path (or ``~``) as it is on the host (known once connected)."""
        ...

    async def forward_port(self, port: int) -> int:
        """While the member runs, ``127.0.0.1:port`` here reaches a free port on the host's
        loopback (OpenCode's serve), which is returned."""
        ...

    def forward_socket(self, local_socket: str, local_path: str) -> None:
        """While the member runs, ``local_path`` (rewritten to the host's) is a Unix socket
        there forwarded to ``local_socket`` here (the daemon's, for teamctl's MCP tools)."""
        ...

    async def forwarder(self) -> int | None:
        """The pid of the local process whose connections to ``local_socket`` come from the
        host (its ssh ControlMaster, checked now); None if there is none."""
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
    state_dir: Path
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    start_timeout: float = 60.0
    turn_idle_timeout: float = 600.0
    # What the vision catalog (or the operator's ``vision``) says of the member's model:
    # runtimes that gate images themselves (OpenCode) are configured to agree with it.
    image_input: bool | None = None
    # "operator": the CLI's own login and user-level settings, as the operator's own CLI would
    # use them; "isolated": private state, credentials only from ``env`` (docs/logins.md)
    login: Literal["operator", "isolated"] = "isolated"
    # what the member may do (docs/permissions.md); "ask": the rest goes to ``approver``
    permissions: Literal["read", "edit", "full", "ask"] = "edit"
    # teamctl's MCP tools for this member (None: ``messaging = false``)
    mcp: McpServer | None = None
    # codex only: one ``codex exec`` per turn, or one long-lived ``codex app-server``
    transport: Literal["exec", "app-server"] = "app-server"
    # the operator's approvals queue, for the "ask" profile (None: nothing may ask)
    approver: Approver | None = None
    # the daemon's ledger: usage readings and rate limits (None: nothing is counted)
    meter: Meter | None = None
    # Claude only: the CLI's own --max-budget-usd backstop (what is left of the budget)
    max_budget_usd: float | None = None
    # the host the runtime runs on over SSH (None: this machine); ``workdir`` is then a path
    # there ("~": the remote home) and the adapter spawns through it (docs/scaling.md)
    host: RemoteHost | None = None


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


PreparedPart = TextPart | ImagePart


@dataclass(frozen=True)
class Turn:
    """One message to deliver to one member, as parts the runtime's adapter serializes."""

    message_id: str
    parts: tuple[PreparedPart, ...]
    # the parts continue an interrupted turn of this message in the same session (docs/
    # architecture.md, "Effects once"): a runtime that finds the session gone raises
    # SessionLost rather than send them to a new one (the message is then sent whole)
    continues: bool = False


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

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(*(getattr(self, n) + getattr(other, n) for n in self.FIELDS))

    def __sub__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(*(getattr(self, n) - getattr(other, n) for n in self.FIELDS))

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


class Meter(Protocol):
    """The daemon's ledger, as one member's runtime sees it (``LaunchSpec.meter``).

    ``reading`` returns True when the turn must stop now (a budget was crossed): the runtime
    interrupts it as it would a stuck turn and raises ``BudgetReached``. ``rate_limited``
    says the runtime's account hit a limit (``until``: the reset time it named, epoch seconds)."""

    def reading(self, message_id: str, reading: UsageReading) -> bool: ...

    def rate_limited(self, until: float | None, message: str) -> None: ...

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
