"""A team pointed at the fake ntfy server (tests/support/ntfy_fake.py): ``notify init`` against
it with short waits, and a team file launched with a ``[notify]`` section."""

from __future__ import annotations

import tomllib
from typing import TYPE_CHECKING, Any

from tests.support.driver import toml_value

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.ntfy_fake import FakeNtfy


TEAM = "web"


# reconnects in tenths of a second; refused posts counted in logged fifths of a second
SHORT_WAITS = {"TEAMCTL_NOTIFY_BACKOFF": "0.05,0.2", "TEAMCTL_NOTIFY_REFUSED_INTERVAL": "0.2"}


def setup_notify(teamctl: Teamctl, ntfy: FakeNtfy, **notify: Any) -> dict[str, Any]:
    """``notify init`` against the fake server; the operator file's settings."""
    teamctl.env.update(SHORT_WAITS)
    done = teamctl.run("notify", "init", "--server", ntfy.url)
    assert done.returncode == 0, done.stderr
    path = teamctl.home / "notify.toml"
    assert path.stat().st_mode & 0o777 == 0o600
    return tomllib.loads(path.read_text())


def launch_notifying(teamctl: Teamctl, *members: dict[str, Any], board: str = "",
                     check: bool = True, **notify: Any) -> Path:
    path = teamctl.write_team(TEAM, list(members))
    section = {"ntfy": {}, **notify}
    path.write_text(path.read_text() + board + "\n[notify]\n" + "".join(
        f"{k} = {toml_value(v)}\n" for k, v in section.items()))
    done = teamctl.run("launch", str(path), "--timeout", "30")
    assert done.returncode == 0 or not check, done.stdout + done.stderr
    return path
