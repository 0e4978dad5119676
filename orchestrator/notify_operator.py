"""The operator's own notify file, ``TEAMCTL_HOME/notify.toml`` (0600): the secrets of
docs/notify.md that do not belong in a committed team file — the publish topic, the response
topic and the HMAC key of the action buttons. ``teamctl notify init`` writes it; the daemon
reads it when a team with ``[notify]`` starts. Standard library only (the CLI reads it too).
"""

from __future__ import annotations

import re
import secrets
import tomllib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.errors import UsageError
from orchestrator.paths import write_private

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.paths import Home

__all__ = ["FILE_NAME", "OperatorNotify", "generate", "operator_file", "read_operator",
           "write_operator"]

FILE_NAME = "notify.toml"
TOPIC_BYTES = 24  # 192 bits of randomness in a topic name (the issue asks for at least 128)
KEY_BYTES = 32
_TOPIC = re.compile(r"^[A-Za-z0-9_-]{22,64}$")  # ≥ 22 url-safe characters: ≥ 128 bits
_KEY = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class OperatorNotify:
    """``server``: the ntfy server the topics live on; ``topic``: where items are published;
    ``response_topic``: where the phone's buttons post (the daemon subscribes to it);
    ``key``: the HMAC-SHA256 key of the actions' tokens."""

    server: str
    topic: str
    response_topic: str
    key: bytes


def operator_file(home: Home) -> Path:
    return home.root / FILE_NAME


_SERVER = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]+(?:/[A-Za-z0-9._~%/\-]*)?")  # fullmatch


def generate(server: str) -> OperatorNotify:
    """New random topic names (``secrets.token_urlsafe``, 192 bits each) and a new key;
    UsageError when ``server`` is not a plain http(s) URL (it is written into the file)."""
    if not _SERVER.fullmatch(server):
        raise UsageError(f"--server {server!r} is not a plain http(s) URL (scheme, host, "
                         "optional port and path; no spaces, quotes or query), e.g. "
                         "https://ntfy.example")
    return OperatorNotify(server.rstrip("/"), "tc-" + secrets.token_urlsafe(TOPIC_BYTES),
                          "tc-" + secrets.token_urlsafe(TOPIC_BYTES),
                          secrets.token_bytes(KEY_BYTES))


def write_operator(home: Home, found: OperatorNotify) -> Path:
    """Write the file 0600, atomically (a crash leaves the old one or the new one)."""
    path = operator_file(home)
    text = (f'# teamctl notify init: keep this file private (0600); docs/notify.md\n'
            f'server = "{found.server}"\n'
            f'topic = "{found.topic}"\n'
            f'response_topic = "{found.response_topic}"\n'
            f'key = "{found.key.hex()}"\n')
    write_private(path, text.encode())
    return path


def read_operator(home: Home) -> OperatorNotify | None:
    """The file's settings; None when there is none; UsageError (saying the fix) when it is
    malformed or readable by others."""
    path = operator_file(home)
    try:
        mode = path.stat().st_mode & 0o777
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _malformed(path, str(exc)) from None
    if mode & 0o077:
        raise UsageError(f"{path} is readable by others (mode {mode:o}): it holds the "
                         f"notification topics and key; chmod 600 {path}")
    server, topic, response, key = (raw.get(k) for k in ("server", "topic", "response_topic",
                                                          "key"))
    if not (isinstance(server, str) and _SERVER.fullmatch(server)):
        raise _malformed(path, "server is not an http(s) URL")
    for name, value in (("topic", topic), ("response_topic", response)):
        if not (isinstance(value, str) and _TOPIC.match(value)):
            raise _malformed(path, f"{name} is not a random topic name of 22-64 characters")
    if not (isinstance(key, str) and _KEY.match(key)):
        raise _malformed(path, "key is not 64 hex digits")
    assert isinstance(topic, str) and isinstance(response, str)
    return OperatorNotify(server.rstrip("/"), topic, response, bytes.fromhex(key))


def _malformed(path: Path, why: str) -> UsageError:
    return UsageError(f"{path} is not a notify file teamctl can read ({why}); write a new one "
                      "with 'teamctl notify init --force'")
