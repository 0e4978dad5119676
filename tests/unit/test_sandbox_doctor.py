"""What ``teamctl doctor TEAMFILE`` says when a sandboxed member's command runs here but not
inside its sandbox (runtimes/hosts/sandbox/doctor.py ``why_not_inside``): the fix is named from what
the command said there and what the sandbox shows — the path it runs that is not there, a
version manager's shim that found no version, a script whose directory is not bound, a
credential path it can never have. The real start inside is
tests/integration/test_sandbox_toolchain.py's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtimes.hosts.sandbox.doctor import why_not_inside
from runtimes.hosts.sandbox.plan import SandboxPolicy
from tests.support.toolchains import mise, pyenv

if TYPE_CHECKING:
    from pathlib import Path


def _policy(tmp_path: Path) -> SandboxPolicy:
    for name in ("operator/.ssh", "work", "rt"):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    return SandboxPolicy(workdir=tmp_path / "work", runtime_home=tmp_path / "rt",
                         home=tmp_path / "operator")


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_path_its_wrapper_runs_that_the_sandbox_does_not_show_is_named(
        tmp_path: Path) -> None:
    """The wrapper's own text names the program it execs; the fix binds its directory."""
    policy = _policy(tmp_path)
    real = _script(policy.home / ".tools" / "libexec" / "real", "#!/bin/sh\n")
    wrapper = _script(tmp_path / "bin" / "python3", f'#!/bin/sh\nexec {real} "$@"\n')
    cli = _script(tmp_path / "opt" / "cli", "#!/usr/bin/env python3\n")
    fix = why_not_inside(str(cli), f"{wrapper.parent}:/usr/bin", policy,
                         f"{wrapper}: 2: exec: {real}: not found")
    assert fix.startswith(f"its interpreter {wrapper} runs {real}, which its sandbox does not "
                          f"show: add sandbox_ro = [\"{real.parent}\"]"), fix


def test_a_mise_shim_that_finds_no_version_says_its_config_is_not_bound(
        tmp_path: Path) -> None:
    """mise's global config may hold ``[env]`` secrets, so it is never bound: a mise shim that
    finds no version inside is told to pin one in the workdir, or to run the interpreter
    itself (``mise which``)."""
    policy = _policy(tmp_path)
    layout = mise(policy.home)
    cli = _script(tmp_path / "opt" / "cli", "#!/usr/bin/env python3\n")
    fix = why_not_inside(str(cli), f"{layout.path_dir}:/usr/bin", policy,
                         "mise ERROR No version is set for shim: python3")
    assert fix.startswith(f"its interpreter {layout.path_dir / 'python3'} is a mise shim: "
                          "mise's global config (~/.config/mise/config.toml) is not bound")
    assert f'set command = ["<the output of `mise which python3`>", "{cli}"]' in fix


def test_a_pyenv_shim_without_a_version_inside_is_told_to_pin_one(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    layout = pyenv(policy.home)
    cli = _script(tmp_path / "opt" / "cli", "#!/usr/bin/env python3\n")
    fix = why_not_inside(str(cli), f"{layout.path_dir}:/usr/bin", policy,
                         "pyenv: version `3.9.1' is not installed (set by .python-version)")
    assert fix.startswith(f"its interpreter {layout.path_dir / 'python3'} is a pyenv shim: "
                          "it found no version inside: pin one in the workdir, or set command")


def test_a_script_that_loads_what_lies_beside_it_is_told_to_bind_its_directory(
        tmp_path: Path) -> None:
    """Only the executable file is bound: a Python script importing its siblings fails with
    no path in its error; the fix names its directory."""
    policy = _policy(tmp_path)
    cli = _script(tmp_path / "opt" / "bin" / "cli", "#!/bin/sh\n")
    fix = why_not_inside(str(cli), "/usr/bin", policy,
                         "ModuleNotFoundError: No module named 'helpers'")
    assert fix.startswith(f"only the file {cli} is bound, not {cli.parent}: ")
    assert f'sandbox_ro = ["{cli.parent}"]' in fix


def test_a_credential_path_it_reads_is_never_offered_as_a_bind(tmp_path: Path) -> None:
    """A command that fails reading the operator's ~/.ssh is not told to bind it: every
    sandbox hides it; the fix says so."""
    policy = _policy(tmp_path)
    key = policy.home / ".ssh" / "id_ed25519"
    key.write_text("key")
    cli = _script(tmp_path / "opt" / "cli", "#!/bin/sh\n")
    fix = why_not_inside(str(cli), "/usr/bin", policy, f"cannot open {key}: Permission denied")
    assert fix.startswith(f"{cli} reads {key}, which every sandbox hides (a credential path)")
    assert "sandbox_ro" not in fix
