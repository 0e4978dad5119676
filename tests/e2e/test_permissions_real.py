"""Permission profiles with the real CLIs, the fake APIs scripted to write a file and run a
command (as protocols/teammates.md does): ``read`` writes nothing and the refusal shows in
history; ``edit`` writes inside the workdir; ``full`` writes anywhere."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.real_members import claude_member, codex_member, opencode_member

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.driver import Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the workdir and outside /tmp (codex's workspace-write sandbox
    keeps /tmp and $TMPDIR writable for builds)."""
    path = Path(tempfile.mkdtemp(prefix="teamctl-outside-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """Each e2e test's directory (its teamctl home, its workdirs) under /var/tmp, not /tmp:
    with a system bubblewrap present, Codex sandboxes commands with it and needs its helper
    links in CODEX_HOME, which it refuses to create under /tmp ("Refusing to create helper
    binaries under temporary dir") — every command of an edit or read member then fails with
    "bwrap: execvp codex-linux-sandbox". A member's CODEX_HOME is in the teamctl home
    (docs/runtimes.md, Codex). Only here: the other e2e tests run no command in
    codex's own sandbox, and the SSH ones want the long default path."""
    path = Path(tempfile.mkdtemp(prefix="teamctl-e2e-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


PROFILES = ("read", "edit", "full")
EXPECTED = {("read", "inside"): False, ("read", "outside"): False,
            ("edit", "inside"): True, ("edit", "outside"): False,
            ("full", "inside"): True, ("full", "outside"): True}


def _write_everywhere(teamctl: Teamctl, members: list[dict[str, object]], outside: Path
                      ) -> tuple[dict[tuple[str, str], bool], dict[tuple[str, str], str]]:
    """Launch one member per profile; each is asked to write inside its workdir and outside
    it. Which files exist afterwards, and each reply."""
    assert teamctl.run("launch", str(teamctl.write_team("e2e", members))).returncode == 0
    results, replies = {}, {}
    for name in PROFILES:
        for where in ("inside", "outside"):
            target = (teamctl.workdir if where == "inside" else outside) / f"{name}.txt"
            done = teamctl.run("send", name, f"DO_WRITE {target}", "--wait", "--timeout", "120")
            assert done.returncode == 0, done.stderr
            results[(name, where)], replies[(name, where)] = target.exists(), done.stdout
    return results, replies


def _notes(teamctl: Teamctl, member: str) -> list[str]:
    return [n for m in teamctl.json("history", member)["messages"] for n in m["notes"]]


def test_real_claude_profiles_read_edit_full(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic, outside: Path) -> None:
    members = [claude_member(name, claude_bin, anthropic, permissions=name) for name in PROFILES]
    results, _replies = _write_everywhere(teamctl, members, outside)
    assert results == EXPECTED, "edit is confined to the workdir"
    for name in PROFILES:
        bash_target = teamctl.workdir / f"{name}-bash.txt"
        done = teamctl.run("send", name, f"DO_BASH touch {bash_target}", "--wait",
                           "--timeout", "120")
        assert done.returncode == 0, done.stderr
        assert bash_target.exists() == (name != "read"), name
    notes = _notes(teamctl, "read")
    assert any(n.startswith("permission denied: Write") for n in notes), notes
    assert any(n.startswith("permission denied: Bash") for n in notes), notes
    edit_notes = _notes(teamctl, "edit")
    assert edit_notes and all(str(outside) in n for n in edit_notes), edit_notes
    assert _notes(teamctl, "full") == []


def test_real_codex_profiles_read_edit_full(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses, outside: Path) -> None:
    """The sandbox itself refuses: read-only writes nothing, workspace-write writes only in the
    workdir, full writes anywhere. (codex exec prints no item for a command the sandbox
    blocked: the refusal is what the model was told, here echoed in the reply.)"""
    members = [codex_member(name, codex_bin, responses, permissions=name) for name in PROFILES]
    results, replies = _write_everywhere(teamctl, members, outside)
    assert results == EXPECTED
    assert "Read-only file system" in replies[("read", "inside")]


def test_real_opencode_profiles_read_edit_full(
        teamctl: Teamctl, opencode_bin: Path, chat: FakeChat, outside: Path) -> None:
    """read: write is not offered (the call becomes the `invalid` tool) and a note says so;
    edit: inside the project only (external_directory = deny, never an unanswered question);
    full: anywhere."""
    members = [opencode_member(name, opencode_bin, chat, model="fake/text-model",
                               vision=False, permissions=name) for name in PROFILES]
    results, _replies = _write_everywhere(teamctl, members, outside)
    assert results == EXPECTED
    notes = _notes(teamctl, "read")
    assert notes and all(n.startswith("permission denied: ") for n in notes), notes
    assert len(_notes(teamctl, "edit")) == 1
