"""A sandboxed member's toolchain works inside (issue 44, item 7 and attack 6; docs/security.md,
"Sandbox"): version managers' shims resolve in the real bubblewrap — pyenv's (this machine's
own where it has one), asdf's, mise's, nvm's bin (tests/support/toolchains.py's layouts) — a member
whose ``#!/usr/bin/env python3`` is pyenv's shim starts and answers, and ``teamctl doctor
TEAMFILE`` starts each sandboxed member's command with ``--version`` inside its sandbox and
names the fix when it does not start there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from runtimes.hosts.local.host import LocalHost
from runtimes.hosts.sandbox.host import SandboxHost
from runtimes.hosts.sandbox.plan import SandboxPolicy
from tests.support.driver import REPO
from tests.support.members import fake_member
from tests.support.toolchains import LAYOUTS, VERSION, pyenv, real_pyenv

if TYPE_CHECKING:
    from tests.support.driver import Teamctl


def _inside(policy: SandboxPolicy, argv: list[str], path_env: str) -> tuple[int, str]:
    """``argv`` run as a member with ``policy`` runs it: the line ``confine`` gives."""
    host = SandboxHost(LocalHost(), "a", policy, policy.runtime_home, bwrap="bwrap")
    confined = anyio.run(partial(host.confine, argv, env={"PATH": path_env,
                                                          "HOME": str(policy.home)}))
    assert confined is not None
    done = subprocess.run(list(confined.argv), env=dict(confined.env), capture_output=True,
                          text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_each_version_managers_shim_resolves_inside_the_sandbox(
        tmp_path: Path, name: str) -> None:
    """A CLI run by ``#!/usr/bin/env python3`` (``node`` for nvm) whose interpreter on PATH is
    the manager's shim starts inside, and the version the manager picks runs: pyenv's
    ``version`` file, asdf's and mise's ``~/.tool-versions`` (mise's shim a link to its
    binary), nvm's version's own bin."""
    home, work, runtime = tmp_path / "operator", tmp_path / "work", tmp_path / "rt"
    for path in (home, work, runtime):
        path.mkdir()
    layout = LAYOUTS[name](home)
    cli = tmp_path / "opt" / "cli"
    cli.parent.mkdir()
    cli.write_text(f"#!/usr/bin/env {layout.program}\n")
    cli.chmod(0o755)
    policy = SandboxPolicy(workdir=work, runtime_home=runtime, home=home)
    code, output = _inside(policy, [str(cli), "--version"], f"{layout.path_dir}:/usr/bin:/bin")
    assert (code, output) == (0, f"{layout.program} {VERSION} ran {cli} --version\n")


def _pyenv_path(tmp_path: Path) -> tuple[str, Path]:
    """A PATH whose ``python3`` is pyenv's shim, and pyenv's root: this machine's own pyenv
    (its default PATH), or, on a machine without one, pyenv's layout around this python."""
    root = real_pyenv()
    if root is None:
        root = pyenv(tmp_path / "pyenv-home", os.path.realpath(sys.executable)).root
    rest = [p for p in os.environ["PATH"].split(os.pathsep)
            if p and p != str(Path(sys.executable).parent)]
    return os.pathsep.join([str(root / "shims"), *rest]), root


def test_a_member_whose_interpreter_is_pyenvs_shim_starts_sandboxed(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """Attack 6 replayed: the fake Claude (``#!/usr/bin/env python3``) with a PATH where
    ``python3`` is pyenv's shim — the shim execs pyenv's ``libexec``, which reads its versions
    — starts inside its sandbox and answers (it exited 127 before: ``libexec`` was not bound);
    doctor shows pyenv's root read-only and the command started inside."""
    teamctl.env["PATH"], root = _pyenv_path(tmp_path)
    (tmp_path / "a").mkdir()
    team = teamctl.write_team("web", [fake_member(
        "a", workdir=str(tmp_path / "a"), sandbox="process", permissions="full",
        sandbox_ro=[str(REPO / "fixtures")], env={"ANTHROPIC_API_KEY": "sk-ant-FAKE"})])
    done = teamctl.run("launch", str(team))
    assert done.returncode == 0, done.stdout + done.stderr
    reply = teamctl.run("send", "a", "through the shim", "--wait")
    assert "received: through the shim" in reply.stdout, reply.stdout + reply.stderr
    [row] = teamctl.json("doctor", str(team))["members"]
    assert str(root) in row["sandbox"]["ro"]
    assert row["sandbox"]["started"] and row["problem"] is None, row


def test_doctor_names_the_fix_for_a_command_that_does_not_start_inside(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """A deliberately broken member: its ``#!/usr/bin/env python3`` finds, on its own PATH, a
    wrapper that execs an interpreter in a directory the sandbox does not show. It runs
    outside; doctor starts it inside with ``--version``, sees it fail (exit 127), names the
    path the wrapper runs and the fix (``sandbox_ro``), and exits 1. A member that starts
    inside shows what its ``--version`` printed there."""
    hidden = tmp_path / "hidden" / "libexec"
    hidden.mkdir(parents=True)
    (hidden / "python-real").symlink_to(os.path.realpath(sys.executable))
    wrappers = tmp_path / "wrappers"
    wrappers.mkdir()
    (wrappers / "python3").write_text(f'#!/bin/sh\nexec {hidden / "python-real"} "$@"\n')
    (wrappers / "python3").chmod(0o755)
    tool = tmp_path / "opt" / "tool"
    tool.parent.mkdir()
    tool.write_text("#!/usr/bin/env python3\nprint('tool 1.0')\n")
    tool.chmod(0o755)
    for name in ("ok", "broken"):
        (tmp_path / name).mkdir()
    team = teamctl.write_team("web", [
        fake_member("ok", workdir=str(tmp_path / "ok"), sandbox="process",
                    sandbox_ro=[str(REPO / "fixtures")], env={"ANTHROPIC_API_KEY": "x"}),
        fake_member("broken", workdir=str(tmp_path / "broken"), sandbox="process",
                    command=str(tool), env={"ANTHROPIC_API_KEY": "x",
                                            "PATH": f"{wrappers}:/usr/bin:/bin"})])
    done = teamctl.run("doctor", str(team), "--json")
    assert done.returncode == 1, done.stderr
    ok, broken = json.loads(done.stdout)["members"]
    assert (ok["sandbox"]["started"], ok["problem"]) == ("2.1.332 (Claude Code)", None)
    assert broken["version"] == "tool 1.0" and broken["sandbox"]["started"] is None
    assert "fails inside its sandbox (exit 127" in broken["problem"], broken
    assert broken["fix"].startswith(f"its interpreter {wrappers / 'python3'} runs "
                                    f"{hidden / 'python-real'}, which its sandbox does not "
                                    f"show: add sandbox_ro = [\"{hidden}\"]"), broken["fix"]
    text = teamctl.run("doctor", str(team))
    assert "sandbox start: 2.1.332 (Claude Code)" in text.stdout
    assert "member broken cannot start" in text.stderr and "sandbox_ro" in text.stderr
