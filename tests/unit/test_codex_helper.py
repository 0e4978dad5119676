"""Codex's own sandbox helper (runtimes/codex/helper.py, docs/runtimes.md "Its own sandbox and
/tmp"): codex 0.171.0 makes its ``codex-linux-sandbox`` links only outside its temp dir, and a
system bubblewrap runs every sandboxed command through one. A member gets a temp dir of its own,
so a TEAMCTL_HOME under /tmp no longer leaves it unable to run any command; a member whose own
env puts its CODEX_HOME back under its TMPDIR is refused at launch, naming the fix. The real
codex proves it in tests/e2e/test_codex_sandbox_real.py."""

from __future__ import annotations

from pathlib import Path, PurePath

import pytest

from orchestrator.contracts import CodexSandboxUnusable, LaunchSpec
from runtimes.codex._shared import build_env
from runtimes.codex.helper import describe_helper, helper_problem
from runtimes.hosts.local.host import LocalHost
from tests.support.driver import REPO

FAKE_CODEX = REPO / "fixtures" / "bin" / "codex"
HOME = PurePath("/tmp/teamctl/members/t/m/runtime/codex-home")


@pytest.fixture
def bwrap_dir(tmp_path: Path) -> Path:
    """A directory holding an executable named ``bwrap`` (codex looks it up on PATH)."""
    found = tmp_path / "bin"
    found.mkdir()
    (found / "bwrap").write_text("#!/bin/sh\nexit 1\n")
    (found / "bwrap").chmod(0o755)
    return found


def _spec(tmp_path: Path, **fields: object) -> LaunchSpec:
    (tmp_path / "state").mkdir(exist_ok=True)
    base: dict[str, object] = {"team": "t", "member": "m", "executable": str(FAKE_CODEX),
                               "model": None, "prompt": None, "workdir": tmp_path,
                               "state_dir": tmp_path / "state", "login": "isolated",
                               "permissions": "edit", "host": LocalHost(),
                               "env": {"CODEX_API_KEY": "k"}}
    return LaunchSpec(**(base | fields))  # type: ignore[arg-type]


def test_a_codex_member_under_tmp_gets_a_temp_dir_of_its_own_beside_its_codex_home(
        tmp_path: Path, bwrap_dir: Path) -> None:
    """Under /tmp (pytest's own dir is), with a system bubblewrap on PATH: codex's TMPDIR is
    the member's ``runtime/tmp``, made before it starts, and its CODEX_HOME is not under it —
    so codex makes its helper's links and the member starts."""
    spec = _spec(tmp_path, env={"CODEX_API_KEY": "k", "PATH": f"{bwrap_dir}:/usr/bin:/bin"})
    env = build_env(spec)
    assert str(tmp_path).startswith("/tmp/")
    assert env["TMPDIR"] == str(spec.runtime_home / "tmp")
    assert (spec.runtime_home / "tmp").is_dir()
    assert not Path(env["CODEX_HOME"]).is_relative_to(env["TMPDIR"])
    assert helper_problem(PurePath(env["CODEX_HOME"]), env, "workspace-write") is None


def test_a_members_own_tmpdir_holding_its_codex_home_is_refused_at_launch_naming_the_fix(
        tmp_path: Path, bwrap_dir: Path) -> None:
    """The member's env names TMPDIR = the teamctl home: codex would refuse its links and a
    system bubblewrap would run none of its commands. Refused, typed, not retried, the fix
    named — for a profile codex sandboxes; ``full`` runs unsandboxed and starts."""
    env = {"CODEX_API_KEY": "k", "TMPDIR": str(tmp_path), "PATH": f"{bwrap_dir}:/usr/bin"}
    with pytest.raises(CodexSandboxUnusable) as refused:
        build_env(_spec(tmp_path, env=env))
    assert (refused.value.code, refused.value.retryable) == ("codex_sandbox_unusable", False)
    assert "remove TMPDIR from the member's env" in str(refused.value)
    assert "bwrap: execvp codex-linux-sandbox" in str(refused.value)
    assert build_env(_spec(tmp_path, env=env, permissions="full"))["TMPDIR"] == str(tmp_path)


@pytest.mark.parametrize(("tmpdir", "sandbox", "with_bwrap", "refused"), [
    ("/tmp", "workspace-write", True, True),           # codex's default temp dir
    ("/tmp", "read-only", True, True),
    ("/tmp", "danger-full-access", True, False),      # no sandbox: no helper
    ("/tmp", "workspace-write", False, False),        # its own bundled bwrap: no link needed
    ("/var/tmp/x", "workspace-write", True, False),   # CODEX_HOME not under it
    ("/tmp/teamctl/members/t/m/runtime/tmp", "workspace-write", True, False),  # teamctl's
    ("/tmp/teamctl", "workspace-write", True, True),
])
def test_the_helper_is_refused_only_under_the_temp_dir_with_a_system_bwrap_and_a_sandbox(
        bwrap_dir: Path, tmpdir: str, sandbox: str, with_bwrap: bool, refused: bool) -> None:
    """codex-rs arg0: the links are refused when CODEX_HOME starts with the temp dir; only a
    bwrap on PATH needs them; only a sandboxed profile runs through it."""
    env = {"TMPDIR": tmpdir, "PATH": str(bwrap_dir) if with_bwrap else "/nonexistent"}
    assert (helper_problem(HOME, env, sandbox) is not None) is refused
    helper = describe_helper(HOME, env, sandbox)["helper"] or ""
    assert helper.startswith("refused") is refused
