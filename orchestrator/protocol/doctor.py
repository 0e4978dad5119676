"""Documents the CLI builds itself, never on the socket: ``teamctl doctor`` (runtimes, logins,
sandboxes, an SSH host's report) and ``teamctl logs --json``'s events.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.protocol.common import Doc
from orchestrator.protocol.failures import ErrorDoc

__all__ = [
    "CodexSandboxView", "DoctorReport", "HostCheck", "HostReport", "HostRuntime", "LogEvent",
    "MemberLogin", "RuntimeRow", "SandboxSupport", "SandboxView", "VisionCatalogInfo",
]


class LogEvent(BaseModel):
    """One line of ``teamctl logs --json``: these keys always, then the event's own fields
    (ids, counts, codes, sizes — redacted)."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    ts: str
    level: str
    event: str


class RuntimeRow(Doc):
    """A runtime's executable here: with a team file, one row for each its members on this
    machine run; without, one for each runtime and ACP agent teamctl knows."""

    runtime: str
    acp_agent: str | None = Field(default=None, description="the ACP agent's preset")
    command: str | None = Field(default=None, description="the executable looked for")
    env_var: str
    path: str | None = Field(description="where it was found (null: not found)")
    version: str | None


class VisionCatalogInfo(Doc):
    checked: str
    entries: int


class SandboxView(Doc):
    """What a sandboxed member will see (``sandbox = "process"``)."""

    rw: list[str]
    ro: list[str]
    hidden: list[str]
    network: str
    host: str | None = Field(default=None, description="the SSH host it runs on: the paths "
                             "are that host's, resolved there at each start (null: here)")
    started: str | None = Field(default=None, description="what its command's --version "
                                "printed inside this sandbox (null: not tried, on a host, or "
                                "it failed there: see problem and fix)")


class SandboxSupport(Doc):
    """Whether ``sandbox = "process"`` can be had here (a real run of bubblewrap)."""

    ok: bool
    path: str | None
    version: str | None
    reason: str | None
    fix: str | None = Field(default=None, description="what to do where it cannot be had "
                            "(apt-get install bubblewrap where it is missing)")


class CgroupController(Doc):
    controller: str = Field(description="memory, cpu or pids")
    version: int | None = Field(description="the cgroup version a member's cgroup is made in "
                                "for it (1 or 2); null: none here")
    base: str | None = Field(description="where teamctl's group goes (teamctl-<home id>)")


class CgroupSupport(Doc):
    """Whether members' ceilings (memory_max, memory_high, cpu_weight, pids_max) can be held
    here: per controller, and a cgroup really made and removed."""

    ok: bool
    controllers: list[CgroupController]
    made: bool = Field(default=False, description="a cgroup with every controller found was "
                       "made and removed")
    reason: str | None
    fix: str | None = Field(default=None, description="what to enable where a controller is "
                            "missing")


class CodexSandboxView(Doc):
    """A Codex member's own sandbox on this machine (runtimes/codex/helper.py)."""

    sandbox: str = Field(description="its codex sandbox: read-only, workspace-write, "
                         "danger-full-access (none)")
    bwrap: str | None = Field(description="the bubblewrap on its PATH codex will run (null: "
                              "codex's own bundled one)")
    tmpdir: str = Field(description="its temp dir: its own, unless its env names one")
    helper: str = Field(description="whether codex can run its sandbox helper there")


class MemberLogin(Doc):
    member: str
    runtime: str
    login: str
    permissions: str
    credential: str = Field(description="its kind (API key, subscription login, …) or none")
    source: str = Field(description="where it comes from; never the secret")
    command: str = Field(description="what it runs: its command, else the runtime's variable, "
                         "else the default name")
    path: str | None = Field(description="that command found on PATH (None: not found, or the "
                             "member runs on another host)")
    version: str | None = None
    problem: str | None = Field(default=None, description="why it cannot start (doctor exits 1)")
    fix: str | None = None
    sandbox: SandboxView | None = Field(default=None, description="a sandboxed member: what "
                                        "it will see")
    ceiling: str | None = Field(default=None, description="its ceiling (\"memory_max 2 GiB\"); "
                                "null: none")
    codex_sandbox: CodexSandboxView | None = Field(default=None, description="a Codex member "
                                                   "on this machine: its own sandbox")


class DoctorReport(Doc):
    """``teamctl doctor [TEAMFILE] --json``."""

    runtimes: list[RuntimeRow]
    vision_catalog: VisionCatalogInfo
    home: str
    daemon_running: bool
    members: list[MemberLogin] = []
    sandbox: SandboxSupport | None = None
    cgroups: CgroupSupport | None = None


class HostRuntime(Doc):
    runtime: str
    command: str = Field(description="what the host is asked for (a member's command, else "
                         "the default name)")
    found: bool
    path: str | None = None
    version: str | None = None


class HostCheck(Doc):
    check: str = Field(description="a verb on a resource (RBAC), or 'secret NAME'")
    ok: bool
    detail: str


class HostReport(Doc):
    """``teamctl doctor [TEAMFILE] --host NAME --json``: a member host, checked over SSH — or,
    ``kind`` kubernetes, its API server (``destination``), ``mode`` and ``checks``."""

    host: str
    kind: Literal["ssh", "kubernetes"] = "ssh"
    destination: str
    port: int | None = None
    reachable: bool
    error: ErrorDoc | None = None
    home: str | None = None
    python: str | None = None
    seconds: float | None = Field(default=None, description="the probe's round trip")
    runtimes: list[HostRuntime] = []
    namespace: str | None = None
    mode: Literal["sandbox", "pod"] | None = Field(
        default=None, description="kubernetes: an agent-sandbox Sandbox per member, or a Pod "
        "and its PVC where the cluster does not serve the CRD")
    checks: list[HostCheck] = Field(default=[], description="kubernetes: each verb teamctl "
                                    "needs as RBAC answers it, and the Secret named; ssh: "
                                    "each member's ceiling there (with TEAMFILE)")
    cgroups: CgroupSupport | None = Field(default=None, description="ssh: whether members' "
                                          "ceilings can be held there (a cgroup made there "
                                          "and removed, with the ssh user's rights)")
