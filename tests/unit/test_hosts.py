"""Every place a member runs is one class implementing ``contracts.Host`` (docs/dev/architecture.md,
"Hosts"): this machine (``LocalHost``), another one over SSH (``SshHost``, here against a
fake ``ssh`` that runs the remote side on this machine under a home of its own), and the
sandbox around this machine (``SandboxHost``, built by the hosts wing as the daemon builds
it). The same calls are made of each; no adapter or core module asks which one it has."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import inspect
import os
import re
import shlex
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from orchestrator.config import KubernetesHostConfig
from orchestrator.contracts import Host, ImagePart, McpServer, runtime_home
from runtimes import hosts
from runtimes.hosts.kubernetes.host import KubernetesHost
from runtimes.hosts.kubernetes.manifests import object_name
from runtimes.hosts.local.host import LocalHost
from runtimes.hosts.remote_mcp import shipped_mcp_server
from runtimes.hosts.sandbox.host import SandboxHost
from runtimes.hosts.ssh.host import SshHost, SshTarget
from runtimes.kit.base import member_environ
from tests.support.driver import REPO
from tests.support.import_graph import module_edges
from tests.support.k8s_fake import fake_cluster, kubeconfig

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.anyio

IMPLEMENTATIONS = (LocalHost, SshHost, SandboxHost)  # the sandbox: around this machine


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
            "name", "profile"} <= set(members)
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
    assert not _BRANCH.search("found = team.resolved(member).ssh_host")


def test_the_mcp_relay_shipped_to_a_host_is_the_relay_and_needs_nothing_of_teamctl(
        tmp_path: Path) -> None:
    """``teamctl mcp`` runs on an SSH host or in a pod as the one file ``shipped_mcp_server``
    copies into the member's private dir: the relay itself, started isolated, importing no
    module of teamctl's (when the whole server was shipped, a module it began to import —
    ``orchestrator.limits`` — was missing there, and it failed to start)."""
    server = shipped_mcp_server(tmp_path, {"TEAMCTL_MEMBER_TOKEN": "t" * 32})
    *python, relay = server.command
    assert python == ["python3", "-I", "-S"]
    assert Path(relay).read_bytes() == McpServer.RELAY.read_bytes()
    assert Path(relay).is_relative_to(tmp_path), "in the private dir, mirrored there"
    ours = [e.target for e in module_edges("orchestrator.client.mcp_bridge")
            if e.target.split(".")[0] in ("orchestrator", "runtimes")]
    assert ours == []


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
    keep: socket.socket | contextlib.ExitStack | None = None  # open while the host is asked


def _place(kind: type, tmp_path: Path) -> Placed:
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    if kind is LocalHost:
        return Placed(LocalHost(), state_dir, Path.home(), None, True)
    mcp = tmp_path / "mcp" / "teamctl.sock"  # the member's own socket (the sandbox binds it in)
    if kind is KubernetesHost:  # a pod of the fake API server (its "pods": local processes)
        keep = contextlib.ExitStack()
        cluster, url = keep.enter_context(fake_cluster(tmp_path / "cluster"))
        settings = KubernetesHostConfig(kind="kubernetes", image="example/agent:1",
                                        kubeconfig=str(kubeconfig(tmp_path / "kc", url)),
                                        start_timeout=20.0)
        host = hosts.build(hosts.HostRequest("web", "lead", state_dir, tmp_path / "home",
                                             kind="kubernetes", name="k8s", settings=settings,
                                             mcp_socket=lambda: mcp))
        volume = cluster.volume("default", f"work-{object_name('web', 'lead')}")
        return Placed(host, state_dir, volume / "home", "k8s", False, keep)
    if kind is SandboxHost:  # built as the daemon builds it: one call to the hosts wing
        mcp.parent.mkdir(mode=0o700)
        runtime_home(state_dir).mkdir(mode=0o700)  # made by the launch, bound in read-write
        listening = socket.socket(socket.AF_UNIX)  # the member's own socket, bound in
        listening.bind(str(mcp))
        listening.listen()
        box = hosts.SandboxRequest(workdir=tmp_path, others=[],
                                   paths={"rw": [], "ro": [], "hide": []}, runtime="claude",
                                   login="isolated", permissions="edit",
                                   bwrap=os.environ.get("TEAMCTL_BWRAP") or "bwrap")
        host = hosts.build(hosts.HostRequest("web", "lead", state_dir, tmp_path / "home",
                                             mcp_socket=lambda: mcp, sandbox=box))
        return Placed(host, state_dir, Path.home(), None, True, listening)
    remote_home = tmp_path / "far"
    remote_home.mkdir()
    _mirror_interpreter(remote_home)
    ssh = tmp_path / "ssh"
    ssh.write_text(_FAKE_SSH.format(home=shlex.quote(str(remote_home))))
    ssh.chmod(0o700)
    control = tmp_path / "cm"
    control.mkdir(mode=0o700)
    host = SshHost(SshTarget("box", "10.0.0.5", "dev", None, None, ()), control, "h0", "web",
                   "lead", state_dir, ssh=str(ssh))
    return Placed(host, state_dir, remote_home, "box", False)


def _mirror_interpreter(remote_home: Path) -> None:
    """The fake host has this interpreter where the operator has it: at the same path, or —
    where it lies under the operator's home (a checkout under ``~``) — at the same place
    under the host's home, as on a host where the operator cloned to the same place."""
    here, home = Path(sys.executable), Path.home()
    if here.is_relative_to(home):
        there = remote_home / here.relative_to(home)
        there.parent.mkdir(parents=True)
        there.symlink_to(here)


# where the operator's home is, against the interpreter the tests run: apart from it, or around
# it (a checkout cloned under ~: the SSH host rewrites every path under it to the host's home)
OPERATOR_HOMES = {"apart": lambda tmp: tmp / "operator",
                  "around_the_checkout": lambda tmp: Path(sys.executable).parents[1]}


@pytest.mark.parametrize("operator_home", OPERATOR_HOMES)
@pytest.mark.parametrize("kind", IMPLEMENTATIONS, ids=lambda c: c.__name__)
async def test_each_host_answers_the_same_calls(kind: type, operator_home: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """What the adapters and the launch factory ask of a host, asked of each: it starts a
    process whose stdio is the runtime's, places an image file, finds files, runs
    ``--version``, maps paths and ports, offers teamctl's MCP server with the token in its env
    (never argv), answers for the way to it and lets go of it — wherever the checkout lives
    (under the operator's home, ``--version`` of this interpreter failed over SSH: "not found"
    where the host was asked for it, under its own home, and nothing was there)."""
    home = OPERATOR_HOMES[operator_home](tmp_path)
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    # "python3" on either host is this interpreter, not a version manager's shim in front of it
    # (a shell script that costs half a second a call; the remote side runs on every call)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    await _answers_the_same_calls(_place(kind, tmp_path), tmp_path)


# the Kubernetes client's pooled connections to the fake API server outlive the host's close
# (as in tests/integration/test_kube_forward.py)
@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
async def test_a_pod_answers_the_same_calls(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The same calls of a member's pod, on the fake API server (tests/support/k8s_fake.py: its pods
    are local processes in their volume). The operator's home apart from the checkout only:
    a path under it is the pod's home there, and this interpreter is not in the image."""
    monkeypatch.setenv("HOME", str(tmp_path / "operator"))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    await _answers_the_same_calls(_place(KubernetesHost, tmp_path), tmp_path)


async def _answers_the_same_calls(placed: Placed, tmp_path: Path) -> None:
    host = placed.host
    assert host.name == placed.name
    assert host.profile.checks_local_login is placed.checks_local_login
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
    assert found["path"] == host.remote_path(sys.executable), "asked where the host has it"
    assert await host.forward_port(4096) > 0

    token = "tok-" + "x" * 20
    mcp = host.mcp_server(token, home=tmp_path / "home", socket=tmp_path / "home" / "s.sock",
                          state_dir=placed.state_dir)
    assert mcp.env["TEAMCTL_MEMBER_TOKEN"] == token and token not in " ".join(mcp.command)

    await _spawned_answers(host, tmp_path, placed.home)
    assert await host.answers(1.0)
    assert await host.forwarder() is None, "no ssh ControlMaster was kept: nothing forwards"
    await host.close()
    if placed.keep is not None:
        placed.keep.close()
    gc.collect()  # what the host let go of, while a test's warning filter holds


async def _spawned_answers(host: Host, cwd: Path, home: Path) -> None:
    """A process started through the host reads its stdin and writes its stdout, in ``cwd``
    as the host maps it, with the environment it was given (over SSH: what it only inherited
    from the daemon, its HOME among it, is the host's own session's)."""
    # one field a line: a checkout's path may hold a space ("~/src/teamctl ci")
    argv = ["python3", "-c", "import os, sys; print(sys.stdin.readline().strip(), "
            "os.environ['X_TOKEN'], os.getcwd(), os.environ['HOME'], sep='\\n', flush=True)"]
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
    said, token, where, seen_home = out.decode().splitlines()
    assert (said, token) == ("hello", "secret")
    assert where == host.remote_path(str(cwd)) and seen_home == str(home)
