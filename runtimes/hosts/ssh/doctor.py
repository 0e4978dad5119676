"""``teamctl doctor --host NAME`` for an SSH host: reached as members reach it (BatchMode, the
same options), its home and python, which runtime CLIs it has (each one's ``--version``), and
whether members' ceilings can be held there (a cgroup made there and removed)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from runtimes.hosts.ssh.host import SshHost

__all__ = ["checks"]


async def checks(host: SshHost, found: dict[str, Any], *, commands: Mapping[str, str],
                 forward: bool = False) -> None:
    """The wing's ``check`` for an SSH host, as a HostReport's fields: reachable (the round
    trip timed), then each runtime's command there (``forward`` is nothing to ask over SSH),
    then its cgroups (``CgroupSupport``)."""
    del forward
    found.update(kind="ssh", destination=host.target.destination, port=host.target.port,
                 reachable=False)
    started = time.monotonic()
    remote = await host.connect()
    found.update(reachable=True, home=remote.home, python=remote.python,
                 seconds=round(time.monotonic() - started, 3))
    found["runtimes"] = [{"runtime": runtime, "command": command,
                          **await host.version(command)}
                         for runtime, command in commands.items()]
    found["cgroups"] = await host.cgroup_support(f"teamctl-doctor-{os.getpid()}")
