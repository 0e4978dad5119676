"""Members on other machines, over the system OpenSSH client (docs/scaling.md).

One ``SshHost`` per (team, host). Every ssh runs with ``BatchMode=yes`` (never a prompt), a
bounded TCP connect, keepalives (a dead peer is noticed in ~15 s), and one ControlMaster per host
so a member's start, an image copy or a resume check costs a round trip, not a handshake. A stale
master makes ``ssh`` hang forever (ConnectTimeout bounds only the TCP dial), so the master is
probed with ``ssh -O check`` under a short deadline before each use and, if it does not answer,
its socket is removed and a fresh one made.

Nothing is installed on the host: ``runtimes/hosts/remote_side.py`` is sent as ``python3 -c``. A
member's start runs it in ``run`` mode: the member's private dir (the settings, prompt and
config files the adapter wrote here, and its symlinks) is mirrored to
``~/.teamctl-remote/<home id>/<team>/<member>`` there, paths under the private dir and the
operator's home are rewritten to their place on the host (in argv, env and those files), the env
travels on the encrypted channel's stdin (never argv), and the runtime dies with its channel.
The local process is the ssh client: killing it, or losing the network, stops the remote
runtime; the restart policy reconnects.

A sandboxed member (``sandbox = "process"``, runtimes/hosts/sandbox/host.py) runs inside bubblewrap
*there*: ``probe_sandbox`` runs ``runtimes/hosts/sandbox/probe.py`` on the host, and
``sandbox_next`` puts the policy (the host's paths) in the start's header, where the remote side
builds the command line (``sandbox_plan.host_argv``); its own socket and its egress proxy's are
forwarded through the master like the daemon's.

A member with a ceiling (``memory_max``, ``memory_high``, ``cpu_weight``, ``pids_max``) runs
in a cgroup of its own *there* (``contracts.CgroupsThere``): the daemon's governor asks for it
before each start (``make_cgroup``: orchestrator/cgroups.py shipped to the remote side's
``cgroup`` mode and run there with the ssh user's rights, as on this machine — v2 beside the
session's own cgroup, v1 under it), the start's header carries the trampoline that enters it
before the runtime's program runs, and once the process has ended ``close_cgroup`` reads its
OOM kills and peak, kills what it left and removes it. Where the host cannot hold it, the
refusal names the host and what to enable there.

Failures are typed (``HostUnavailable``): host_unreachable and host_connect_hung (retryable),
host_key_mismatch, host_auth_failed, host_runtime_missing — each with its fix.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from orchestrator.contracts import (
    CGROUPS_MODULE,
    CgroupClosed,
    HostProfile,
    HostUnavailable,
    McpServer,
    ResourceLimitsUnavailable,
)
from runtimes.hosts.local.host import entering, place_here
from runtimes.hosts.remote_mcp import shipped_mcp_server
from runtimes.hosts.sandbox.probe import SandboxSupport
from runtimes.kit.base import BASE_ENV_NAMES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from anyio.abc import Process

    from orchestrator.contracts import Ceiling, Confined, ImagePart, Placed
    from runtimes.hosts import HostRequest

__all__ = [
    "ControlDirUntrusted",
    "SshHost",
    "SshTarget",
    "build",
    "classify",
    "control_dir",
    "trusted_dir",
    "trusted_socket",
]

log = structlog.get_logger("teamctl.ssh")

_SIDE = (Path(__file__).parents[1] / "remote_side.py").read_text(encoding="utf-8")
_PROBE = (Path(__file__).parents[1] / "sandbox" / "probe.py").read_text(encoding="utf-8")
_CGROUPS = CGROUPS_MODULE.read_text(encoding="utf-8")
CONNECT_TIMEOUT = 10
PROBE_TIMEOUT = 20.0
MASTER_CHECK_TIMEOUT = 3.0
CONTROL_PERSIST = 120
_MIRROR_MAX_BYTES = 1 << 20
# the host's own (the runtime's temp dir, the pid record), or here only (the describer's
# dir, the member's socket dir)
_MIRROR_SKIP = {("runtime", "tmp"), ("runtime.pid",), ("describer",), ("mcp",)}
# the CLI there finds its own login; its memory is the host's, and so is a ceiling's cgroup
_PROFILE = HostProfile(checks_local_login=False, local_memory=False, cgroups_there=True)

@dataclass(frozen=True)
class SshTarget:
    """Where and how to reach a host (a ``[hosts.NAME]`` table, or a bare destination)."""

    name: str
    address: str
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    options: tuple[str, ...] = ()

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.address}" if self.user else self.address


@dataclass
class _Remote:
    home: str
    python: str


@dataclass
class SshHost:
    """A member's host over SSH: implements ``contracts.Host`` for one team member. The CLI
    there finds its own login and settings (its profile's ``checks_local_login`` is False)."""

    target: SshTarget
    control_dir: Path
    home_id: str
    team: str
    member: str
    state_dir: Path  # the member's local private dir, mirrored there
    ssh: str = "ssh"
    _remote: _Remote | None = field(default=None, repr=False)
    # role -> (the socket here, the path it has there, this machine's naming): "mcp", "egress"
    _forwards: dict[str, tuple[str, str]] = field(default_factory=dict, repr=False)
    _sandbox: Mapping[str, Any] | None = field(default=None, repr=False)  # the next start's
    _port: tuple[int, int] | None = field(default=None, repr=False)  # this launch's
    _forwarded: tuple[int, int] | None = field(default=None, repr=False)  # in the master now
    master_pid: int | None = field(default=None, repr=False)  # our ControlMaster's, as checked
    # the member's cgroup there (``make_cgroup``): as the remote side gave it, its top, its name
    _cgroup: tuple[dict[str, Any], str, str] | None = field(default=None, repr=False)
    _enter: list[str] = field(default_factory=list, repr=False)  # the trampoline into it

    @property
    def profile(self) -> HostProfile:
        return _PROFILE

    @property
    def name(self) -> str:
        return self.target.name

    # -- the ssh command line -----------------------------------------------------------------

    def base_argv(self, *, master: bool = True) -> list[str]:
        argv = [self.ssh, "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                "-o", "LogLevel=ERROR"]
        if master:
            argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={self.control_path}",
                     "-o", f"ControlPersist={CONTROL_PERSIST}"]
        else:
            argv += ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
        if self.target.port:
            argv += ["-p", str(self.target.port)]
        if self.target.identity_file:
            argv += ["-i", os.path.expanduser(self.target.identity_file),
                     "-o", "IdentitiesOnly=yes"]
        for option in self.target.options:
            argv += ["-o", option]
        return [*argv, "--", self.target.destination]

    @property
    def control_path(self) -> str:
        # a Unix socket path is limited to ~108 bytes: a short private dir, a hashed name
        key = hashlib.sha256(json.dumps([self.target.destination, self.target.port,
                                         self.target.identity_file, self.target.options]
                                        ).encode()).hexdigest()[:16]
        return str(self.control_dir / key)

    def _side(self, *args: str, source: str = _SIDE) -> list[str]:
        """The remote command: remote_side.py in a mode (one shell word per argument), or
        another standard-library ``source``."""
        return [*self.base_argv(), "python3", "-c", shlex.quote(source),
                *(shlex.quote(a) for a in args)]

    # -- connecting ---------------------------------------------------------------------------

    async def connect(self, *, fresh: bool = False) -> _Remote:
        """Probe the host (and the ControlMaster) within deadlines; its home and python —
        the probe once, or again with ``fresh`` (each start: a host may have come back
        different); the master before every use (a wedged one would hang the call)."""
        await self._check_master()
        if self._remote is not None and not fresh:
            return self._remote
        out = await self._run_side("probe")
        try:
            info = json.loads(out.strip().splitlines()[-1])
            self._remote = _Remote(str(info["home"]), str(info["python"]))
        except (ValueError, KeyError, IndexError):
            raise HostUnavailable(self.member, self.name, "host_runtime_missing",
                                  "its python3 answered something unexpected: "
                                  f"{out[:200]!r}", retryable=False) from None
        return self._remote

    async def _check_master(self) -> None:
        """A master that does not answer ``-O check`` within seconds is stale: remove it.
        Only a master in this operator's private dir is ever used (``_trusted``)."""
        if not self._trusted():
            self.master_pid = None
            return
        done = await self._control("check")
        if done is None or done.returncode != 0:
            log.warning("ssh_master_stale", host=self.name, member=self.member,
                        hung=done is None)
            self.master_pid = None
            with contextlib.suppress(OSError):
                os.unlink(self.control_path)
            return
        found = re.search(rb"pid=(\d+)", done.stderr)
        self.master_pid = int(found.group(1)) if found else None

    def _trusted(self) -> bool:
        """Whether a master's socket is there — a socket of this uid in its private 0700
        dir; anything else there (another owner, a symlink, a file) is refused: secrets
        (the member's env on the stdin header) never go through a master teamctl did not
        start (``host_control_untrusted``)."""
        try:
            return trusted_socket(Path(self.control_path))
        except (ControlDirUntrusted, OSError) as exc:
            log.error("ssh_control_untrusted", host=self.name, member=self.member,
                      path=self.control_path, reason=str(exc))
            raise HostUnavailable(
                self.member, self.name, "host_control_untrusted",
                f"its ssh ControlMaster socket is not this user's own ({exc}); remove "
                f"{self.control_dir} and start the member again", retryable=False) from None

    async def answers(self, deadline: float) -> bool:
        """The liveness probe's second half for a member here: the master its channel runs
        through answers ``ssh -O check`` within ``deadline`` (a frozen master stalls every
        channel while the member's own process looks fine). True when none is kept."""
        try:
            if not self._trusted():
                return True
        except HostUnavailable:  # not ours any more: the restart refuses it, typed
            return False
        with anyio.move_on_after(deadline):
            done = await self._control("check")
            return done is not None and done.returncode == 0
        return False

    async def close(self) -> None:
        """Stop the host's ControlMaster (``teamctl stop``): nothing of ours stays there."""
        with contextlib.suppress(HostUnavailable):
            if self._trusted():
                await self._control("exit")

    async def _control(self, command: str, *extra: str
                       ) -> subprocess.CompletedProcess[bytes] | None:
        """``ssh -O COMMAND`` to the host's master, bounded: how it ended, None if it hung
        (a wedged master answers nothing)."""
        with anyio.move_on_after(MASTER_CHECK_TIMEOUT):
            return await anyio.run_process(
                [self.ssh, "-o", f"ControlPath={self.control_path}", "-O", command, *extra,
                 "--", self.target.destination], check=False, stdin=subprocess.DEVNULL)
        return None

    def _hung(self, what: str) -> HostUnavailable:
        return HostUnavailable(self.member, self.name, "host_connect_hung",
                               f"{what}; check the network to {self.target.address}, or "
                               "the host's load", retryable=True)

    # -- contracts.Host -----------------------------------------------------------------------

    def find_executable(self, member: str, command: str | None, *, env_var: str,
                        default: str) -> str:
        """Named as it is there: found on the host's PATH at the start (``host_runtime_missing``
        if not), never here (``env_var`` names a file of this machine)."""
        return command or default

    def local_path(self, path: str) -> str | None:
        return None  # the member's files are the host's

    @property
    def remote_root(self) -> str:
        assert self._remote is not None
        return f"{self._remote.home}/.teamctl-remote/{self.home_id}/{self.team}/{self.member}"

    def remote_path(self, path: str) -> str:
        return self.rewrite(path)

    def rewrite(self, value: str) -> str:
        """A local path under the member's private dir or the operator's home, as it is on
        the host; ``~`` alone (a remote default workdir) as the remote home."""
        assert self._remote is not None
        local_state, local_home = str(self.state_dir), os.path.expanduser("~")
        if value == "~" or value.startswith("~/"):
            return self._remote.home + value[1:]
        if value == local_state or value.startswith(local_state + "/"):
            return self.remote_root + value[len(local_state):]
        return value.replace(local_state, self.remote_root).replace(
            local_home + "/", self._remote.home + "/")

    def forward_socket(self, local_socket: str, local_path: str, *, role: str = "mcp") -> None:
        """While the member runs, ``local_path`` (rewritten to the host's) is a Unix socket
        there forwarded to ``local_socket`` here (the daemon's, for teamctl's MCP tools; a
        sandboxed member's own, and its egress proxy's): one per ``role``, each launch's."""
        self._forwards[role] = (local_socket, local_path)

    def sandbox_next(self, spec: Mapping[str, Any]) -> None:
        """The next ``spawn`` runs its command inside bubblewrap there (hosts/sandbox/host.py)."""
        self._sandbox = spec

    async def probe_sandbox(self, bwrap: str) -> SandboxSupport:
        """Whether ``bwrap`` works there: runtimes/hosts/sandbox/probe.py run on the host."""
        await self.connect()
        out = await self._run_side(bwrap, source=_PROBE)
        try:
            return SandboxSupport(**json.loads(out.strip().splitlines()[-1]))
        except (ValueError, TypeError, IndexError):
            return SandboxSupport(False, reason=f"its probe answered {out[:200]!r}")

    # -- contracts.CgroupsThere ----------------------------------------------------------------

    async def cgroup_problem(self, controllers: frozenset[str], top: str) -> str | None:
        """Whether a member needing ``controllers`` can have a cgroup there: one made under
        ``top`` and removed, by the remote side (None, or why not, naming the host, and
        what to enable there)."""
        answer = await self._cgroup_side({"op": "probe", "controllers": sorted(controllers),
                                          "top": top})
        problem = answer.get("problem")
        return None if problem is None else str(problem)

    async def cgroup_support(self, top: str) -> dict[str, Any]:
        """What ``doctor --host`` says of the host's cgroups (a ``CgroupSupport``): each
        controller's hierarchy there, and a cgroup made under ``top`` and removed."""
        return await self._cgroup_side({"op": "support", "top": top})

    async def make_cgroup(self, top: str, name: str, ceiling: Ceiling) -> str:
        """The member's cgroup there with ``ceiling``'s limits (what an earlier start left in
        it killed first); every later ``spawn`` enters it before its program runs."""
        answer = await self._cgroup_side({
            "op": "make", "controllers": sorted(ceiling.controllers), "top": top, "name": name,
            "ceiling": {key: getattr(ceiling, key) for key in ceiling.keys}})
        if answer.get("problem") is not None:
            raise ResourceLimitsUnavailable(self.member, ceiling.keys, str(answer["problem"]))
        try:
            procs = [str(path) for path in answer["procs"]]
            wired = {"version": int(answer["version"]), "dirs": dict(answer["dirs"])}
        except (KeyError, TypeError, ValueError):
            raise self._garbled("its cgroup", answer) from None
        if answer.get("left"):
            log.info("member_cgroup_leftovers", host=self.name, team=self.team,
                     member=self.member, pids=answer["left"], earlier=True)
        self._cgroup = (wired, top, name)
        self._enter = entering([Path(p) for p in procs], [])
        return os.path.dirname(procs[0])

    async def close_cgroup(self, deadline: float) -> CgroupClosed | None:
        """The member's cgroup there read, emptied and removed (none made: None); later
        spawns start outside."""
        if self._cgroup is None:
            return None
        (wired, top, name), self._cgroup, self._enter = self._cgroup, None, []
        answer = await self._cgroup_side(
            {"op": "close", "group": wired, "top": top, "name": name, "deadline": deadline},
            deadline=PROBE_TIMEOUT + deadline)
        try:
            peak = answer.get("peak")
            return CgroupClosed(int(answer["oom_kills"]), None if peak is None else int(peak),
                                tuple(int(pid) for pid in answer["left"]),
                                bool(answer["removed"]), str(answer["where"]))
        except (KeyError, TypeError, ValueError):
            raise self._garbled("its cgroup's end", answer) from None

    async def _cgroup_side(self, request: dict[str, Any], *,
                           deadline: float = PROBE_TIMEOUT) -> dict[str, Any]:
        """One ``cgroup`` request of the remote side (orchestrator/cgroups.py's source sent
        along on stdin, run there as a module): its JSON answer."""
        await self.connect()
        user = self.target.user or "the ssh user"
        enable = (f"run its members there as root (user = \"root\"), or delegate a cgroup "
                  f"to {user} there — one it owns, with the controllers enabled, in which its "
                  "ssh sessions start (docs/scaling.md, \"A ceiling on the host\")")
        payload = {**request, "source": _CGROUPS, "machine": f"host {self.name}",
                   "enable": enable}
        out = await self._run_side("cgroup", stdin=json.dumps(payload).encode("utf-8"),
                                   deadline=deadline)
        try:
            answer = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            answer = None
        if not isinstance(answer, dict):
            raise self._garbled("its cgroups", out)
        return answer

    def _garbled(self, what: str, answer: object) -> HostUnavailable:
        return HostUnavailable(self.member, self.name, "host_runtime_missing",
                               f"its python3 answered something unexpected for {what}: "
                               f"{str(answer)[:200]!r}", retryable=False)

    def mcp_server(self, token: str, *, home: Path, socket: Path,
                   state_dir: Path) -> McpServer:
        """``teamctl mcp`` on the host: its standard-library modules shipped in the member's
        private dir (mirrored there), the daemon's socket forwarded to a new path for this
        launch; the token acts as this member only, as here."""
        forwarded = state_dir / f"mcp-{secrets.token_hex(4)}"
        self.forward_socket(str(socket), str(forwarded / "teamctl.sock"))
        return shipped_mcp_server(state_dir,
                         {"TEAMCTL_MEMBER_TOKEN": token, "TEAMCTL_MCP_HOME": str(forwarded)})

    def place(self, files: Sequence[Placed]) -> None:
        """Made in the member's private dir here, which is mirrored there at its start."""
        place_here(files)

    async def confine(self, argv: Sequence[str], *, env: Mapping[str, str],
                      workdir: Path | None = None) -> Confined | None:
        """The member runs on another machine: nothing of it runs here."""
        return None

    async def forward_port(self, port: int) -> int:
        await self.connect()
        remote = int((await self._run_side("freeport")).strip())
        self._port = (port, remote)
        return remote

    async def forwarder(self) -> int | None:
        """The ControlMaster's pid (``ssh -O check``, bounded): it carries the forwarded
        socket's connections, so the daemon sees it as their peer (orchestrator/daemon/peers)."""
        await self._check_master()
        return self.master_pid

    async def _cancel_port(self) -> None:
        """The master keeps a forward past the client that asked for it: let the previous
        launch's go (bounded), so a member's restarts do not pile up listening ports."""
        if self._forwarded is None or self._forwarded == self._port:
            return
        spec = f"127.0.0.1:{self._forwarded[0]}:127.0.0.1:{self._forwarded[1]}"
        self._forwarded = None
        await self._control("cancel", "-L", spec)

    async def spawn(self, argv: Sequence[str], *, cwd: Path,
                    env: Mapping[str, str]) -> Process:
        """Start ``argv`` on the host: the ssh client, whose stdio is the runtime's (with the
        daemon's socket forwarded there when the member has teamctl's MCP tools)."""
        await self.connect(fresh=True)
        await self._installed(argv[0])
        ssh = self._side("run")
        if self._forwards:
            remotes = {self.rewrite(path): local for local, path in self._forwards.values()}
            await self._run_side("mkdir", *(os.path.dirname(r) for r in remotes))
            at = ssh.index("--")  # Unix-socket forwards, through the master; a new path
            # per launch (sshd will not bind over an old one)
            ssh[at:at] = ["-o", "ExitOnForwardFailure=yes",
                          *(a for remote, local in remotes.items()
                            for a in ("-R", f"{remote}:{local}"))]
        if self._port is not None:  # loopback to loopback
            await self._cancel_port()
            at = ssh.index("--")
            ssh[at:at] = ["-o", "ExitOnForwardFailure=yes",
                          "-L", f"127.0.0.1:{self._port[0]}:127.0.0.1:{self._port[1]}"]
            self._forwarded = self._port
        header = {
            "root": self.remote_root, **self._mirror(),
            "argv": [self.rewrite(a) for a in argv],
            "cwd": self.rewrite(str(cwd)),
            "env": {k: self.rewrite(v) for k, v in env.items() if not _inherited(k, v)},
            "grace": 5, **({"sandbox": self._sandbox} if self._sandbox else {}),
            **({"enter": self._enter} if self._enter else {}),
        }
        await self._check_master()  # the header's secrets go to our own master only
        process = await anyio.open_process(ssh, stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           start_new_session=True)
        assert process.stdin is not None
        await process.stdin.send(json.dumps(header).encode("utf-8") + b"\n")
        log.info("remote_spawned", host=self.name, team=self.team, member=self.member,
                 pid=process.pid, files=len(header["files"]))
        return process

    async def _call(self, *args: str, stdin: bytes | None = None,
                    deadline: float = PROBE_TIMEOUT,
                    source: str = _SIDE) -> subprocess.CompletedProcess[bytes]:
        """One side call, bounded (``host_connect_hung`` past the deadline)."""
        command = self._side(*args, source=source)
        with anyio.move_on_after(deadline) as scope:
            if stdin is None:
                return await anyio.run_process(command, check=False, stdin=subprocess.DEVNULL)
            return await anyio.run_process(command, input=stdin, check=False)
        assert scope.cancelled_caught
        raise self._hung(f"{args[0]} there did not answer within {deadline:g}s")

    async def _run_side(self, *args: str, stdin: bytes | None = None,
                        deadline: float = PROBE_TIMEOUT, source: str = _SIDE) -> str:
        """One side call's stdout; a failure typed from ssh's own words."""
        done = await self._call(*args, stdin=stdin, deadline=deadline, source=source)
        if done.returncode != 0:
            raise classify(self.member, self.target, done.returncode,
                           done.stderr.decode("utf-8", "replace"))
        return str(done.stdout.decode("utf-8", "replace"))

    async def _installed(self, executable: str) -> None:
        done = await self._call("which", self.rewrite(executable))
        if done.returncode == 127 and not done.stderr.strip():
            raise HostUnavailable(
                self.member, self.name, "host_runtime_missing",
                f"{executable} is not installed there (not on the PATH of a non-interactive "
                f"ssh session); install it on {self.target.address}, or set command to its "
                "absolute path there", retryable=False)
        if done.returncode != 0:
            raise classify(self.member, self.target, done.returncode,
                           done.stderr.decode("utf-8", "replace"))

    def _mirror(self) -> dict[str, Any]:
        """The member's private dir, as the header carries it: its dirs, its small text
        files (paths in them rewritten), its symlinks (re-pointed)."""
        dirs: list[str] = []
        files: dict[str, str] = {}
        links: dict[str, str] = {}
        for path in sorted(self.state_dir.rglob("*")):
            relative = path.relative_to(self.state_dir)
            if relative.parts[:1] in _MIRROR_SKIP or relative.parts[:2] in _MIRROR_SKIP:
                continue
            if path.is_symlink():
                links[str(relative)] = self.rewrite(os.readlink(path))
            elif path.is_dir():
                dirs.append(str(relative))
            elif path.is_file() and path.stat().st_size <= _MIRROR_MAX_BYTES:
                try:
                    files[str(relative)] = self.rewrite(path.read_text(encoding="utf-8"))
                except (UnicodeDecodeError, OSError):
                    continue
        return {"dirs": dirs, "files": files, "links": links}

    async def put_file(self, image: ImagePart, *, into: str | None = None) -> Path | None:
        """A content-addressed copy of the image's bytes there, verified against its sha256
        (and a 0600 copy of it in the directory ``into``, rewritten: a sandboxed member's)."""
        await self.connect()
        copy = [self.rewrite(into)] if into is not None else []
        out = await self._run_side("put", image.sha256, str(len(image.data)), *copy,
                                   stdin=image.data,
                                   deadline=PROBE_TIMEOUT + len(image.data) / 1e6)
        return Path(out.strip())

    async def exists(self, pattern: str) -> bool:
        await self.connect()
        return (await self._run_side("exists", self.rewrite(pattern))).strip() == "true"

    async def version(self, executable: str, *, env: Mapping[str, str] | None = None,
                      cwd: Path | None = None, timeout: float = 60.0) -> dict[str, Any]:
        """``EXECUTABLE --version`` there (doctor, Codex's start): found, path, version — in
        the host's own session (``env`` and ``cwd`` are this machine's: not used)."""
        await self.connect()
        out = await self._run_side("version", self.rewrite(executable), deadline=timeout)
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result


def _inherited(name: str, value: str) -> bool:
    """A variable the member only inherited from the daemon (PATH, HOME, the locale…): the
    host's own session has its own; one the runtime set (OpenCode's private HOME) travels."""
    return name in BASE_ENV_NAMES and os.environ.get(name) == value


def classify(member: str, target: SshTarget, code: int, stderr: str) -> HostUnavailable:
    """What an ssh failure means, from OpenSSH's own words (exit 255: ssh itself failed)."""
    text = " ".join(stderr.split())[-400:]
    where = target.destination + (f" port {target.port}" if target.port else "")
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr or "Host key verification failed" \
            in stderr or "No ED25519 host key is known" in stderr or "host key for" in stderr:
        return HostUnavailable(
            member, target.name, "host_key_mismatch",
            f"the host key of {where} is unknown or does not match known_hosts ({text}); "
            "verify the host's key, then connect once with ssh to record it "
            "(ssh-keygen -R removes a stale one)", retryable=False)
    if "Permission denied" in stderr or "Too many authentication failures" in stderr:
        return HostUnavailable(
            member, target.name, "host_auth_failed",
            f"ssh refused the login to {where} ({text}); check user and identity_file "
            "(BatchMode: no password or passphrase prompt is possible)", retryable=False)
    if code == 127 or "teamctl-remote: executable not found" in stderr \
            or "python3: not found" in stderr or "python3: command not found" in stderr:
        missing = "python3" if "python3" in stderr else "the runtime's CLI"
        return HostUnavailable(
            member, target.name, "host_runtime_missing",
            f"{missing} is not installed there ({text}); install it on {target.address}, or "
            "set command to its absolute path there", retryable=False)
    if "banner exchange" in stderr or "kex_exchange_identification" in stderr:
        return HostUnavailable(
            member, target.name, "host_connect_hung",
            f"{where} accepted the connection but did not speak SSH ({text}); is it sshd on "
            "that port, and is the host overloaded?", retryable=True)
    return HostUnavailable(
        member, target.name, "host_unreachable",
        f"ssh to {where} failed ({text or f'exit {code}'}); is the host up and sshd "
        "running? (teamctl doctor --host checks it)", retryable=True)


# a ControlPath is a Unix socket: at most 104 bytes on macOS (108 on Linux); ssh binds a
# temporary name (the path + "." + 16 characters) first. The path: the dir + "/" + 16 hex.
_SOCKET_PATH_MAX = 104
_CONTROL_NAME_BYTES = 1 + 16 + 17
_control_dirs: dict[Path, Path] = {}


class ControlDirUntrusted(ValueError):
    """A ControlMaster directory or socket this operator does not own privately."""


def control_dir(home_root: Path) -> Path:
    """The private 0700 directory of one teamctl home's ControlMaster sockets, owned by this
    operator: ``ssh`` under the home (0700) when its socket paths fit the kernel's limit, else
    ``$XDG_RUNTIME_DIR/teamctl-<key>``, else a fresh ``mkdtemp`` (this process's only) — never a
    predictable shared name. A candidate that exists and is not this operator's 0700 directory
    (another owner, another mode, a symlink) is refused (logged) and the next one taken."""
    if home_root in _control_dirs:
        return _control_dirs[home_root]
    key = hashlib.sha256(str(home_root).encode()).hexdigest()[:10]
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR")
    candidates = [home_root / "ssh"]
    if runtime_dir and os.path.isabs(runtime_dir):
        candidates.append(Path(runtime_dir) / f"teamctl-{key}")
    for candidate in candidates:
        if len(os.fsencode(candidate)) + _CONTROL_NAME_BYTES >= _SOCKET_PATH_MAX:
            continue
        try:
            with contextlib.suppress(FileExistsError):
                candidate.mkdir(mode=0o700)
            trusted_dir(candidate)
        except (OSError, ControlDirUntrusted) as exc:
            log.warning("ssh_control_dir_refused", path=str(candidate), reason=str(exc))
            continue
        _control_dirs[home_root] = candidate
        return candidate
    fresh = _recorded_dir(home_root) or Path(tempfile.mkdtemp(prefix="tc-"))  # 0700, random
    _record_dir(home_root, fresh)
    atexit.register(shutil.rmtree, fresh, True)  # gone with a daemon that exits cleanly
    _control_dirs[home_root] = fresh
    return fresh


_RECORD = "ssh-control-dir"  # in the 0700 home: where a random control dir of its daemon is


def _recorded_dir(home_root: Path) -> Path | None:
    """The random control dir an earlier daemon of this home made (and left behind when it was
    killed): reused, so its ControlMasters can still be found and closed — if it is still this
    operator's private directory; None otherwise."""
    try:
        descriptor = os.open(home_root / _RECORD, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(descriptor) as file:
            if os.fstat(file.fileno()).st_uid != os.getuid():
                return None
            recorded = Path(file.read(4096).strip())
        if not recorded.is_absolute():
            return None
        trusted_dir(recorded)
    except (OSError, ValueError, ControlDirUntrusted):
        return None
    return recorded


def _record_dir(home_root: Path, path: Path) -> None:
    with contextlib.suppress(OSError):  # without the record, a restart only loses old masters
        descriptor = os.open(home_root / _RECORD,
                             os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(str(path))


def trusted_dir(path: Path) -> None:
    """``path`` is a directory (not a symlink) this uid owns, mode 0700, in a parent no other
    uid may write; ControlDirUntrusted (what is wrong) if not."""
    status = os.lstat(path)
    if not stat.S_ISDIR(status.st_mode):
        raise ControlDirUntrusted(f"{path} is not a directory (a symlink is never followed)")
    if status.st_uid != os.getuid():
        raise ControlDirUntrusted(f"{path} belongs to uid {status.st_uid}, not {os.getuid()}")
    if stat.S_IMODE(status.st_mode) != 0o700:
        raise ControlDirUntrusted(f"{path} has mode {stat.S_IMODE(status.st_mode):o}, not 700")
    parent = os.lstat(path.parent)
    if parent.st_uid not in (0, os.getuid()) or (
            parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX):
        raise ControlDirUntrusted(f"{path.parent} may be written by another user")


def trusted_socket(path: Path) -> bool:
    """Whether a ControlMaster socket is there: False if none; True if it is a socket this uid
    owns in a trusted dir; ControlDirUntrusted if anything else is there."""
    trusted_dir(path.parent)
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(status.st_mode) or status.st_uid != os.getuid():
        raise ControlDirUntrusted(f"{path} is not a socket of uid {os.getuid()}")
    return True


def build(request: HostRequest) -> SshHost:
    """The member's SSH host (``runtimes.hosts.KINDS["ssh"]``) from the team file's
    ``[hosts.NAME]`` (``request.settings``): one per member, sharing the host's ControlMaster
    (in this home's ``control_dir``) with the team's other members there."""
    settings, name = request.settings, request.name or request.settings.address
    return SshHost(SshTarget(name, settings.address, settings.user, settings.port,
                             settings.identity_file, tuple(settings.ssh_options)),
                   control_dir(request.home_root),
                   hashlib.sha256(str(request.home_root).encode()).hexdigest()[:10],
                   request.team, request.member, request.state_dir)
