"""The team file: TOML → pydantic models (DESIGN §1).

Unknown keys and bad values are errors that name the file, the line, the key and the fix.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from orchestrator.acp_agents import AcpAgentName, acp_agent
from orchestrator.ceilings import CPU_WEIGHT, PIDS, Ceiling, parse_size, shown_size
from orchestrator.errors import TeamctlError, TeamFileError
from orchestrator.forge_config import ForgeSection  # noqa: TC001 (pydantic reads it)
from orchestrator.integrate_config import Integrate, branch_clash
from orchestrator.limits import NAME_PATTERN
from orchestrator.notify_config import NotifySection  # noqa: TC001 (pydantic reads it)
from orchestrator.runtime_table import RuntimeName, runtime_info  # pydantic reads RuntimeName
from orchestrator.sandbox_config import HostPatterns, Network, Sandbox, SandboxPaths  # noqa: TC001
from orchestrator.slots_config import Slots, parse_slot
from orchestrator.telemetry_config import TelemetrySection  # noqa: TC001 (pydantic reads it)

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "NAME_PATTERN",
    "AccountSection",
    "BoardSection",
    "DescribeWith",
    "HostConfig",
    "KubernetesHostConfig",
    "MemberConfig",
    "ResolvedMember",
    "SshDestination",
    "TeamConfig",
    "TeamSection",
    "check_argv",
    "load_team_file",
    "missing_workdirs",
]

Name = Annotated[str, Field(pattern=NAME_PATTERN)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
# budgets (docs/costs.md): a number, never a string that looks like one; never negative
BudgetUsd = Annotated[float, Field(ge=0, le=1_000_000, allow_inf_nan=False, strict=True)]
BudgetTokens = Annotated[int, Field(ge=0, le=10**13, strict=True)]
# the share of a quota window kept for the top priority (docs/costs.md, "Quota windows")
QuotaReserve = Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False, strict=True)]
# a quota account's safe name, as ``teamctl accounts`` shows it: ``claude:operator``,
# ``openai:key…3f2a`` (its length by max_length, not a bounded repeat: see AllowRule)
AccountName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*:[^\s\x00]+$", max_length=240)]
# seconds a member may idle before it is put to sleep (docs/scaling.md, "Idle members asleep"):
# a number, never a string; 0: never (a member's 0 overrides its team's or its host's)
PauseAfter = Annotated[float, Field(ge=0, le=30 * 86400, allow_inf_nan=False, strict=True)]
# at most this many members' processes of the team live at once (docs/scaling.md)
MaxRunning = Annotated[int, Field(ge=1, le=10_000, strict=True)]


def _size(value: object) -> str:
    """A ceiling's size as written ("2G"), checked (``ceilings.parse_size``)."""
    parse_size(value)
    assert isinstance(value, str)
    return value


def _whole(bounds: tuple[int, int], what: str) -> Callable[[object], int]:
    def check(value: object) -> int:
        least, most = bounds
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{value!r} is not a whole number: write one without quotes, "
                             f"{least} … {most} ({what})")
        if not least <= value <= most:
            raise ValueError(f"{value} is outside {least} … {most} ({what})")
        return value
    return check


# a member's ceiling (docs/operations.md, "A ceiling per teammate"): sizes with their unit
Size = Annotated[str, BeforeValidator(_size)]
CpuWeight = Annotated[int, BeforeValidator(_whole(
    CPU_WEIGHT, "100 is every member's share; 200 gets twice the CPU of 100 when both want "
    "it"))]
PidsMax = Annotated[int, BeforeValidator(_whole(
    PIDS, "the processes and threads of the member's whole tree: a runtime, its MCP server, "
    "its tools"))]

_FIXES = {
    "extra_forbidden": "remove it or check its spelling",
    "string_pattern_mismatch": "use letters, digits, '_' and '-' (at most 64, starting "
    "with a letter or digit)",
    "literal_error": "use one of the values listed",
    "missing": "add it",
    "greater_than_equal": "use a number that is not negative",
    "less_than": "use a smaller number",
    "less_than_equal": "use a smaller number",
    "float_type": "use a number (e.g. 10.0), not a string",
    "int_type": "use a whole number, not a string",
    "string_type": "write it as a string, in quotes",
    "too_long": "remove some",
}


_PATTERN_FIXES = {
    "ssh_options": "one option as ssh -o takes it: Key=value, no spaces",
    "address": "a host name or IP address, not starting with '-'",
    "host": "a [hosts.NAME] key, or an ssh destination like user@box",
    "user": "a user name, not starting with '-'",
    "accounts": "an account's name as 'teamctl accounts' shows it, e.g. \"claude:operator\"",
}


# keys whose every error has one fix (what the key takes), whatever pydantic's error type
_KEY_FIXES = {
    "pause_after": "seconds idle before the member is put to sleep, a number from 0 (never) "
    "to 2592000 (30 days), e.g. pause_after = 900",
    "max_running": "a whole number of members' processes live at once, from 1 to 10000, "
    "e.g. max_running = 10; remove it for no cap",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _bounded(value: str, separator: str, head: int, tail: int, what: str) -> str:
    """``value`` whose part before ``separator`` has at most ``head`` characters and the part
    from it on at most ``tail``; else ``what`` is the error."""
    before, sep, after = value.partition(separator)
    if len(before) > head or len(sep + after) > tail:
        raise ValueError(what)
    return value


# a branch, tag or commit; never starting with "-" (git would read it as an option)
GitRef = Annotated[str, Field(pattern=r"^[^-\s][^\s]{0,254}$")]
Login = Literal["operator", "isolated"]
# an approvals rule: TOOL or TOOL(GLOB), e.g. "Write" or "Bash(npm test*)"
# (the lengths are checked apart from the pattern: a bounded repeat of a Unicode class, \w{0,80},
# compiles to an automaton of megabytes in pydantic-core's regex engine — 8 MiB of the daemon)
AllowRule = Annotated[str, Field(pattern=r"^[A-Za-z_][\w.-]*(\([^()]+\))?$"),
                      AfterValidator(lambda rule: _bounded(
                          rule, "(", 81, 502, "a tool of at most 81 characters and at most "
                          "500 characters between its parentheses"))]
Permissions = Literal["read", "edit", "full", "ask"]


def _reserve(value: object) -> str:
    """``memory_reserve`` as written ("2G"), checked: a size as a ceiling's, from 0 up."""
    parse_size(value, least=0)
    assert isinstance(value, str)
    return value


# memory kept free, as written ("2G", "512M": a ceiling's sizes, 0 allowed), kept as the
# operator wrote it (a relaunch compares the text)
MemorySize = Annotated[str, BeforeValidator(_reserve)]


class DescribeWith(_Strict):
    """A text-only member's opt-in to described images (docs/attachments.md): each image sent
    to it is first described by one side call through this runtime's real CLI and model (which
    must see images), and the member receives the description in place of the image."""

    runtime: RuntimeName
    model: Annotated[str, Field(min_length=1, max_length=200)]
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    login: Login | None = None  # default: the member's
    timeout: Annotated[float, Field(gt=0, le=3600)] = 120.0  # the whole side call


# an ssh destination ("box", "user@box", "user@10.0.0.5"): never starting with "-" (ssh would
# read it as an option), no spaces or shell characters
SshDestination = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}@?"
                                              r"[A-Za-z0-9_.:-]{0,253}$")]
SshOption = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9]{1,63}=[^\s\x00]+$"),
                      AfterValidator(lambda option: _bounded(
                          option, "=", 64, 1001, "a name of at most 64 characters and a value "
                          "of at most 1000"))]


class HostConfig(_Strict):
    """A machine members can run on, over the system OpenSSH client (docs/scaling.md)."""

    address: Annotated[str, Field(pattern=r"^[A-Za-z0-9_\[][A-Za-z0-9_.:\[\]-]{0,252}$")]
    user: Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")] | None = None
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    identity_file: str | None = None
    ssh_options: list[SshOption] = []  # "Key=value", as ssh -o takes them
    workdir: str | None = None  # members' default working directory there (default: ~)
    kind: Literal["ssh"] = "ssh"


# a Kubernetes object name (RFC 1123 label: what a namespace, a Secret, a RuntimeClass take)
KubeName = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]


class KubernetesHostConfig(_Strict):
    """Members run in pods of a Kubernetes cluster (docs/scaling.md, "On Kubernetes"): one
    agent-sandbox ``Sandbox`` per member (a Pod and a PVC where its CRD is absent). Credentials
    come from ``secret``, a Secret of the namespace, by name: never a value in the team file."""

    kind: Literal["kubernetes"]
    context: Annotated[str, Field(min_length=1, max_length=253)] | None = None
    kubeconfig: str | None = None  # default: $KUBECONFIG, else ~/.kube/config
    namespace: KubeName = "default"
    # (lengths by max_length, not by a bounded repeat of a Unicode class: pydantic-core
    # compiles those into automata of megabytes — see AllowRule)
    # python3 and the CLIs; without it, the template's (one of the two is required)
    image: Annotated[str, Field(pattern=r"^[^\s-]\S*$", max_length=512)] | None = None
    storage: Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti)?$")] = "10Gi"
    storage_class: KubeName | None = None
    runtime_class: KubeName | None = None  # gVisor, Kata...
    # an agent-sandbox SandboxTemplate of the namespace: the member's own Sandbox is rendered
    # from it, this table's keys winning (runtimes/hosts/kubernetes/template.py); never claimed
    template: KubeName | None = None
    service_account: KubeName | None = None
    secret: KubeName | None = None  # its keys become the member's environment (envFrom)
    workdir: Annotated[str, Field(pattern=r"^/[^\x00]*$", max_length=1024)] = "/workspace"
    keep: bool = False  # teamctl stop suspends the sandbox (its volume kept) instead of deleting
    start_timeout: Annotated[float, Field(gt=0, le=3600)] = 300.0  # the pod Running by then
    # the default pause_after of the members on this host (a member's own key wins, then this,
    # then the team's): idle that long, a member sleeps — here its Sandbox suspended too (no
    # pod, its volume kept); its next message wakes it, the session with it. None: the team's
    pause_after: Annotated[float, Field(gt=0, le=30 * 86400)] | None = None

    @model_validator(mode="after")
    def _image_or_template(self) -> KubernetesHostConfig:
        """The pod's image comes from this table or from the template's agent container."""
        if self.image is None and self.template is None:
            raise ValueError("image or template is required: set image = \"…\" (an image with "
                             "python3 and the runtime's CLI) or template = \"…\" (an "
                             "agent-sandbox SandboxTemplate of the namespace)")
        return self


def _split_hosts(data: Any) -> Any:
    """``[hosts.NAME] kind = "kubernetes"`` tables go to ``kubernetes_hosts`` (SSH hosts stay
    ``hosts``)."""
    if not isinstance(data, dict) or not isinstance(data.get("hosts"), dict):
        return data
    kube = {name: table for name, table in data["hosts"].items()
            if isinstance(table, dict) and table.get("kind") == "kubernetes"}
    if not kube:
        return data
    return {**data, "hosts": {k: v for k, v in data["hosts"].items() if k not in kube},
            "kubernetes_hosts": {**data.get("kubernetes_hosts", {}), **kube}}


class TeamSection(_Strict):
    name: Name
    workdir: str = "."
    # defaults for every member (a member's own key wins)
    login: Login = "operator"
    permissions: Permissions = "edit"
    worktree: bool = False  # each member in its own git worktree (docs/permissions.md)
    base: GitRef | None = None  # the ref worktrees are made from (default: the workdir's HEAD)
    # the router's guards for teammates' messages (docs/messaging.md)
    max_chain_depth: Annotated[int, Field(ge=1, le=50)] = 5
    max_messages_per_minute: Annotated[int, Field(ge=1, le=600)] = 10
    pair_cooldown: Annotated[float, Field(ge=0, le=3600)] = 3.0
    allow: list[AllowRule] = []  # pre-approved for every "ask" member (docs/approvals.md)
    budget_usd: BudgetUsd | None = None  # the whole team's (docs/costs.md)
    budget_tokens: BudgetTokens | None = None
    claims: bool = False  # members take the next ready task when idle (docs/board.md)
    # the OS boundary around each member (docs/security.md, "Sandbox"); a member's key wins
    sandbox: Sandbox = "none"
    sandbox_rw: SandboxPaths = []
    sandbox_ro: SandboxPaths = []
    sandbox_hide: SandboxPaths = []  # added to the member's own
    network: Network = "on"
    allow_hosts: HostPatterns = []
    # directories an unsandboxed member may attach files from, beside its workdir, worktree
    # and runtime home (docs/attachments.md, "What a teammate may attach"); a member's key wins
    attach_paths: SandboxPaths = []
    # the merge queue (docs/land.md): where a finished task's commits land, after what check
    integrate: Integrate | None = None
    integrate_retries: Annotated[int, Field(ge=1, le=100, strict=True)] = 3
    # once an account's window is reported this far from spent, members below the top
    # priority take no new turns until its reset (docs/costs.md, "Quota windows"); 0: never
    quota_reserve: QuotaReserve = 0.0
    # memory this machine keeps free: a member here starts (or wakes) only when its expected
    # footprint fits in MemAvailable above it; else it waits (docs/scaling.md, "Starts that
    # fit"). A relaunch that changes only this applies it to the running team
    memory_reserve: MemorySize = "1G"
    # every member's ceiling (a member's key wins; docs/operations.md, "A ceiling per teammate")
    memory_max: Size | None = None
    memory_high: Size | None = None
    cpu_weight: CpuWeight | None = None
    pids_max: PidsMax | None = None
    # variables each member finds in its environment with a value of its own: a port, a
    # database name, an index (docs/operations.md, "A port and a database name of its own")
    slots: Slots = {}

    @model_validator(mode="after")
    def _names_apart(self) -> TeamSection:
        """Two ``name`` slots with one prefix would give each member one name twice."""
        seen: dict[str | None, str] = {}
        for var, text in self.slots.items():
            kind = parse_slot(text)
            if kind.kind != "name":
                continue
            if kind.prefix in seen:
                raise ValueError(f"slots: {seen[kind.prefix]} and {var} would give each member "
                                 f"the same name; give one a prefix, e.g. {var} = "
                                 "\"name:test\"")
            seen[kind.prefix] = var
        return self
    # an idle member asleep after this many seconds, woken by its next message (docs/scaling.md,
    # "Idle members asleep"); a member's key wins, then its Kubernetes host's; None or 0: never
    pause_after: PauseAfter | None = None
    max_running: MaxRunning | None = None  # members' processes live at once (None: no cap)

    @property
    def memory_reserve_bytes(self) -> int:
        return parse_size(self.memory_reserve, least=0)


class AccountSection(_Strict):
    """One quota account's own settings, under ``[accounts."claude:operator"]`` (docs/costs.md,
    "Quota windows"): its reserve, over the team's."""

    quota_reserve: QuotaReserve


class BoardSection(_Strict):
    """The team's board (docs/board.md): how long a dead owner's task is kept, the check
    before done, who reviews, and how long a released offer cools down."""

    task_grace: Annotated[float, Field(ge=0, le=86400, allow_inf_nan=False)] = 60.0
    check: Annotated[str, Field(min_length=1, max_length=2000)] | None = None
    check_timeout: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)] = 600.0
    review_by: Name | None = None  # a member's name, or "operator"
    offer_cooldown: Annotated[float, Field(ge=0, le=86400, allow_inf_nan=False)] = 300.0

    @model_validator(mode="after")
    def _check_splits(self) -> BoardSection:
        if self.check is not None:
            check_argv(self.check)
        return self


def check_argv(command: str) -> list[str]:
    """A gate command as its argv (shell-like quoting, never a shell); ValueError if it
    does not split or is empty."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"check = {command!r} does not split into words ({exc}); "
                         "balance its quotes") from None
    if not argv:
        raise ValueError("check is empty; name a command, e.g. \"make test\"")
    return argv


class DocumentPages(_Strict):
    """How many pages of a PDF a member takes natively, and how many are rendered as images
    on the pages route (docs/documents.md)."""

    native: Annotated[int, Field(ge=1, le=1000)] = 100
    rendered: Annotated[int, Field(ge=1, le=100)] = 20


class MemberConfig(_Strict):
    """One teammate: its runtime, model, role and supervision policy."""

    name: Name
    runtime: RuntimeName
    model: str | None = None
    prompt: str | None = None
    vision: bool | None = None
    describe_with: DescribeWith | None = None  # images described for a text-only member
    # how PDFs reach it (docs/documents.md): native | pages | text (None: teamctl chooses)
    documents: Literal["native", "pages", "text"] | None = None
    document_pages: DocumentPages = Field(default_factory=DocumentPages)
    # where its runtime runs: a [hosts.NAME] key, or an ssh destination ("user@box"); None:
    # this machine. Its workdir is then a path on that host (docs/scaling.md)
    host: SshDestination | None = None
    workdir: str | None = None
    # its executable, or its whole command line (a list: the executable, then arguments that
    # come before ``args``); ``acp_agent``: an ACP agent's preset command line (docs/runtimes.md)
    command: str | Annotated[list[Annotated[str, Field(min_length=1)]],
                             Field(min_length=1)] | None = None
    acp_agent: AcpAgentName | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    pass_env: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = []
    config: dict[str, Any] = {}
    login: Login | None = None
    permissions: Permissions | None = None
    worktree: bool | None = None
    base: GitRef | None = None
    messaging: bool = True  # teamctl's MCP tools: send_message, list_team, message_status
    # the board (docs/board.md): the tasks it may take, whether it acts as the lead (assigns,
    # acts on any task), whether it is offered tasks when idle (default: the team's), and how
    # many tasks it holds in progress at once
    role: Name | None = None
    lead: bool = False
    claims: bool | None = None
    max_tasks: Annotated[int, Field(ge=1, le=100)] = 1
    # who keeps turns in a quota window's reserve (docs/costs.md, "Quota windows"): the
    # highest first; default 1 for the lead, else 0
    priority: Annotated[int, Field(ge=0, le=100, strict=True)] | None = None
    allow: list[AllowRule] = []  # "ask": pre-approved TOOL or TOOL(PATTERN) (docs/approvals.md)
    sandbox: Sandbox | None = None  # docs/security.md, "Sandbox" (default: the team's)
    sandbox_rw: SandboxPaths | None = None
    sandbox_ro: SandboxPaths | None = None
    sandbox_hide: SandboxPaths = []
    network: Network | None = None
    allow_hosts: HostPatterns | None = None
    attach_paths: SandboxPaths | None = None  # default: the team's
    transport: Literal["exec", "app-server"] = "app-server"  # codex only (docs/runtimes.md)
    budget_usd: BudgetUsd | None = None  # checked before and during each turn (docs/costs.md)
    budget_tokens: BudgetTokens | None = None  # input + output tokens
    # its whole process tree's ceiling, in a cgroup of its own (default: the team's;
    # docs/operations.md, "A ceiling per teammate")
    memory_max: Size | None = None
    memory_high: Size | None = None
    cpu_weight: CpuWeight | None = None
    pids_max: PidsMax | None = None
    # a long-lived member process is recycled — stopped, started again, its session resumed —
    # after this many turns, or once it and its children hold more memory or more processes
    # than this (0: never); not a crash: the restart policy never sees it (docs/runtimes.md)
    recycle_turns: Annotated[int, Field(ge=0)] = 200
    recycle_rss_mb: Annotated[int, Field(ge=0)] = 2048
    recycle_children: Annotated[int, Field(ge=0)] = 64
    # how often (at most) the memory and children limits are measured after a turn (0: after
    # every turn); measuring walks /proc, which a busy team should not pay on every turn
    recycle_check_interval: Annotated[float, Field(ge=0, le=3600)] = 5.0
    restart: Literal["on-failure", "always", "never"] = "on-failure"
    backoff: tuple[Seconds, Seconds] = (1.0, 60.0)
    max_restarts: Annotated[int, Field(ge=0)] = 5
    restart_window: Seconds = 300.0
    start_timeout: Seconds = 60.0
    turn_idle_timeout: Seconds = 600.0
    # a stuck turn is interrupted; one not ended within this grace is killed (restarted)
    interrupt_grace: Seconds = 10.0
    # an idle member is probed on its runtime's cheapest real channel every interval; no
    # answer within the deadline: liveness "unresponsive", killed, restarted
    # (docs/dev/architecture.md)
    liveness_interval: Seconds = 15.0
    liveness_deadline: Seconds = 10.0
    # asleep after this many idle seconds (0: never, whatever its team or host says; None: the
    # team's, or its Kubernetes host's): docs/scaling.md, "Idle members asleep"
    pause_after: PauseAfter | None = None

    @model_validator(mode="after")
    def _backoff_ordered(self) -> MemberConfig:
        if self.backoff[0] > self.backoff[1]:
            raise ValueError("backoff = [first, largest]: the first delay exceeds the largest")
        return self

    @model_validator(mode="after")
    def _agent_named(self) -> MemberConfig:
        """A runtime of agent presets (``agent_presets``) runs the agent its ``acp_agent`` or
        ``command`` names, and only such a runtime takes a preset."""
        presets = runtime_info(self.runtime).agent_presets
        if self.acp_agent is not None and not presets:
            raise ValueError(f"acp_agent: runtime = \"{self.runtime}\" takes no agent preset; "
                             "remove acp_agent")
        if presets and self.acp_agent is None and self.command is None:
            raise ValueError(f"runtime = \"{self.runtime}\" runs an agent you name: set "
                             "acp_agent (e.g. \"qwen\") or command (e.g. [\"qwen\", \"--acp\"])")
        return self

    def command_line(self) -> tuple[str | None, tuple[str, ...]]:
        """The executable the team file names (None: the runtime's own) and the arguments
        before the runtime's: ``command``'s rest or the preset's, then ``args``. A string
        ``command`` with a preset replaces only the preset's executable."""
        preset = acp_agent(self.acp_agent)
        if isinstance(self.command, list):
            return self.command[0], (*self.command[1:], *self.args)
        if preset is None:
            return self.command, tuple(self.args)
        return self.command or preset.argv[0], (*preset.argv[1:], *self.args)


class TeamConfig(_Strict):
    """A whole team file, with ``workdir`` already made absolute."""

    team: TeamSection
    hosts: dict[Annotated[str, Field(pattern=NAME_PATTERN)], HostConfig] = {}
    # the [hosts.NAME] tables of kind = "kubernetes" (moved here by _split_hosts)
    kubernetes_hosts: dict[Annotated[str, Field(pattern=NAME_PATTERN)],
                           KubernetesHostConfig] = {}
    board: BoardSection = Field(default_factory=BoardSection)
    notify: NotifySection | None = None  # pushes and alerts of what needs you (docs/notify.md)
    forge: ForgeSection | None = None  # issues in, pull requests out (docs/forge.md)
    # the team's work as OpenTelemetry traces and metrics (docs/telemetry.md)
    telemetry: TelemetrySection | None = None
    # a quota account's own settings by its name (docs/costs.md, "Quota windows")
    accounts: dict[AccountName, AccountSection] = {}
    members: Annotated[list[MemberConfig], Field(min_length=1)]
    # each member resolved (``resolved``), by the identity of its entry in ``members``
    _resolved: dict[int, ResolvedMember] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        """No string anywhere may hold a NUL: none can reach a command line or environment."""
        where = _find_nul(data)
        if where is not None:
            raise ValueError(f"{where}: contains a NUL character (\\u0000); remove it")
        return _split_hosts(data)

    @model_validator(mode="after")
    def _pod_members(self) -> TeamConfig:
        """A member in a pod: no operator login (a copy of a subscription login there would
        log the operator out here: a Secret's API key instead), no teamctl MCP tools yet."""
        for index, member in enumerate(self.members):
            resolved = self.resolved(member)
            if member.host not in self.kubernetes_hosts:
                continue
            if resolved.login == "operator":
                raise ValueError(
                    f"members[{index}].login: a member on Kubernetes host {member.host!r} "
                    "cannot use the operator's login (a subscription login copied into a pod "
                    "is spent there and logs the operator out here); set login = "
                    "\"isolated\" and name a Secret with its API key (secret = ... in "
                    f"[hosts.{member.host}]), or put it on an SSH host")
        return self

    @model_validator(mode="after")
    def _ask_needs_a_channel(self) -> TeamConfig:
        """``ask`` needs a runtime that can ask on the member's transport (``can_ask``: Codex
        only on app-server, exec runs approval ``never``)."""
        for index, member in enumerate(self.members):
            resolved = self.resolved(member)
            if resolved.permissions == "ask" and \
                    not runtime_info(member.runtime).can_ask(member.transport):
                raise ValueError(f"members[{index}]: permissions = \"ask\" needs transport = "
                                 f"\"app-server\" ({member.runtime} {member.transport} cannot "
                                 "ask); remove transport")
            if resolved.permissions == "ask" and resolved.sandbox != "none" and \
                    runtime_info(member.runtime).asks_through_own_sandbox:
                raise ValueError(f"members[{index}]: permissions = \"ask\" cannot run "
                                 f"sandboxed: {member.runtime} asks through its own sandbox, "
                                 "which cannot start inside teamctl's; use \"edit\" or "
                                 "\"full\" (the sandbox is the boundary) or sandbox = \"none\"")
        return self

    @model_validator(mode="after")
    def _remote_members(self) -> TeamConfig:
        """What a member on another host cannot have: a worktree made here; in a pod, a
        bubblewrap sandbox; on an SSH host, a sandboxed OpenCode cut off from the network
        (the daemon reaches its server through a forwarded TCP port)."""
        for index, member in enumerate(self.members):
            resolved = self.resolved(member)
            if member.host is None:
                continue
            if resolved.worktree:
                raise ValueError(f"members[{index}].host: a member on another host has no "
                                 "worktree here; set worktree = false for it")
            if resolved.sandbox == "none":
                continue
            if resolved.kubernetes is not None:
                raise ValueError(f"members[{index}].host: a member in a Kubernetes pod cannot "
                                 "be sandboxed with bubblewrap (the pod is its boundary: "
                                 "runtime_class for gVisor or Kata); set sandbox = \"none\" "
                                 "for it")
            if runtime_info(member.runtime).daemon_connects_in and \
                    resolved.network != "on":
                raise ValueError(f"members[{index}].host: a sandboxed OpenCode on another host "
                                 "needs network = \"on\" (its server is reached through a "
                                 "forwarded port, not yet through the sandbox's relay)")
        return self

    @model_validator(mode="after")
    def _network_needs_sandbox(self) -> TeamConfig:
        """``network = "off" | "allowlist"`` is enforced by the sandbox's namespace."""
        for index, member in enumerate(self.members):
            resolved = self.resolved(member)
            if resolved.network != "on" and resolved.sandbox == "none":
                raise ValueError(f"members[{index}]: network = "
                                 f"\"{resolved.network}\" needs sandbox = "
                                 "\"process\" (the network is cut off by its namespace)")
        return self

    @model_validator(mode="after")
    def _attach_paths_unsandboxed_here(self) -> TeamConfig:
        """``attach_paths`` grants an unsandboxed member of this machine more to attach; a
        sandboxed member attaches what its sandbox shows it, and a member elsewhere nothing
        read here — a grant for either would be ignored, so it is refused."""
        for index, member in enumerate(self.members):
            resolved = self.resolved(member)
            if not resolved.attach_paths:
                continue
            key = "attach_paths" if member.attach_paths else "attach_paths (the team's)"
            if member.host is not None:
                raise ValueError(f"members[{index}].{key}: a member on another host names "
                                 "files there, which teamctl does not read; set attach_paths "
                                 "= [] for it")
            if resolved.sandbox != "none":
                raise ValueError(f"members[{index}].{key}: a sandboxed member attaches what "
                                 "its sandbox shows it; bind the directory in with sandbox_ro "
                                 "instead, and set attach_paths = [] for it")
        return self

    @model_validator(mode="after")
    def _ceilings_ordered(self) -> TeamConfig:
        """``memory_high`` throttles below ``memory_max``: one above it would never act."""
        for index, member in enumerate(self.members):
            ceiling = self.resolved(member).ceiling
            if ceiling is None or ceiling.memory_max is None or ceiling.memory_high is None:
                continue
            if ceiling.memory_high > ceiling.memory_max:
                raise ValueError(
                    f"members[{index}].memory_high: {shown_size(ceiling.memory_high)} is above "
                    f"its memory_max {shown_size(ceiling.memory_max)}, where it would never "
                    "act; lower memory_high (or raise memory_max)")
        return self

    @model_validator(mode="after")
    def _daemons_secrets_kept(self) -> TeamConfig:
        """The forge's token (docs/forge.md) and the telemetry exporter's headers
        (docs/telemetry.md) are the daemon's: no member may be handed the variable that holds
        either, by ``pass_env`` or ``env``."""
        if self.forge is not None:
            self._kept_from_members(self.forge.github.token_env,
                                    "the forge's token ([forge] github.token_env)")
        if self.telemetry is not None and self.telemetry.otlp.headers_env is not None:
            self._kept_from_members(self.telemetry.otlp.headers_env, "the telemetry "
                                    "exporter's headers ([telemetry] otlp.headers_env)")
        return self

    def _kept_from_members(self, secret: str, what: str) -> None:
        for index, member in enumerate(self.members):
            for key in ("pass_env", "env"):
                if secret in getattr(member, key):
                    raise ValueError(f"members[{index}].{key}: {secret} holds {what}, which "
                                     f"is the daemon's and never a member's; remove it from "
                                     f"{key}")

    @model_validator(mode="after")
    def _slots_apart_from_env(self) -> TeamConfig:
        """A slot's variable is teamctl's to set: a member's ``env`` or ``pass_env`` naming
        it too would leave one of the two values unused, silently."""
        for index, member in enumerate(self.members):
            for key in ("env", "pass_env"):
                clash = [var for var in getattr(member, key) if var in self.team.slots]
                if clash:
                    raise ValueError(f"members[{index}].{key}: {clash[0]} is a slot of the "
                                     "team ([team] slots gives each member its own); remove it "
                                     f"from {key}, or from slots")
        return self

    @model_validator(mode="after")
    def _unique_members(self) -> TeamConfig:
        seen: set[str] = set()
        for member in self.members:
            if member.name in seen:
                raise ValueError(f"two members are named {member.name!r}; names must be unique")
            seen.add(member.name)
        return self

    @model_validator(mode="after")
    def _integrate_apart(self) -> TeamConfig:
        """The integration branch is no member's own branch, nor inside one."""
        if self.team.integrate is None:
            return self
        branch = self.team.integrate.branch_of(self.name)
        member = branch_clash(branch, self.name, [m.name for m in self.members])
        if member is not None:
            raise ValueError(f"team.integrate.branch: {branch!r} clashes with member "
                             f"{member}'s own branch teamctl/{self.name}/{member}/work; name "
                             "another branch, or rename the member")
        return self

    @model_validator(mode="after")
    def _reviewer_exists(self) -> TeamConfig:
        """``review_by`` names a member of the team, or the operator."""
        reviewer = self.board.review_by
        names = [m.name for m in self.members]
        if reviewer not in (None, "operator", *names):
            raise ValueError(f"board.review_by: no member named {reviewer!r}; name one of "
                             f"{', '.join(names)}, or \"operator\"")
        if "operator" in names and reviewer == "operator":
            raise ValueError("board.review_by = \"operator\" is ambiguous: a member is named "
                             "operator; rename that member")
        return self

    @property
    def name(self) -> str:
        return self.team.name

    def member(self, name: str) -> MemberConfig | None:
        return next((m for m in self.members if m.name == name), None)

    def resolved(self, member: MemberConfig) -> ResolvedMember:
        """``member`` with the team's defaults applied: every member is resolved once, when
        the first is asked for."""
        if not self._resolved:
            workdirs = [(m, _workdir(self.team, m)) for m in self.members]
            self._resolved.update((id(m), _resolve(self, m, workdirs)) for m in self.members)
        found = self._resolved.get(id(member))
        if found is None or found.config is not member:  # not one of ``members``
            return _resolve(self, member, [(m, _workdir(self.team, m)) for m in self.members])
        return found


@dataclass(frozen=True)
class ResolvedMember:
    """One member as it runs: its team file entry (``config``) with every team default
    applied (a member's own key wins), computed once by ``TeamConfig.resolved``."""

    config: MemberConfig
    login: Login
    permissions: Permissions
    sandbox: Sandbox
    sandbox_paths: dict[str, list[str]]  # rw, ro (the member's list, else the team's), hide
    attach_paths: list[str]  # what the operator grants an unsandboxed member to attach from
    network: Network
    allow_hosts: list[str]
    worktree: bool
    allow: list[str]  # the team's pre-approved rules, then the member's
    base: str | None
    claims: bool
    workdir: Path  # its workdir on this machine
    other_workdirs: tuple[Path, ...]  # the workdirs here of the team's other members
    # the SSH host it runs on (its name and settings; a bare destination gets settings of its
    # own), or its Kubernetes host; neither: this machine
    ssh_host: tuple[str, HostConfig] | None
    kubernetes: tuple[str, KubernetesHostConfig] | None
    remote_workdir: str | None  # on another host: its workdir there (None: the remote home)
    ceiling: Ceiling | None = None  # its process tree's limits (None: none set)
    # idle seconds before it is put to sleep (None: never): its own key, else its Kubernetes
    # host's, else its team's (docs/scaling.md, "Idle members asleep")
    pause_after: float | None = None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def sandbox_shown(self) -> str | None:
        """Its sandbox as ``status`` shows it ("process, network on"); None: none."""
        return None if self.sandbox == "none" else f"{self.sandbox}, network {self.network}"


def _resolve(team: TeamConfig, member: MemberConfig,
             workdirs: list[tuple[MemberConfig, Path]]) -> ResolvedMember:
    section = team.team
    ssh_host = _ssh_host(team, member)
    kubernetes = _kubernetes_host(team, member)
    where = kubernetes or ssh_host
    return ResolvedMember(
        config=member, login=member.login or section.login,
        permissions=member.permissions or section.permissions,
        sandbox=member.sandbox or section.sandbox,
        sandbox_paths={
            "rw": section.sandbox_rw if member.sandbox_rw is None else member.sandbox_rw,
            "ro": section.sandbox_ro if member.sandbox_ro is None else member.sandbox_ro,
            "hide": [*section.sandbox_hide, *member.sandbox_hide]},
        attach_paths=section.attach_paths if member.attach_paths is None
        else member.attach_paths,
        network=member.network or section.network,
        allow_hosts=section.allow_hosts if member.allow_hosts is None else member.allow_hosts,
        worktree=section.worktree if member.worktree is None else member.worktree,
        allow=[*section.allow, *member.allow], base=member.base or section.base,
        claims=section.claims if member.claims is None else member.claims,
        workdir=_workdir(section, member),
        other_workdirs=tuple(workdir for m, workdir in workdirs
                             if m.name != member.name and m.host is None),
        ssh_host=ssh_host, kubernetes=kubernetes,
        remote_workdir=None if where is None else member.workdir or where[1].workdir,
        ceiling=_ceiling(section, member),
        pause_after=_pause_after(section, member, kubernetes))


def _ceiling(section: TeamSection, member: MemberConfig) -> Ceiling | None:
    """The member's ceiling: each key its own, else the team's (None: no key set)."""
    def own(key: str) -> Any:
        value = getattr(member, key)
        return getattr(section, key) if value is None else value

    memory_max, memory_high = own("memory_max"), own("memory_high")
    ceiling = Ceiling(memory_max=None if memory_max is None else parse_size(memory_max),
                      memory_high=None if memory_high is None else parse_size(memory_high),
                      cpu_weight=own("cpu_weight"), pids_max=own("pids_max"))
    return ceiling if ceiling.keys else None


def _pause_after(section: TeamSection, member: MemberConfig,
                 kubernetes: tuple[str, KubernetesHostConfig] | None) -> float | None:
    """The member's own ``pause_after``, else its Kubernetes host's, else its team's; 0 (or
    none anywhere) is never."""
    chosen = member.pause_after
    if chosen is None and kubernetes is not None:
        chosen = kubernetes[1].pause_after
    if chosen is None:
        chosen = section.pause_after
    return chosen or None


def _workdir(section: TeamSection, member: MemberConfig) -> Path:
    base = Path(section.workdir)
    return (base / member.workdir).resolve() if member.workdir else base


def _ssh_host(team: TeamConfig, member: MemberConfig) -> tuple[str, HostConfig] | None:
    """The SSH host a member runs on, None for this machine or a pod; a bare ssh destination
    gets settings of its own (the operator's ssh config applies)."""
    if member.host is None or member.host in team.kubernetes_hosts:
        return None
    if member.host in team.hosts:
        return member.host, team.hosts[member.host]
    user, _, address = member.host.rpartition("@")
    return member.host, HostConfig(address=address, user=user or None)


def _kubernetes_host(team: TeamConfig, member: MemberConfig
                     ) -> tuple[str, KubernetesHostConfig] | None:
    if member.host is not None and member.host in team.kubernetes_hosts:
        return member.host, team.kubernetes_hosts[member.host]
    return None


def _find_nul(value: Any, where: str = "") -> str | None:
    """The dotted key of the first string holding a NUL, if any (iterative: no recursion)."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            return at or "(top level)"
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and "\x00" in key:
                    return f"{at}.{key!r}".lstrip(".")
                stack.append((child, f"{at}.{key}".lstrip(".")))
        elif isinstance(item, list):
            stack.extend((child, f"{at}[{i}]") for i, child in enumerate(item))
    return None


def missing_workdirs(config: TeamConfig) -> list[str]:
    """Problems with the team's and members' working directories (they must exist)."""
    problems = []
    if not Path(config.team.workdir).is_dir():
        problems.append(f"team.workdir: {config.team.workdir} is not a directory (create it, "
                        "or point workdir at an existing one)")
    for index, member in enumerate(config.members):
        if member.host is not None:
            continue  # its workdir is on its host: the remote side checks it
        if member.workdir and not config.resolved(member).workdir.is_dir():
            problems.append(f"members[{index}].workdir: {config.resolved(member).workdir} is not "
                            "a directory (create it, or fix the path)")
        elif config.resolved(member).worktree and not _in_git_repo(config.resolved(member).workdir):
            key = f"members[{index}].worktree" if member.worktree else "team.worktree"
            problems.append(f"{key}: {config.resolved(member).workdir} is not in a git "
                            "repository (set worktree = false, or run 'git init' there)")
    return problems


def _in_git_repo(path: Path) -> bool:
    """Whether git finds a repository from ``path`` (hardened, bounded: git_run.py)."""
    from orchestrator.git_run import discover

    try:
        return discover(path) is not None
    except TeamctlError:
        return False


def load_team_file(path: Path) -> TeamConfig:
    """Read, parse and validate a team file; raise TeamFileError naming every problem."""
    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TeamFileError(shown, [f"cannot read it: {exc}"]) from exc
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TeamFileError(shown, [f"not valid TOML: {exc}"]) from exc
    _absolutize_paths(raw, path.parent.resolve())
    try:
        config = TeamConfig.model_validate(raw)
    except ValidationError as exc:
        raise TeamFileError(shown, _describe(exc, text, shown)) from exc
    problems = missing_workdirs(config)
    if problems:
        raise TeamFileError(shown, [f"{shown}: {p}" for p in problems])
    return config


def _absolutize_paths(raw: dict[str, Any], base: Path) -> None:
    """``workdir`` and a ``command`` given as a relative path are relative to the team file."""
    team = raw.get("team")
    if isinstance(team, dict):
        workdir = team.get("workdir", ".")
        if isinstance(workdir, str):
            team["workdir"] = str((base / workdir).resolve())
    members = raw.get("members")
    for member in members if isinstance(members, list) else []:
        command = member.get("command") if isinstance(member, dict) else None
        if isinstance(command, str) and "/" in command and not command.startswith(("/", "~")):
            member["command"] = str((base / command).resolve())


def _describe(exc: ValidationError, text: str, shown: str) -> list[str]:
    problems = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        key = _dotted(loc)
        line = _locate(text, loc)
        where = f"{shown}:{line}" if line else shown
        fix = _FIXES.get(error["type"], "")
        if error["type"] == "string_pattern_mismatch":  # the name hint fits names only
            fix = _PATTERN_FIXES.get(str(loc[-1] if isinstance(loc[-1], str) else loc[-2]),
                                     fix)
            if loc[0] == "accounts":
                fix = _PATTERN_FIXES["accounts"]
        if loc and loc[0] in ("team", "members") and error["type"] != "extra_forbidden":
            fix = _KEY_FIXES.get(str(loc[-1]), fix)
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        problems.append(f"{where}: {key}: {message}" + (f" ({fix})" if fix else ""))
    return problems


def _dotted(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if item == "[key]":  # pydantic's mark of a table's key (the key itself comes before)
            continue
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "(top level)"


def _locate(text: str, loc: tuple[Any, ...]) -> int | None:
    """Best-effort line number of ``loc`` in the TOML text (tomllib keeps none)."""
    lines = text.splitlines()
    if not loc:
        return None
    start = 0
    section, rest = str(loc[0]), loc[1:]
    if section == "members":
        headers = [i for i, ln in enumerate(lines) if re.match(r"^\s*\[\[members\]\]", ln)]
        if rest and isinstance(rest[0], int) and rest[0] < len(headers):
            start, rest = headers[rest[0]], rest[1:]
        elif headers:
            return headers[0] + 1
    else:
        header = next((i for i, ln in enumerate(lines) if ln.strip() == f"[{section}]"), None)
        if header is None:
            return None
        start = header
    if not rest:
        return start + 1
    key = re.escape(str(rest[0]))
    for i in range(start + 1, len(lines)):
        if re.match(r"^\s*\[", lines[i]) and not re.match(rf"^\s*\[+members\.{key}", lines[i]):
            break
        if re.match(rf"^\s*\"?{key}\"?\s*=", lines[i]) or re.match(
            rf"^\s*\[members\.{key}\]", lines[i]
        ):
            return i + 1
    return start + 1
