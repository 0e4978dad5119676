"""A member sandboxed with bubblewrap (``sandbox = "process"``): a ``contracts.Host`` that wraps
the member's base host (this machine) and starts its runtime inside ``bwrap``.

What the runtime sees is ``runtimes.hosts.sandbox.plan``'s (its workdir and private runtime home
read-write, the system and its toolchain read-only, the rest of the operator's home, teamctl's
state and the other members hidden). Everything else is the base host's, except:

- ``spawn``: bubblewrap is probed once per executable (``bwrap --ro-bind / / true`` within a
  deadline); where it is missing or cannot make its namespaces the start is refused
  (``sandbox_unavailable``), never run unsandboxed;
- ``put_file``: an image's artifact (in teamctl's hidden state dir) is copied into the
  member's runtime home, where the runtime can read it;
- ``mcp_server``: teamctl's MCP server reaches the daemon through this member's own socket
  (``mcp_home``, in its runtime home), which accepts only ``member.*`` calls with this
  member's token; the daemon's control socket stays hidden;
- ``forward_port``: with ``network = "off" | "allowlist"`` (its own network namespace) the
  runtime's server keeps its port on the sandbox's loopback, and the daemon reaches it through
  ``inbound_socket``: a Unix socket in a fresh 0700 directory here, bound into the sandbox,
  where the network relay joins each connection to that port (``contracts.InboundHost``).

On an SSH host (a base that is a ``RemoteBase``: runtimes/hosts/ssh/host.py) bubblewrap runs
*there*: bubblewrap is probed there (the same test, ``runtimes/hosts/sandbox/probe.py``), the policy
travels in the start's header with its paths as the host has them (``policy_json``: the member's
workdir and runtime home there, the remote user's credential paths and teamctl's state there)
and ``sandbox_plan.host_argv`` builds the command line on the host; the member's own socket and
its egress proxy's are forwarded to the host through the ControlMaster (``ssh -R``) and bound
in at the same paths as here; an image is copied into its runtime home there.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio

from orchestrator.contracts import (
    Confined,
    HostProfile,
    MemberStartFailed,
    SandboxUnavailable,
    cgroup_host,
    cgroups_there,
    pausing,
    read_beneath,
    runtime_home,
    unlink_link_beneath,
    write_beneath,
)
from runtimes.hosts.sandbox.network import (
    RELAY_DIR,
    SERVE_SOCKET,
    on_host,
    proxy_socket,
    with_inbound,
)
from runtimes.hosts.sandbox.plan import (
    NETWORK_ON,
    SYSTEM_DIRS,
    NetworkPlan,
    SandboxPolicy,
    bwrap_argv,
    policy_json,
    toolchain,
)
from runtimes.hosts.sandbox.probe import SandboxSupport, probe

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from anyio.abc import Process

    from orchestrator.contracts import (
        Ceiling,
        CgroupClosed,
        CgroupsThere,
        Host,
        ImagePart,
        McpServer,
        Placed,
    )
    from runtimes.hosts import HostRequest

__all__ = ["REMOTE_STATE", "RemoteBase", "SandboxHost", "SandboxSupport",
           "describe", "login_paths", "member_policy", "probe", "probe_once", "wrap"]

INSIDE_MCP_HOME = "/run/teamctl/mcp"  # where a sandboxed member's teamctl mcp finds its socket
SOCKET_NAME = "teamctl.sock"  # (orchestrator.paths.Home.socket's name)

# what teamctl keeps in a host's home (every member's mirrored private dir, the images):
# concealed from a member sandboxed there, as the state dir is here
REMOTE_STATE = (Path("~/.teamctl-remote"), Path("~/.cache/teamctl"))
PLAN_SOURCE = Path(__file__).with_name("plan.py").read_text(encoding="utf-8")
EGRESS_SOCKET = "egress.sock"
ATTACHMENTS = "attachments"  # in the member's private dir: the images its runtime reads

_PROBED: dict[str, SandboxSupport] = {}
_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux; kept clear of it


@runtime_checkable
class RemoteBase(Protocol):
    """A base host on another machine whose remote side runs bubblewrap there (``SshHost``)."""

    async def probe_sandbox(self, bwrap: str) -> SandboxSupport:
        """``sandbox_probe.probe`` run there (connecting first)."""
        ...

    def sandbox_next(self, spec: Mapping[str, Any]) -> None:
        """The next ``spawn`` runs its command inside bubblewrap there, per ``spec``
        (``sandbox_plan.host_argv``'s)."""
        ...

    def forward_socket(self, local_socket: str, local_path: str, *, role: str = "mcp") -> None:
        """While the next start runs, ``local_path`` (as the host has it) is ``local_socket``
        here, forwarded; one per ``role``."""
        ...

    async def put_file(self, image: ImagePart, *, into: str | None = None) -> Path | None:
        """The image's content-addressed copy there, and one in ``into`` (a dir of this
        machine's naming, as the host has it)."""
        ...


@dataclass
class _Inbound:
    """The way in to the runtime's server: its port (set by ``forward_port``) and the socket's
    directory here (made once, kept across the member's restarts, removed at ``close``)."""

    port: int | None = None
    directory: Path | None = None


def trusted_socket(path: Path, member: str) -> Path:
    """``path`` if it is a socket of the daemon's uid in a 0700 directory of the daemon's
    (neither a link), checked right before it is bound into the member's sandbox;
    MemberStartFailed otherwise (nothing is bound, the member does not start)."""
    try:
        found, directory = os.lstat(path), os.lstat(path.parent)
    except OSError as exc:
        raise MemberStartFailed(member, f"its socket {path} is not there ({exc.strerror}): "
                                "restart it (teamctl restart)") from None
    uid = os.geteuid()
    if not (stat.S_ISSOCK(found.st_mode) and found.st_uid == uid
            and stat.S_ISDIR(directory.st_mode) and directory.st_uid == uid
            and directory.st_mode & 0o077 == 0):
        raise MemberStartFailed(member, f"its socket {path} is not the daemon's (not a socket "
                                "of this user in a private directory): nothing was bound; "
                                "restart it (teamctl restart)")
    return path


def serve_dir() -> Path:
    """A fresh private directory (0700, random name) for an inbound socket, its path short
    enough for a socket's (under /tmp where ``TMPDIR`` is long); hidden from every sandbox
    (each has its own /tmp)."""
    path = Path(tempfile.mkdtemp(prefix="tc-serve-"))
    if len(os.fsencode(path / SERVE_SOCKET)) > _SOCKET_PATH_MAX:
        path.rmdir()
        path = Path(tempfile.mkdtemp(prefix="tc-serve-", dir="/tmp"))
    return path


async def probe_once(bwrap: str) -> SandboxSupport:
    """``probe``'s answer for ``bwrap``, asked once per daemon."""
    found = _PROBED.get(bwrap)
    if found is None:
        found = _PROBED[bwrap] = await anyio.to_thread.run_sync(lambda: probe(bwrap))
    return found


def mcp_toolchain() -> tuple[Path, ...]:
    """What ``teamctl mcp`` and the network relay (this python, its environment, the base
    interpreter a venv's python links into, teamctl's own package, the relay's directory and
    the PYTHONPATH it is given) need inside, read-only."""
    paths = [Path(sys.prefix), Path(sys.executable), Path(sys.base_prefix),
             Path(os.path.realpath(sys.executable)), RELAY_DIR]
    spec = importlib.util.find_spec("orchestrator")
    if spec is not None and spec.origin:
        paths.append(Path(spec.origin).parent)
    paths += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
              if os.path.isabs(p)]
    return tuple(paths)


def login_paths(runtime: str, login: str) -> tuple[tuple[Path, bool], ...]:
    """What a CLI's own login needs inside (path, writable): with ``login = "operator"`` the
    dirs a token refresh rewrites (protocols/logins.md: Claude's config dir, Codex's home,
    OpenCode's data dir; OpenCode's config dir read-only); nothing for ``isolated``."""
    if login != "operator":
        return ()
    from runtimes.kit import logins

    return {"claude": ((logins.claude_config_dir(), True),),
            "codex": ((logins.codex_home(), True),),
            "opencode": ((logins.opencode_data_dir(), True),
                         (logins.opencode_config_dir(), False))}.get(runtime, ())


def member_policy(*, workdir: Path, private: Path, state_root: Path,
                  others: Sequence[Path], paths: Mapping[str, Sequence[str]], runtime: str,
                  login: str, permissions: str, home: Path | None = None) -> SandboxPolicy:
    """A member's view (``SandboxPolicy``): its workdir (read-only with ``permissions =
    "read"``: the kernel keeps it so, whatever the CLI's own sandbox can do inside ours), its
    ``private`` dir (the daemon's) read-only and the runtime home in it read-write, teamctl's
    ``state_root`` and the ``others``' workdirs concealed, the team file's ``paths`` (``rw``,
    ``ro``, ``hide``), what its ``runtime``'s ``login`` needs. ``home``: the operator's here,
    unless given (``~``: a host's)."""
    return SandboxPolicy(workdir_writable=permissions != "read",
        workdir=workdir, runtime_home=runtime_home(private), private=private,
        home=home or Path(os.environ.get("HOME") or Path.home()),
        rw=tuple(map(Path, paths["rw"])), ro=tuple(map(Path, paths["ro"])),
        hide=tuple(map(Path, paths["hide"])), conceal=(state_root, *others),
        login=login_paths(runtime, login))


def describe(policy: SandboxPolicy, executable: str, path_env: str) -> dict[str, list[str]]:
    """What a member will see (``teamctl doctor``): read-write, read-only, hidden."""
    tools = toolchain(executable, path_env, extra=mcp_toolchain(), policy=policy)
    workdir = [str(policy.workdir)]
    return {"rw": [*workdir[:policy.workdir_writable],
                   *(str(p) for p in (policy.runtime_home, *policy.rw,
                                      *(p for p, w in policy.login if w)))],
            "ro": [*workdir[policy.workdir_writable:],
                   *([f"{policy.private} (the daemon's files for it)"] if policy.private else []),
                   *SYSTEM_DIRS, *map(str, tools),
                   *map(str, policy.ro),
                   *(str(p) for p, w in policy.login if not w)],
            "hidden": [str(policy.home) + " (all but the above)",
                       *(str(p) for p in policy.conceal if p not in policy.own()),
                       *map(str, policy.hidden())]}


@dataclass(frozen=True)
class SandboxHost:
    """``base`` (this machine) with every runtime started inside bubblewrap per ``policy``;
    implements ``contracts.Host``. ``network``: the egress seam (``NetworkPlan``)."""

    base: Host
    member: str
    policy: SandboxPolicy
    mcp_home: Path  # here: the dir of the member's own socket (bound in at INSIDE_MCP_HOME)
    bwrap: str = "bwrap"
    network: NetworkPlan = NETWORK_ON
    extra_toolchain: tuple[Path, ...] = field(default_factory=mcp_toolchain)
    # what the network plan keeps open (the member's egress proxy), let go of at ``close``
    on_close: Callable[[], Awaitable[None]] | None = None
    _inbound: _Inbound = field(default_factory=_Inbound, init=False, repr=False)
    # on a host: this launch's forwarded dir of the member's own socket (this machine's name)
    _mcp_there: list[Path] = field(default_factory=list, init=False, repr=False)
    # what the runtime finds in its home (``place``), made or bound by bubblewrap at the start
    _placed: dict[Path, Placed] = field(default_factory=dict, init=False, repr=False)

    @property
    def name(self) -> str | None:
        return self.base.name

    @property
    def profile(self) -> HostProfile:
        """The base's, its processes confined and its port reached through a socket here."""
        return replace(self.base.profile, confines_processes=True, inbound_socket=True)

    def find_executable(self, member: str, command: str | None, *, env_var: str,
                        default: str) -> str:
        return self.base.find_executable(member, command, env_var=env_var, default=default)

    def local_path(self, path: str) -> str | None:
        return self.base.local_path(path)

    def remote_path(self, path: str) -> str:
        return self.base.remote_path(path)

    def argv(self, argv: Sequence[str], env: Mapping[str, str], *,
             mcp: bool = True, workdir: Path | None = None) -> list[str]:
        """The bubblewrap command line that runs ``argv`` inside (its toolchain from its
        executable and ``env``'s PATH); ``mcp``: the member's own socket bound in (a
        one-shot command teamctl runs for the member does not get it)."""
        path_env = env.get("PATH", os.defpath)
        executable = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=path_env)
        tools = toolchain(executable or argv[0], path_env, extra=self.extra_toolchain,
                          policy=self.policy)
        network = self.network
        if mcp:
            # the member's own socket's directory at a short fixed path inside, whatever the
            # length of its path here (a Unix socket's path is at most 108 bytes, connect()'s
            # too), read-only (a socket is connected to on a read-only mount) — its
            # directory, so a socket bound again there is the one the member reaches;
            # checked right before: the daemon's socket, in the daemon's 0700 directory
            socket = trusted_socket(self.mcp_home / SOCKET_NAME, self.member)
            bind = ("--ro-bind", str(socket.parent), INSIDE_MCP_HOME)
            network = replace(network, bwrap_args=(*bind, *network.bwrap_args))
            if self._inbound.port is not None and self._inbound.directory is not None:
                network = with_inbound(network, self._inbound.directory, self._inbound.port)
        policy = replace(self.policy, toolchain=tools)
        if workdir is not None:
            policy = replace(policy, workdir=workdir, workdir_writable=True)
        return bwrap_argv(self.bwrap, self._with_placed(policy), argv, network=network)

    def place(self, files: Sequence[Placed]) -> None:
        """Nothing is written into the member's home by the daemon: at the next start
        bubblewrap makes each directory and link inside and binds each daemon file
        read-only at its place (a name the member changed there changes its own view only).
        Links to nothing are dropped (``unlink``: nothing of the operator's is bound for an
        isolated login)."""
        for placed in files:
            if placed.unlink:
                self._placed.pop(placed.path, None)
            else:
                self._placed[placed.path] = placed

    def _with_placed(self, policy: SandboxPolicy) -> SandboxPolicy:
        placed = list(self._placed.values())
        return replace(
            policy,
            placed_dirs=tuple(p.path for p in placed if p.source is None and p.link is None),
            placed_files=tuple((p.path, p.source) for p in placed if p.source is not None),
            placed_links=tuple((p.path, p.link) for p in placed if p.link is not None))

    async def confine(self, argv: Sequence[str], *, env: Mapping[str, str],
                      workdir: Path | None = None) -> Confined | None:
        """The member's own bubblewrap command line for ``argv`` (its mounts, its network
        rule through its egress proxy; not its MCP socket) — in ``workdir`` instead of its
        own when given, bound read-write as its own is; on an SSH host, None (not here)."""
        if isinstance(self.base, RemoteBase):
            return None
        support = await probe_once(self.bwrap)
        if not support.ok:
            raise SandboxUnavailable(self.member, support.reason or "unknown")
        wrapped = self.argv(argv, env, mcp=False, workdir=workdir)
        wrapped[0] = support.path or wrapped[0]
        return Confined(tuple(wrapped), {**env, **self.network.env})

    async def spawn(self, argv: Sequence[str], *, cwd: Path,
                    env: Mapping[str, str]) -> Process:
        if isinstance(self.base, RemoteBase):
            return await self._spawn_there(self.base, argv, cwd=cwd, env=env)
        support = await probe_once(self.bwrap)
        if not support.ok:
            raise SandboxUnavailable(self.member, support.reason or "unknown")
        wrapped = self.argv(argv, env)
        wrapped[0] = support.path or wrapped[0]
        await anyio.to_thread.run_sync(self._clear_links)
        return await self.base.spawn(wrapped, cwd=cwd, env={**env, **self.network.env})

    def _clear_links(self) -> None:
        """Bubblewrap makes each placed link afresh and refuses a name that exists: the
        last start's link is removed first — a link only, never followed (a file the member
        put there stays, and the start fails on it: its own doing, bwrap names it)."""
        for placed in self._placed.values():
            if placed.link is not None:
                with contextlib.suppress(OSError):
                    unlink_link_beneath(placed.home, placed.at)

    async def _spawn_there(self, base: RemoteBase, argv: Sequence[str], *, cwd: Path,
                           env: Mapping[str, str]) -> Process:
        """On the host: bubblewrap probed there (every start: a host may have changed), the
        policy and the network plan sent in the host's paths, the sockets forwarded."""
        support = await base.probe_sandbox(self.bwrap)
        if not support.ok:
            raise SandboxUnavailable(self.member, f"on host {self.name}: "
                                                  f"{support.reason or 'unknown'}")
        place = self.base.remote_path
        mcp = [arg for path in self._mcp_there[-1:]
               for arg in ("--bind", place(str(path)), INSIDE_MCP_HOME)]
        network = self.network
        socket = proxy_socket(network)
        if socket is not None:  # a new path each launch: sshd does not bind over an old one
            forwarded = self.policy.runtime_home / f"egress-{secrets.token_hex(4)}"
            base.forward_socket(socket, str(forwarded / EGRESS_SOCKET), role="egress")
            network = on_host(network, place(str(forwarded / EGRESS_SOCKET)), "python3")
        base.sandbox_next({"bwrap": self.bwrap, "plan": PLAN_SOURCE,
                           "policy": policy_json(self._with_placed(self.policy), place),
                           "mode": network.mode,
                           "bwrap_args": [*mcp, *network.bwrap_args],
                           "relay": list(network.relay)})
        return await self.base.spawn(argv, cwd=cwd, env={**env, **network.env})

    async def put_file(self, image: ImagePart) -> Path | None:
        """A copy of the artifact in the member's private dir (the artifacts are hidden;
        the private dir is bound read-only: the member reads it, never writes or redirects
        it), made there on a host."""
        attachments = self._private() / ATTACHMENTS
        if isinstance(self.base, RemoteBase):
            return await self.base.put_file(image, into=str(attachments))
        source = await self.base.put_file(image)
        if source is None:
            return None
        name = f"{image.sha256}{Path(source).suffix}"

        def copy() -> None:
            try:
                if read_beneath(attachments, name, limit_bytes=len(image.data)) == image.data:
                    return
            except OSError:
                pass
            write_beneath(attachments.parent, f"{ATTACHMENTS}/{name}", image.data)

        await anyio.to_thread.run_sync(copy)
        return attachments / name

    def _private(self) -> Path:
        return self.policy.private or self.policy.runtime_home

    async def exists(self, pattern: str) -> bool:
        return await self.base.exists(pattern)

    async def version(self, executable: str, *, env: Mapping[str, str] | None = None,
                      cwd: Path | None = None, timeout: float = 60.0) -> dict[str, Any]:
        return await self.base.version(executable, env=env, cwd=cwd, timeout=timeout)

    async def forward_port(self, port: int) -> int:
        """The base host's, with the host's network; in the sandbox's own network namespace
        the same port there, reached through ``inbound_socket`` (a previous launch's socket,
        left by a sandbox killed at its stop, removed first). On a host only the former
        (the team file refuses the latter)."""
        if self.network.mode == NETWORK_ON.mode:
            return await self.base.forward_port(port)
        if isinstance(self.base, RemoteBase):
            raise SandboxUnavailable(self.member, f"on host {self.name}, its server cannot be "
                                     f"reached with network = \"{self.network.mode}\"; set "
                                     "network = \"on\" for it")
        self._inbound.port = port
        if self._inbound.directory is None:
            self._inbound.directory = await anyio.to_thread.run_sync(serve_dir)
        (self._inbound.directory / SERVE_SOCKET).unlink(missing_ok=True)
        return port

    def inbound_socket(self, port: int) -> Path | None:
        if self._inbound.port != port or self._inbound.directory is None:
            return None
        return self._inbound.directory / SERVE_SOCKET

    def mcp_server(self, token: str, *, home: Path, socket: Path,
                   state_dir: Path) -> McpServer:
        """The base host's ``teamctl mcp``, pointed at this member's own socket (as the
        member sees it: bound in at ``INSIDE_MCP_HOME``). On a host that socket, not the
        daemon's, is what is forwarded there; its directory there is bound in."""
        inside = Path(INSIDE_MCP_HOME)
        if isinstance(self.base, RemoteBase):
            server = self.base.mcp_server(token, home=self.mcp_home,
                                          socket=self.mcp_home / SOCKET_NAME,
                                          state_dir=state_dir)
            self._mcp_there[:] = [Path(server.env["TEAMCTL_MCP_HOME"])]
            return replace(server, env={**server.env, "TEAMCTL_MCP_HOME": str(inside)})
        return self.base.mcp_server(token, home=inside, socket=inside / SOCKET_NAME,
                                    state_dir=state_dir)

    async def forwarder(self) -> int | None:
        return await self.base.forwarder()

    async def answers(self, deadline: float) -> bool:
        return await self.base.answers(deadline)

    def enter_cgroups(self, procs: Sequence[Path]) -> None:
        """Bubblewrap itself starts inside them (the base's spawn): all it runs is inside."""
        base = cgroup_host(self.base)
        if base is not None:
            base.enter_cgroups(procs)

    # on an SSH host the base makes the member's cgroup there, and bubblewrap starts inside it

    async def cgroup_problem(self, controllers: frozenset[str], top: str) -> str | None:
        return await self._there().cgroup_problem(controllers, top)

    async def make_cgroup(self, top: str, name: str, ceiling: Ceiling) -> str:
        return await self._there().make_cgroup(top, name, ceiling)

    async def close_cgroup(self, deadline: float) -> CgroupClosed | None:
        return await self._there().close_cgroup(deadline)

    def _there(self) -> CgroupsThere:
        base = cgroups_there(self.base)
        assert base is not None, "asked only where the profile (the base's) says so"
        return base

    async def suspend(self) -> None:
        base = pausing(self.base)
        if base is not None:
            await base.suspend()

    async def close(self) -> None:
        if self.on_close is not None:
            await self.on_close()
        if self._inbound.directory is not None:
            shutil.rmtree(self._inbound.directory, ignore_errors=True)
        await self.base.close()


def wrap(base: Host, request: HostRequest) -> Host:
    """``base`` inside bubblewrap (``runtimes.hosts.WRAPPERS["sandbox"]``), per the member's
    ``request.sandbox``: on another machine (an SSH host) the policy names the host's paths —
    ``~`` its home, teamctl's state there concealed — and bubblewrap runs there."""
    box = request.sandbox
    if box is None or request.mcp_socket is None:
        return base
    there = base.name is not None
    policy = member_policy(
        workdir=box.workdir, private=request.state_dir,
        state_root=REMOTE_STATE[0] if there else request.home_root,
        others=[*REMOTE_STATE[1:], *box.others] if there else box.others, paths=box.paths,
        runtime=box.runtime, login=box.login, home=Path("~") if there else None,
        permissions=box.permissions)
    network, on_close = (NETWORK_ON, None) if box.network is None else box.network()
    return SandboxHost(base, request.member, box.refine(policy), request.mcp_socket().parent,
                       bwrap=box.bwrap, network=network, on_close=on_close)
