"""This machine as a member's host (``contracts.Host``): what every member runs on unless the
team file names another host (``runtimes/hosts/ssh/host.py``).

Nothing is kept open and nothing is mapped: a path is itself, a port is itself, the artifact
file is where the runtime reads an image, the member's own processes reach the daemon's socket,
and the way to this machine always answers. The operator's CLI login here is the member's, so
the adapters check it before the start (``checks_local_login``).

A member with a ceiling starts inside its cgroups (``contracts.CgroupHost``): the daemon names
them (``enter_cgroups``) and every spawn is the trampoline ``entering`` makes — a ``/bin/sh``
that writes its own pid into each ``cgroup.procs`` and then executes the runtime, so the
runtime's first instruction already runs inside (no ``preexec_fn``: the daemon has threads).
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.contracts import (
    Confined,
    HostProfile,
    McpServer,
    link_beneath,
    open_dir,
    resolve_executable,
    unlink_link_beneath,
    write_beneath,
)
from runtimes.kit.base import spawn_process

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from anyio.abc import Process

    from orchestrator.contracts import ImagePart, Placed, Spawner
    from runtimes.hosts import HostRequest

__all__ = ["LocalHost", "build", "entering", "place_here"]

# $1: how many cgroup.procs files follow; then the files; then the command. $$ is this shell,
# which becomes the command (exec keeps the pid); a file it cannot write ends the start (125)
_TRAMPOLINE = ('n=$1; shift; while [ "$n" -gt 0 ]; do '
               'echo $$ > "$1" || { echo "teamctl: cannot enter the cgroup $1" >&2; exit 125; }; '
               'shift; n=$((n - 1)); done; exec "$@"')


def entering(procs: Sequence[Path], argv: Sequence[str]) -> list[str]:
    """``argv`` started inside the cgroups whose ``cgroup.procs`` files are ``procs``: its
    own pid written into each before it is executed (never a shell line: the paths and the
    arguments are the shell's positional arguments). No ``procs``: ``argv`` itself."""
    if not procs:
        return list(argv)
    return ["/bin/sh", "-c", _TRAMPOLINE, "teamctl-cgroup", str(len(procs)),
            *map(str, procs), *argv]


def place_here(files: Sequence[Placed]) -> None:
    """``Host.place`` on this machine's disk (``orchestrator.beneath``): each directory, a
    copy of each daemon file, a link for each login file. FileExistsError where a real file
    holds a link's name; OSError (ELOOP, ENOTDIR) where a link holds a directory's."""
    for placed in files:
        placed.home.mkdir(mode=0o700, exist_ok=True)  # a link there is refused below (ELOOP)
        if placed.unlink:
            unlink_link_beneath(placed.home, placed.at)
        elif placed.link is not None:
            link_beneath(placed.home, placed.at, placed.link)
        elif placed.source is not None:
            write_beneath(placed.home, placed.at, placed.source.read_bytes())
        else:
            os.close(open_dir(placed.home, placed.at))

# the operator's login here applies; nothing confined or paused; a ceiling is a cgroup here
_PROFILE = HostProfile(cgroups=True)

@dataclass(frozen=True)
class LocalHost:
    """This machine: implements ``contracts.Host``. ``spawner`` is the seam a test replaces."""

    spawner: Spawner = spawn_process
    # the member's cgroups (``enter_cgroups``): each later spawn starts inside them
    _cgroups: list[Path] = field(default_factory=list, init=False, repr=False)

    @property
    def name(self) -> str | None:
        return None

    @property
    def profile(self) -> HostProfile:
        return _PROFILE

    def find_executable(self, member: str, command: str | None, *, env_var: str,
                        default: str) -> str:
        return resolve_executable(member, command, env_var=env_var, default=default)

    def local_path(self, path: str) -> str | None:
        return path

    def remote_path(self, path: str) -> str:
        return path

    def enter_cgroups(self, procs: Sequence[Path]) -> None:
        self._cgroups[:] = procs

    async def spawn(self, argv: Sequence[str], *, cwd: Path,
                    env: Mapping[str, str]) -> Process:
        return await self.spawner(entering(self._cgroups, argv), cwd=cwd, env=env)

    async def put_file(self, image: ImagePart) -> Path | None:
        return image.path

    async def exists(self, pattern: str) -> bool:
        found = await anyio.to_thread.run_sync(lambda: glob.glob(os.path.expanduser(pattern),
                                                                 include_hidden=True))
        return bool(found)

    async def version(self, executable: str, *, env: Mapping[str, str] | None = None,
                      cwd: Path | None = None, timeout: float = 60.0) -> dict[str, Any]:
        found: dict[str, Any] = {"found": True, "path": executable}
        try:
            with anyio.fail_after(timeout):
                done = await anyio.run_process([executable, "--version"], check=False,
                                               env=None if env is None else dict(env), cwd=cwd)
        except TimeoutError:
            return found | {"error": f"'{executable} --version' did not answer within "
                                     f"{timeout:g}s"}
        except OSError as exc:
            return found | {"error": f"cannot run {executable}: {exc.strerror}"}
        out = done.stdout.decode(errors="replace").strip()
        if done.returncode != 0 or not out:
            err = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
            return found | {"error": f"'{executable} --version' exited {done.returncode}: "
                                     f"{' | '.join(err)}", "stderr": err}
        return found | {"version": out.splitlines()[0]}

    def place(self, files: Sequence[Placed]) -> None:
        """Each file written (or linked) into its runtime home, never through a name the
        member made there (a member here runs as the operator's user: no boundary to keep,
        but no reason to write through its links either)."""
        place_here(files)

    async def confine(self, argv: Sequence[str], *, env: Mapping[str, str],
                      workdir: Path | None = None) -> Confined | None:
        """Here a member runs as the operator's user: the command as it is."""
        return Confined(tuple(argv), dict(env))

    async def forward_port(self, port: int) -> int:
        return port

    def mcp_server(self, token: str, *, home: Path, socket: Path,
                   state_dir: Path) -> McpServer:
        """``teamctl mcp``'s relay run by this python, isolated (``-I -S``: no site, no
        PYTHONPATH, nothing of teamctl's package imported), reaching the daemon through its
        ``home``."""
        env = {"TEAMCTL_MEMBER_TOKEN": token, "TEAMCTL_MCP_HOME": str(home)}
        return McpServer((sys.executable, "-I", "-S", str(McpServer.RELAY)), env)

    async def forwarder(self) -> int | None:
        return None

    async def answers(self, deadline: float) -> bool:
        return True

    async def close(self) -> None:
        return None


def build(request: HostRequest) -> LocalHost:
    """This machine's host (``runtimes.hosts.KINDS["local"]``): nothing of the request is
    needed — a member here runs as the operator's user, where the daemon runs."""
    del request
    return LocalHost()
