"""This machine as a member's host (``contracts.Host``): what every member runs on unless the
team file names another host (``runtimes/ssh.py``).

Nothing is kept open and nothing is mapped: a path is itself, a port is itself, the artifact
file is where the runtime reads an image, the member's own processes reach the daemon's socket,
and the way to this machine always answers. The operator's CLI login here is the member's, so
the adapters check it before the start (``checks_local_login``).
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.contracts import (
    Confined,
    McpServer,
    link_beneath,
    open_dir,
    resolve_executable,
    unlink_link_beneath,
    write_beneath,
)
from runtimes.base import spawn_process

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from anyio.abc import Process

    from orchestrator.contracts import ImagePart, Placed, Spawner

__all__ = ["LocalHost", "place_here"]


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


@dataclass(frozen=True)
class LocalHost:
    """This machine: implements ``contracts.Host``. ``spawner`` is the seam a test replaces."""

    spawner: Spawner = spawn_process

    @property
    def name(self) -> str | None:
        return None

    @property
    def checks_local_login(self) -> bool:
        return True

    def find_executable(self, member: str, command: str | None, *, env_var: str,
                        default: str) -> str:
        return resolve_executable(member, command, env_var=env_var, default=default)

    def local_path(self, path: str) -> str | None:
        return path

    def remote_path(self, path: str) -> str:
        return path

    async def spawn(self, argv: Sequence[str], *, cwd: Path,
                    env: Mapping[str, str]) -> Process:
        return await self.spawner(argv, cwd=cwd, env=env)

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

    async def confine(self, argv: Sequence[str], *,
                      env: Mapping[str, str]) -> Confined | None:
        """Here a member runs as the operator's user: the command as it is."""
        return Confined(tuple(argv), dict(env))

    async def forward_port(self, port: int) -> int:
        return port

    def mcp_server(self, token: str, *, home: Path, socket: Path,
                   state_dir: Path) -> McpServer:
        """``teamctl mcp`` run by this python, reaching the daemon through its ``home``."""
        env = {"TEAMCTL_MEMBER_TOKEN": token, "TEAMCTL_MCP_HOME": str(home)}
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return McpServer((sys.executable, "-m", "orchestrator", "mcp"), env)

    async def forwarder(self) -> int | None:
        return None

    async def answers(self, deadline: float) -> bool:
        return True

    pause_after = None  # an idle process here costs nothing to keep

    async def suspend(self) -> None:
        return None

    async def close(self) -> None:
        return None
