"""The operator's notify file (``TEAMCTL_HOME/notify.toml``): hostile or broken content is a
typed error that says the fix, never a silent default; the file is written 0600 and a server
given on the command line cannot write other keys into it."""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

import pytest

from orchestrator.errors import UsageError
from orchestrator.notify_operator import generate, operator_file, read_operator, write_operator
from orchestrator.paths import Home

if TYPE_CHECKING:
    from pathlib import Path


def test_init_writes_random_private_settings_that_read_back(tmp_path: Path) -> None:
    home = Home(tmp_path)
    made = generate("https://ntfy.example:8443/base")
    path = write_operator(home, made)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_operator(home) == made
    assert made.topic != made.response_topic and len(made.topic) >= 25


@pytest.mark.parametrize("server", [
    'https://x"\nkey = "00"', "https://x/ y", "ftp://x", "https://x?topic=y", "javascript:x",
    "https://x\r\nInjected: 1", "https://x\n", ""])
def test_a_server_that_is_not_a_plain_url_is_refused_before_anything_is_written(
        tmp_path: Path, server: str) -> None:
    with pytest.raises(UsageError, match="not a plain http"):
        generate(server)
    assert not operator_file(Home(tmp_path)).exists()


@pytest.mark.parametrize(("content", "why"), [
    ("server = \"https://n.example\"\n", "topic"),
    ("not toml [[[", "notify file"),
    ("server = \"https://n.example\"\ntopic = \"short\"\nresponse_topic = \"short\"\n"
     "key = \"00\"\n", "random topic name"),
    ("server = \"https://n.example\"\ntopic = \"" + "a" * 30 + "\"\nresponse_topic = \"" +
     "b" * 30 + "\"\nkey = \"zz\"\n", "64 hex"),
    ("\udcff".encode("utf-8", "surrogateescape").decode("latin-1"), "notify file"),
])
def test_a_malformed_file_is_a_usage_error_naming_the_fix(tmp_path: Path, content: str,
                                                         why: str) -> None:
    path = operator_file(Home(tmp_path))
    path.write_bytes(content.encode("latin-1", "replace"))
    path.chmod(0o600)
    with pytest.raises(UsageError, match=why) as info:
        read_operator(Home(tmp_path))
    assert "notify init --force" in info.value.message or "chmod" in info.value.message


def test_a_file_readable_by_others_is_refused_with_the_chmod(tmp_path: Path) -> None:
    home = Home(tmp_path)
    path = write_operator(home, generate("https://ntfy.example"))
    path.chmod(0o644)
    with pytest.raises(UsageError, match="chmod 600"):
        read_operator(home)
