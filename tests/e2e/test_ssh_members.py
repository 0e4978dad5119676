"""Members on another machine over SSH, against a real sshd on 127.0.0.1 (tests/sshd.py): a fake
runtime and the real CLIs answer as remote members; kill -9 of the local ssh and a stopped sshd
are survived (the message answered once); typed start failures; nothing left on the host."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from tests.conftest import FAKE_CLAUDE, fake_member
from tests.sshd import sshd

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.conftest import Teamctl
    from tests.sshd import Sshd

pytestmark = pytest.mark.e2e
DEADLINE = 30.0


@pytest.fixture
def box() -> Iterator[Sshd]:
    with sshd() as server:
        yield server


def remote_member(name: str, **extra: object) -> dict[str, object]:
    """A fake Claude member on the host, with a key of its own (the host has no login)."""
    return fake_member(name, host="box", login="isolated",
                       env={"ANTHROPIC_API_KEY": "sk-ant-remote-test-0000"}, **extra)


def _until(what: str, check: object) -> None:
    """Wait for ``check()`` with a deadline (process tables have no event to wait on)."""
    deadline = time.monotonic() + DEADLINE
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} within {DEADLINE}s"
        time.sleep(0.05)


def test_a_remote_member_answers_and_leaves_nothing_behind(teamctl: Teamctl,
                                                           box: Sshd) -> None:
    team = teamctl.write_team("web", [remote_member("far"), fake_member("near")],
                              hosts={"box": box.host()})
    launched = teamctl.run("launch", str(team))
    assert launched.returncode == 0, launched.stderr
    status = teamctl.json("status")["teams"][0]["members"]
    assert [(m["name"], m["host"], m["readiness"]) for m in status] == [
        ("far", "box", "ready"), ("near", None, "ready")]
    done = teamctl.run("send", "far", "hello over there", "--wait")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fake-claude (claude-sonnet-4-5) received: hello over there"
    remote = box.user_processes()
    assert any(str(FAKE_CLAUDE) in p for p in remote), remote
    assert teamctl.run("stop", "web").returncode == 0
    _until("no process of the host's user is left", lambda: not box.user_processes())
