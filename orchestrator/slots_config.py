"""The team file's ``[team] slots`` (docs/operations.md, "A port and a database name of its
own"): the variables each member finds in its environment, holding values of its own — a TCP
port, a name for a database, an index such as a Redis database number — and their checks, apart
from config.py.

``slots = { PORT = "port", DB_NAME = "name", REDIS_DB = "index:0-15" }``: a variable name
(``[A-Z_][A-Z0-9_]*``, never one teamctl or a runtime sets: ``RESERVED_NAMES``,
``RESERVED_PREFIXES``) to its kind — ``port`` (``DEFAULT_PORTS``) or ``port:FIRST-LAST``
(1024–65535), ``name`` or ``name:PREFIX``, ``index:FIRST-LAST`` (0–2147483647). At most
``MAX_SLOTS``. Which value each member gets, and for how long: ``daemon/slots``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

__all__ = [
    "DEFAULT_PORTS",
    "INDEX_BOUNDS",
    "MAX_NAME_CHARS",
    "MAX_SLOTS",
    "PORT_BOUNDS",
    "RESERVED_NAMES",
    "RESERVED_PREFIXES",
    "SlotKind",
    "SlotSpec",
    "SlotVar",
    "Slots",
    "check_slot_var",
    "name_base",
    "parse_slot",
]

MAX_SLOTS = 16
DEFAULT_PORTS = (20000, 29999)
PORT_BOUNDS = (1024, 65535)  # below 1024 only root may listen
INDEX_BOUNDS = (0, 2**31 - 1)
MAX_NAME_CHARS = 63  # PostgreSQL's identifier limit (MySQL's is 64)

# what a member's environment gets from teamctl or its runtime: the inherited minimum
# (runtimes.kit.base.BASE_ENV_NAMES), what the adapters set, what changes how a program runs
RESERVED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "COLORTERM",
    "NO_COLOR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "SSL_CERT_FILE",
    "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "TMPDIR", "PWD", "OLDPWD",
    "IFS", "IS_SANDBOX", "ENABLE_TOOL_SEARCH", "PYTHONPATH", "PYTHONHOME", "NODE_OPTIONS",
    "NODE_PATH", "MAIL", "HOSTNAME", "DISPLAY", "EDITOR", "VISUAL", "PAGER",
})
RESERVED_PREFIXES = ("TEAMCTL_", "XDG_", "LC_", "LD_", "DYLD_", "GIT_", "SSH_", "CLAUDE_",
                     "CODEX_", "OPENCODE_", "ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_",
                     "QWEN_", "KUBERNETES_")

_VAR = re.compile(r"[A-Z_][A-Z0-9_]{0,63}", re.ASCII)
_RANGE = re.compile(r"([0-9]{1,10})-([0-9]{1,10})", re.ASCII)
_PREFIX = re.compile(r"[a-z][a-z0-9_]{0,31}", re.ASCII)
_KINDS = ('"port"', '"port:3000-3999"', '"name"', '"name:PREFIX"', '"index:0-15"')

Kind = Literal["port", "name", "index"]


@dataclass(frozen=True)
class SlotKind:
    """One slot's kind as parsed: a range of ports or of indexes (``first``..``last``), or a
    name (with its ``prefix``)."""

    kind: Kind
    first: int = 0
    last: int = 0
    prefix: str | None = None

    def holds(self, value: str) -> bool:
        """Whether ``value`` (as journaled) is one this kind gives: a number in its range (a
        name is checked by the daemon against the name it would make)."""
        if self.kind == "name":
            return True
        return value.isascii() and value.isdigit() and self.first <= int(value) <= self.last

    @property
    def size(self) -> int:
        return self.last - self.first + 1


def check_slot_var(name: str) -> str:
    """A slot's variable name; ValueError naming the fix."""
    if not _VAR.fullmatch(name):
        raise ValueError(f"{name[:80]!r} is not a variable name for slots: capitals, digits "
                         "and '_' (at most 64, not starting with a digit), e.g. PORT or "
                         "DB_NAME")
    if name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES):
        raise ValueError(f"{name} is set by teamctl or the member's runtime (reserved: "
                         f"{', '.join(p + '*' for p in RESERVED_PREFIXES[:4])}, PATH, HOME, "
                         "TMPDIR …); choose another name, e.g. APP_" + name.lstrip("_"))
    return name


def parse_slot(text: str) -> SlotKind:
    """``port``, ``port:A-B``, ``name``, ``name:PREFIX`` or ``index:A-B``; ValueError naming
    the fix."""
    kind, sep, rest = text.partition(":")
    if kind == "port":
        first, last = _range(rest, PORT_BOUNDS, "ports", "port:3000-3999") if sep \
            else DEFAULT_PORTS
        return SlotKind("port", first, last)
    if kind == "index":
        if not sep:
            raise ValueError("an index needs its range: index:FIRST-LAST, e.g. index:0-15")
        first, last = _range(rest, INDEX_BOUNDS, "indexes", "index:0-15")
        return SlotKind("index", first, last)
    if kind == "name":
        if sep and not _PREFIX.fullmatch(rest):
            raise ValueError(f"name:{rest[:40]!r}: a prefix is a lower-case letter, then "
                             "lower-case letters, digits and '_' (at most 32), e.g. name:test")
        return SlotKind("name", prefix=rest if sep else None)
    raise ValueError(f"{text[:40]!r} is not a kind of slot; use one of {', '.join(_KINDS)}")


def _range(text: str, bounds: tuple[int, int], what: str, example: str) -> tuple[int, int]:
    found = _RANGE.fullmatch(text)
    if not found:
        raise ValueError(f"{text[:40]!r} is not a range; write FIRST-LAST, e.g. {example}")
    first, last = int(found.group(1)), int(found.group(2))
    if first > last:
        raise ValueError(f"the range {first}-{last} runs backwards; write FIRST-LAST, e.g. "
                         f"{last}-{first}")
    if first < bounds[0] or last > bounds[1]:
        raise ValueError(f"{what} run from {bounds[0]} to {bounds[1]}; {first}-{last} goes past "
                         f"them (e.g. {example})")
    return first, last


def _checked(text: str) -> str:
    parse_slot(text)
    return text


def name_base(prefix: str | None, team: str, member: str) -> str:
    """The name a member's ``name`` slot is made from: ``[prefix_]team_member``, lower-cased,
    every character but a letter, digit or '_' made '_', a leading digit given a ``t`` (an
    unquoted SQL identifier starts with a letter); past ``MAX_NAME_CHARS`` cut, with a hash
    of the whole so two long names stay apart."""
    whole = "_".join(p for p in (prefix, team, member) if p)
    name = re.sub(r"[^a-z0-9_]", "_", whole.lower())
    if not name[:1].isalpha():
        name = "t" + name
    if len(name) > MAX_NAME_CHARS:
        digest = hashlib.sha256(whole.encode()).hexdigest()[:8]
        name = f"{name[:MAX_NAME_CHARS - 9]}_{digest}"
    return name


SlotVar = Annotated[str, AfterValidator(check_slot_var)]
SlotSpec = Annotated[str, Field(max_length=40), AfterValidator(_checked)]
Slots = Annotated[dict[SlotVar, SlotSpec], Field(max_length=MAX_SLOTS)]
