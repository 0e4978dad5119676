"""The rest of a newcomer's first hour (issue 45, item 7), through a real daemon and the fake
CLIs: a launch that cannot notify is refused, ``--team`` found from a member's name, the hints
teamctl prints run as printed, ``doctor``'s lists, shell completion asked of the daemon."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.conftest import fake_member

if TYPE_CHECKING:
    from tests.conftest import Teamctl


def test_a_launch_whose_notify_cannot_start_is_refused_naming_notify_init(
        teamctl: Teamctl) -> None:
    """A ``[notify]`` with ntfy and no ``teamctl notify init`` was a log line while the team
    ran and nobody was told: the launch now exits 2 naming the command, starts no member
    and leaves no daemon behind; after ``notify init`` the same file launches."""
    path = teamctl.write_team("web", [fake_member("lead")])
    path.write_text(path.read_text() + "\n[notify]\nntfy = { server = \"http://127.0.0.1:9\" }\n")
    refused = teamctl.run("launch", str(path))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "teamctl notify init" in refused.stderr
    assert teamctl.run("status").returncode == 4, "the daemon the refused launch started stays"
    assert teamctl.run("notify", "init", "--server", "http://127.0.0.1:9").returncode == 0
    launched = teamctl.run("launch", str(path))
    assert launched.returncode == 0, launched.stderr
