"""``teamctl doctor TEAMFILE``: a sandboxed member's command started with ``--version`` inside
its own sandbox, and, where it fails there, the fix named.

Why a real start: the plan (runtimes/hosts/sandbox/plan.py) binds the toolchain it can see — the
CLI's tree, its ``#!`` interpreter, the PATH, a version manager's root — but a program that
runs something else it does not name (a shim's code, a wrapper's target) fails only at the
member's start, inside, with exit 127, while the same command runs outside (issue 44, attack
6). The line is the member's own (``SandboxHost.confine``: its mounts, its toolchain, its
network namespace; with ``network = "off" | "allowlist"`` an empty one without the egress
relay, which runs in the daemon), so what works here starts there. A workdir or runtime home
that does not exist yet is an empty temporary one for the probe.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from orchestrator.contracts import SandboxUnavailable, runtime_home
from runtimes.hosts.local.host import LocalHost
from runtimes.hosts.sandbox.host import SandboxHost, mcp_toolchain
from runtimes.hosts.sandbox.plan import (
    NETWORK_ON,
    SYSTEM_DIRS,
    NetworkPlan,
    SandboxPolicy,
    file_head,
    interpreter,
    manager_of,
    toolchain,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["StartInside", "start_inside", "why_not_inside"]

_PATH = re.compile(r"/[^\s:'\"`;,()]+")  # an absolute path in an error line
_SHIM_BYTES = 4096  # how much of a shim script is read for the paths it runs


@dataclass(frozen=True)
class StartInside:
    """How ``--version`` went inside: its first line, or the problem and its fix."""

    version: str | None
    problem: str | None = None
    fix: str | None = None


def start_inside(member: str, policy: SandboxPolicy, argv: list[str], env: Mapping[str, str],
                 *, network: str, bwrap: str, timeout: float) -> StartInside:
    """Run ``argv`` (the member's command and ``--version``) inside ``member``'s sandbox,
    bounded by ``timeout``; a failure there comes back with what to change."""
    with ExitStack() as stack:
        own = _existing(policy, stack)
        plan = NETWORK_ON if network == NETWORK_ON.mode else \
            NetworkPlan(mode=network, bwrap_args=("--unshare-net",))
        host = SandboxHost(LocalHost(), member, own, own.runtime_home, bwrap=bwrap,
                           network=plan)
        try:
            confined = anyio.run(partial(host.confine, argv, env=env))
        except SandboxUnavailable as exc:
            return StartInside(None, f"its sandbox cannot be made here: {exc.reason}",
                               exc.message)
        assert confined is not None  # this machine's
        try:
            done = subprocess.run(list(confined.argv), env=dict(confined.env),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return StartInside(None, f"{argv[0]} --version gave no answer inside its sandbox "
                               f"within {timeout:g}s", "check what it waits for there (its "
                               "network: network = \"on\"?)")
        output = (done.stdout or done.stderr).strip()
        if done.returncode == 0:
            return StartInside(output.splitlines()[0][:200] if output else None)
        said = (done.stderr or done.stdout).strip().splitlines()
        return StartInside(None, f"{argv[0]} --version fails inside its sandbox (exit "
                           f"{done.returncode}" + (f": {said[-1][:200]}" if said else "") + ")"
                           ", though it runs outside",
                           why_not_inside(argv[0], env.get("PATH", os.defpath), own,
                                          done.stdout + done.stderr))


def why_not_inside(executable: str, path_env: str, policy: SandboxPolicy, output: str) -> str:
    """The fix for a command that runs here but not inside, from what it said there: the
    first path it runs (named in ``output`` or in its ``#!`` script) that exists here and the
    sandbox does not show; a version manager's shim that found no version; a script whose
    directory is not bound; else where to look."""
    used = interpreter(executable, path_env) or executable
    manager = manager_of(used, home=policy.home)
    subject = executable if used == executable or _system(used) else \
        f"its interpreter {used}"
    intro = f"{subject} is a {manager.name} shim: it" if manager is not None else subject
    seen = toolchain(executable, path_env, extra=mcp_toolchain(), policy=policy)
    for path in _paths(output, used):
        if not os.path.exists(path) or _visible(path, policy, seen):
            continue
        if _hidden(path, policy):
            return (f"{intro} reads {path}, which every sandbox hides (a credential path): "
                    "give the member what it needs through its env instead")
        bind = str(manager.root) if manager is not None and _under(
            Path(path), manager.root) else os.path.dirname(path)
        return (f"{intro} runs {path}, which its sandbox does not show: add sandbox_ro = "
                f"[\"{bind}\"] to this member (read-only), or set its command to a program "
                "the sandbox shows")
    if manager is not None and (manager.name in output or str(manager.root) in output
                                or "version" in output.lower()):
        return f"{subject} is a {manager.name} shim: " + _manager_fix(manager.name, used,
                                                                       executable)
    folder = os.path.dirname(os.path.abspath(executable))
    if not _visible(folder, policy, seen):
        return (f"only the file {executable} is bound, not {folder}: if it loads what lies "
                f"beside it (modules, a package), add sandbox_ro = [\"{folder}\"] to this "
                "member (read-only)")
    return ("something it needs here is not in its sandbox: compare what it reads with the "
            "sandbox's read-only and read-write paths above, and add it with sandbox_ro")


def _manager_fix(name: str, shim: str, executable: str) -> str:
    pin = ("mise's global config (~/.config/mise/config.toml) is not bound, as it may hold "
           "[env] secrets: pin the version in the workdir (mise.toml or .tool-versions), or"
           if name == "mise" else "it found no version inside: pin one in the workdir, or")
    real = f"`{name} which {os.path.basename(shim)}`"
    return (f"{pin} set command = [\"<the output of {real}>\", \"{executable}\"] for this "
            "member (the interpreter itself, not its shim)")


def _paths(output: str, script: str) -> list[str]:
    """The absolute paths named in ``output``, then in ``script``'s text (a shim: what it
    execs), in order, each once."""
    text = output
    head = file_head(script, _SHIM_BYTES)
    if head.startswith(b"#!"):
        text += "\n" + head.decode(errors="replace")
    return list(dict.fromkeys(_PATH.findall(text)))


def _visible(path: str, policy: SandboxPolicy, toolchain_paths: Iterable[Path]) -> bool:
    """Whether the sandbox shows ``path``: under the system, the toolchain or one of the
    member's binds, and neither concealed nor hidden."""
    shown = [*toolchain_paths, *policy.ro, *policy.rw, *policy.own(),
             *(p for p, _ in policy.login)]
    inside = _system(path) or any(_under(Path(path), p) for p in shown)
    return inside and not any(_under(Path(path), p) for p in policy.concealed()) and \
        not _hidden(path, policy)


def _system(path: str) -> bool:
    """Under ``/usr``, ``/etc``, ``/bin``… as named or as resolved (a merged ``/usr``)."""
    tops = {Path(top) for d in SYSTEM_DIRS for top in (d, os.path.realpath(d))}
    return any(_under(Path(path), top) for top in tops)


def _hidden(path: str, policy: SandboxPolicy) -> bool:
    """Under a credential path, ``/etc/shadow`` and the like, or ``sandbox_hide``."""
    return any(_under(Path(path), p) for p in policy.hidden())


def _under(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


def _existing(policy: SandboxPolicy, stack: ExitStack) -> SandboxPolicy:
    """``policy`` with empty temporary directories for a workdir, or a private dir and its
    runtime home, not made yet (a worktree, a member never started): ``--version`` needs
    neither, and doctor makes nothing in teamctl's home."""
    def scratch() -> Path:
        return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tc-doctor-")))

    workdir = policy.workdir if policy.workdir.is_dir() else scratch()
    if policy.runtime_home.is_dir():
        return replace(policy, workdir=workdir)
    private = scratch()
    home = runtime_home(private) if policy.private is not None else private
    home.mkdir(exist_ok=True)
    return replace(policy, workdir=workdir, runtime_home=home,
                   private=private if policy.private is not None else None)
