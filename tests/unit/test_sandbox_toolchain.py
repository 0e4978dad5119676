"""A sandboxed member's toolchain (runtimes/hosts/sandbox/plan.py ``toolchain``): what is bound
read-only so that its CLI, its ``#!`` interpreter and the tools on its PATH run inside —
version managers' shims included (issue 44, item 7) — and never a path picked through a name
the member can change. The layouts are tests/support/toolchains.py's; the real bubblewrap runs them
in tests/integration/test_sandbox_toolchain.py."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

import pytest

from runtimes.hosts.sandbox.plan import SandboxPolicy, manager_of, toolchain, writable_paths
from tests.support.toolchains import LAYOUTS

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.toolchains import Layout


def _policy(tmp_path: Path) -> SandboxPolicy:
    for name in ("operator", "work", "state/members/t/a"):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    return SandboxPolicy(workdir=tmp_path / "work", home=tmp_path / "operator",
                         runtime_home=tmp_path / "state" / "members" / "t" / "a")


def _cli(tmp_path: Path, program: str) -> Path:
    """The member's CLI: a script outside the home run by ``#!/usr/bin/env PROGRAM``."""
    cli = tmp_path / "opt" / "cli"
    cli.parent.mkdir(parents=True, exist_ok=True)
    cli.write_text(f"#!/usr/bin/env {program}\n")
    cli.chmod(0o755)
    return cli


def _in_home(found: tuple[Path, ...], home: Path) -> set[Path]:
    return {p for p in found if home in p.parents}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_a_version_managers_shim_brings_its_root_and_nothing_else_of_the_home(
        tmp_path: Path, name: str) -> None:
    """A CLI whose ``#!/usr/bin/env python3`` (or ``node``) is a version manager's shim on
    PATH: the manager's root is bound (its shims run its code, which reads its versions),
    with its global version file where that lives outside the root (asdf's and mise's
    ``~/.tool-versions``) and the program a mise shim links to; nothing else of the
    operator's home — not mise's ``config.toml`` (it may hold ``[env]`` secrets), not nvm's
    other versions or aliases (nvm has no shim: the version's own prefix is enough)."""
    policy = _policy(tmp_path)
    layout: Layout = LAYOUTS[name](policy.home)
    found = toolchain(str(_cli(tmp_path, layout.program)), f"{layout.path_dir}:/usr/bin",
                      policy=policy)
    expected = {layout.root, *layout.files}
    if name == "mise":
        expected.add(policy.home / ".local" / "bin" / "mise")
    assert _in_home(found, policy.home) == expected
    assert not {*layout.private} & set(found)


def test_the_manager_is_named_by_its_root(tmp_path: Path) -> None:
    """pyenv (``libexec/``), asdf and mise (``installs/``) are told apart by their roots, which
    doctor names in its fix; a ``shims`` directory of nothing known is no manager."""
    home = tmp_path / "operator"
    home.mkdir()
    for name in ("pyenv", "asdf", "mise"):
        layout = LAYOUTS[name](home)
        found = manager_of(str(layout.path_dir / "python3"), home=home)
        assert found is not None and (found.name, found.root) == (name, layout.root)
    (tmp_path / "tool" / "shims").mkdir(parents=True)
    assert manager_of(str(tmp_path / "tool" / "shims" / "python3"), home=home) is None


def test_a_shims_directory_in_the_home_itself_never_binds_the_home(tmp_path: Path) -> None:
    """``~/shims`` beside ``~/libexec``: its root would be the whole home (every dotfile the
    tmpfs hides) — not a manager, not bound."""
    policy = _policy(tmp_path)
    (policy.home / "libexec").mkdir()
    (policy.home / "shims").mkdir()
    assert manager_of(str(policy.home / "shims"), home=policy.home) is None
    found = toolchain("/usr/bin/true", f"{policy.home / 'shims'}:/usr/bin", policy=policy)
    assert policy.home not in found


def test_nothing_is_bound_through_a_name_the_member_can_change(tmp_path: Path) -> None:
    """The member's workdir (and runtime home) is its own: a script there whose ``#!`` names
    a secret, a PATH entry there that is a symlink to the operator's files, a link there that
    an executable outside is routed through — none picks a bind; the member's own paths are
    in its view as they are."""
    policy = _policy(tmp_path)
    secret = tmp_path / "secret"
    (secret / "bin").mkdir(parents=True)
    (secret / "bin" / "tool").write_text("")
    planted = policy.workdir / "run.sh"
    planted.write_text(f"#!{secret / 'bin' / 'tool'}\n")
    planted.chmod(0o755)
    (policy.workdir / "bin").symlink_to(secret / "bin")
    (policy.runtime_home / "via").symlink_to(secret)
    routed = tmp_path / "opt" / "routed"
    routed.parent.mkdir()
    routed.symlink_to(policy.runtime_home / "via" / "bin" / "tool")

    def secrets(found: tuple[Path, ...]) -> list[Path]:
        return [p for p in found if p == secret or secret in p.parents]

    for executable, path_env in ((planted, "/usr/bin"),
                                 ("/usr/bin/true", f"{policy.workdir / 'bin'}:/usr/bin"),
                                 (routed, "/usr/bin")):
        assert secrets(toolchain(str(executable), path_env)), "unguarded, each one reaches it"
        assert not secrets(toolchain(str(executable), path_env, policy=policy)), executable
    assert set(writable_paths(policy)) == {policy.workdir, policy.runtime_home}


def test_an_executable_that_is_a_fifo_never_blocks_the_toolchain(tmp_path: Path) -> None:
    """Reading a ``#!`` line opens the file without blocking and only a regular file is read:
    a FIFO in the executable's place (no writer will ever come) is no interpreter, at once."""
    fifo = tmp_path / "cli"
    os.mkfifo(fifo)
    done = threading.Event()
    found: list[tuple[Path, ...]] = []

    def run() -> None:
        found.append(toolchain(str(fifo), "/usr/bin"))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(10.0), "toolchain blocked on a FIFO"
    assert found == [(fifo,)]
