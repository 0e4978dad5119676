"""The team file's sandbox and network keys (docs/security.md, "Sandbox"): their types and
checks, apart from config.py.

``sandbox = "none" | "process"``; ``sandbox_rw``, ``sandbox_ro``, ``sandbox_hide``: paths,
``~`` expanded to the operator's home, absolute after that, at most ``MAX_PATHS`` of
``MAX_PATH_CHARS`` each; ``network = "on" | "off" | "allowlist"`` and ``allow_hosts``:
``host[:port]`` patterns (a DNS name, ``*.`` in front for its subdomains, an IPv4 address or
a bracketed IPv6 one), at most ``MAX_HOSTS``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

__all__ = [
    "MAX_HOSTS",
    "MAX_PATHS",
    "MAX_PATH_CHARS",
    "HostPattern",
    "Network",
    "Sandbox",
    "SandboxPath",
    "check_host_pattern",
    "expand_path",
]

MAX_PATHS = 64
MAX_PATH_CHARS = 4096
MAX_HOSTS = 256

Sandbox = Literal["none", "process"]
Network = Literal["on", "off", "allowlist"]

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_NAME = re.compile(rf"(?:\*\.)?{_LABEL}(?:\.{_LABEL})*", re.ASCII)
_IPV4 = re.compile(r"(?:\d{1,3}\.){3}\d{1,3}", re.ASCII)
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]{2,45}\]", re.ASCII)


def expand_path(value: str) -> str:
    """``value`` with a leading ``~`` made the operator's home, normalized; ValueError unless
    it is absolute then (a relative path would depend on where the daemon runs)."""
    if len(value) > MAX_PATH_CHARS:
        raise ValueError(f"a path of at most {MAX_PATH_CHARS} characters")
    if value == "~" or value.startswith("~/"):
        value = str(Path(os.environ.get("HOME") or Path.home())) + value[1:]
    if not os.path.isabs(value):
        raise ValueError(f"{value!r} is not absolute; write /path or ~/path")
    return os.path.normpath(value)


def check_host_pattern(value: str) -> str:
    """``host[:port]``, lower-cased; ValueError naming what is wrong."""
    if not value or len(value) > 260:
        raise ValueError("a host of 1 to 260 characters, e.g. api.anthropic.com or "
                         "*.github.com:443")
    if "/" in value or "@" in value:
        raise ValueError(f"{value!r} is not host[:port] (no scheme, path or user: write "
                         "api.example.com or api.example.com:443)")
    host, port = value, ""
    if value.count(":") == 1 or (value.startswith("[") and "]:" in value):
        host, _, port = value.rpartition(":")
    if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise ValueError(f"{value!r}: the port must be a number from 1 to 65535")
    if not (_NAME.fullmatch(host) or _IPV4.fullmatch(host) or _IPV6.fullmatch(host)):
        raise ValueError(f"{value!r} is not host[:port] (a DNS name, *.name for its "
                         "subdomains, an IPv4 address or [an IPv6 one])")
    return value.lower()


SandboxPath = Annotated[str, AfterValidator(expand_path)]
SandboxPaths = Annotated[list[SandboxPath], Field(max_length=MAX_PATHS)]
HostPattern = Annotated[str, AfterValidator(check_host_pattern)]
HostPatterns = Annotated[list[HostPattern], Field(max_length=MAX_HOSTS)]
