"""The fake ``opencode serve`` in a real bubblewrap sandbox, driven by the adapter alone (no
daemon): a ``SandboxHost`` over this machine with the network ``on`` or ``off`` (its egress
socket a listener nobody answers: the fake never goes out). For the adapter tests of
tests/integration/test_sandbox_opencode_net.py and bench/bench_opencode_relay.py."""

from __future__ import annotations

import os
import socket
from contextlib import contextmanager
from typing import TYPE_CHECKING

from orchestrator.contracts import LaunchSpec
from runtimes.hosts.local.host import LocalHost
from runtimes.hosts.sandbox.host import SOCKET_NAME, SandboxHost, member_policy
from runtimes.hosts.sandbox.network import network_plan
from runtimes.hosts.sandbox.plan import NETWORK_ON
from tests.support.driver import REPO, fakes_path

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

FAKE_OPENCODE = REPO / "fixtures" / "bin" / "opencode"


def _listener(path: Path) -> socket.socket:
    """A listening socket at ``path``, bound through its directory's descriptor: a pytest
    base dir deep enough (pytest-1051/popen-gw1/...) passes AF_UNIX's 108 bytes."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        sock.bind(f"/proc/self/fd/{directory}/{path.name}")
        sock.listen(1)
    except OSError:
        sock.close()
        raise
    finally:
        os.close(directory)
    return sock


@contextmanager
def sandbox_host(root: Path, network: str) -> Iterator[SandboxHost]:
    """A member's sandbox under ``root`` (its workdir ``root/work``, its runtime home
    ``root/state/members/t/m``) with ``network`` "on" or "off"."""
    work, state = root / "work", root / "state"
    member_dir = state / "members" / "t" / "m"
    for path in (work, member_dir / "mcp", member_dir / "runtime", root / "egress"):
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    policy = member_policy(workdir=work, private=member_dir, state_root=state, others=(),
                           paths={"rw": [], "ro": [str(REPO / "fixtures")], "hide": []},
                           runtime="opencode", login="isolated", permissions="full")
    egress = root / "egress" / "e.sock"
    with _listener(member_dir / "mcp" / SOCKET_NAME), _listener(egress):
        yield SandboxHost(LocalHost(), "m", policy, member_dir / "mcp",
                          network=NETWORK_ON if network == "on" else
                          network_plan("off", egress, []))


def spec(root: Path, host: SandboxHost) -> LaunchSpec:
    """The fake OpenCode's launch on ``host``."""
    return LaunchSpec(team="t", member="m", executable=str(FAKE_OPENCODE), model="fake/text",
                      prompt=None, workdir=root / "work",
                      state_dir=root / "state" / "members" / "t" / "m", start_timeout=20.0,
                      env={"PATH": fakes_path(os.environ.get("PATH", ""))}, host=host)
