"""Every place a member runs is one class implementing ``contracts.Host`` (docs/architecture.md,
"Hosts"): this machine (``LocalHost``) and another one over SSH (``SshHost``, here against a
fake ``ssh`` that runs the remote side on this machine under a home of its own). The same calls
are made of each; no adapter or core module asks which one it has."""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.contracts import Host, ImagePart
from runtimes.base import member_environ
from runtimes.local_host import LocalHost
from runtimes.ssh import MCP_MODULES, SshHost, SshTarget
from tests.conftest import REPO
from tests.unit.test_layering import module_edges

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.anyio

IMPLEMENTATIONS = (LocalHost, SshHost)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _members(protocol: type) -> dict[str, object]:
    """The protocol's own members (what a new host class must implement)."""
    return {name: value for name, value in vars(protocol).items()
            if not name.startswith("_") and name not in ("copy_with",)}


@pytest.mark.parametrize("cls", IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_every_host_class_implements_every_member_of_the_protocol(cls: type) -> None:
    """A host class has each member of ``Host``, a coroutine where the protocol has one and a
    property or plain value where it has a property (a sync ``spawn`` would hang no test but
    break every adapter that awaits it)."""
    members = _members(Host)
    assert {"spawn", "put_file", "exists", "version", "forward_port", "remote_path",
            "local_path", "find_executable", "mcp_server", "forwarder", "answers", "close",
            "name", "checks_local_login"} <= set(members)
    for name, declared in members.items():
        assert hasattr(cls, name) or name in getattr(cls, "__dataclass_fields__", {}), \
            f"{cls.__name__} lacks {name}"
        if inspect.isfunction(declared):
            own = getattr(cls, name)
            assert inspect.iscoroutinefunction(own) == inspect.iscoroutinefunction(declared), \
                f"{cls.__name__}.{name}: async where the protocol is async, and only there"


_BRANCH = re.compile(r"\bhost is (not )?None\b")


def _python_files() -> Iterator[Path]:
    yield from sorted((REPO / "runtimes").rglob("*.py"))
    yield from sorted((REPO / "orchestrator" / "daemon").rglob("*.py"))
    yield REPO / "orchestrator" / "contracts.py"


def test_no_runtime_or_core_module_asks_whether_a_member_has_a_host() -> None:
    """Local and remote are objects, not branches: every member has a host (``LaunchSpec.host``
    is never None), so no adapter or core module tests ``host is None`` — what differs is a
    method of the host (20 such branches were in runtimes/ and the daemon before it)."""
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for path in _python_files()
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if _BRANCH.search(line)]
    assert not found, "\n".join(found)


def test_the_branch_check_finds_a_branch() -> None:
    """The check above can fail."""
    assert _BRANCH.search("        if spec.host is None:  # here")
    assert _BRANCH.search("workdir=None if state.host is not None else state.workdir")
    assert not _BRANCH.search("found = team.member_host(member)")


def test_the_mcp_server_shipped_to_a_host_has_every_module_it_imports() -> None:
    """``teamctl mcp`` runs on an SSH host from the modules ``SshHost.mcp_server`` ships: every
    project module its imports reach must be among them (``orchestrator.limits`` was not when
    the MCP server began to read its request limit there, and it failed to start there)."""
    wanted, todo = {"orchestrator.client.mcp_server"}, ["orchestrator.client.mcp_server"]
    while todo:
        module = todo.pop()
        for edge in module_edges(module):
            if edge.target not in wanted:
                wanted.add(edge.target)
                todo.append(edge.target)
    shipped = {"orchestrator." + m.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
               for m in MCP_MODULES if m != "__init__.py"} | {"orchestrator"}
    assert wanted <= shipped, sorted(wanted - shipped)


# -- the same calls, made of each host ---------------------------------------------------------

_FAKE_SSH = """#!/bin/sh
for arg; do [ "$arg" = -O ] && exit 255; done  # a ControlMaster command: none is kept here
while [ "$1" != -- ]; do shift; done
shift 2  # "--" and the destination
HOME={home} exec sh -c "$*"
"""


@dataclass
class Placed:
    host: Host
    state_dir: Path
    home: Path  # the home the runtime sees there
    name: str | None
    checks_local_login: bool


def _place(kind: type, tmp_path: Path) -> Placed:
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    if kind is LocalHost:
        return Placed(LocalHost(), state_dir, Path.home(), None, True)
    remote_home = tmp_path / "far"
    remote_home.mkdir()
    ssh = tmp_path / "ssh"
    ssh.write_text(_FAKE_SSH.format(home=shlex.quote(str(remote_home))))
    ssh.chmod(0o700)
    control = tmp_path / "cm"
    control.mkdir(mode=0o700)
    host = SshHost(SshTarget("box", "10.0.0.5", "dev", None, None, ()), control, "h0", "web",
                   "lead", state_dir, ssh=str(ssh))
    return Placed(host, state_dir, remote_home, "box", False)


@pytest.mark.parametrize("kind", IMPLEMENTATIONS, ids=lambda c: c.__name__)
async def test_each_host_answers_the_same_calls(kind: type, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """What the adapters and the launch factory ask of a host, asked of each: it starts a
    process whose stdio is the runtime's, places an image file, finds files, runs
    ``--version``, maps paths and ports, offers teamctl's MCP server with the token in its env
    (never argv), answers for the way to it and lets go of it."""
    # "python3" on either host is this interpreter, not a version manager's shim in front of it
    # (a shell script that costs half a second a call; the remote side runs on every call)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    placed = _place(kind, tmp_path)
    host = placed.host
    assert host.name == placed.name
    assert host.checks_local_login is placed.checks_local_login
    assert host.find_executable("lead", sys.executable, env_var="TEAMCTL_NONE",
                                default="x") == sys.executable  # absolute already

    data = b"\x89PNG not really"
    artifact = tmp_path / "artifact.png"
    artifact.write_bytes(data)
    image = ImagePart("image/png", 1, 1, hashlib.sha256(data).hexdigest(), data, artifact)
    placed_file = await host.put_file(image)
    assert placed_file is not None and placed_file.read_bytes() == data
    assert await host.exists(str(placed_file.parent / "*"))
    assert not await host.exists(str(tmp_path / "nowhere" / "*"))

    found = await host.version(sys.executable, timeout=30.0)
    assert found["found"] and found["version"].startswith("Python"), found
    assert await host.forward_port(4096) > 0

    token = "tok-" + "x" * 20
    mcp = host.mcp_server(token, home=tmp_path / "home", socket=tmp_path / "home" / "s.sock",
                          state_dir=placed.state_dir)
    assert mcp.env["TEAMCTL_MEMBER_TOKEN"] == token and token not in " ".join(mcp.command)

    await _spawned_answers(host, tmp_path, placed.home)
    assert await host.answers(1.0)
    assert await host.forwarder() is None, "no ssh ControlMaster was kept: nothing forwards"
    await host.close()


async def _spawned_answers(host: Host, cwd: Path, home: Path) -> None:
    """A process started through the host reads its stdin and writes its stdout, in ``cwd``
    as the host maps it, with the environment it was given (over SSH: what it only inherited
    from the daemon, its HOME among it, is the host's own session's)."""
    argv = ["python3", "-c", "import os, sys; print(sys.stdin.readline().strip(), "
            "os.environ['X_TOKEN'], os.getcwd(), os.environ['HOME'], flush=True)"]
    env = member_environ({}, {"X_TOKEN": "secret"})  # as an adapter builds it
    process = await host.spawn(argv, cwd=cwd, env=env)
    assert process.stdin is not None and process.stdout is not None
    with anyio.fail_after(60):
        await process.stdin.send(b"hello\n")
        out = b""
        async for chunk in process.stdout:
            out += chunk
        await process.wait()
    await process.aclose()
    said, token, where, seen_home = out.decode().split()
    assert (said, token) == ("hello", "secret")
    assert where == host.remote_path(str(cwd)) and seen_home == str(home)
