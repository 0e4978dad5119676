"""The one redactor: every log event and every error shown passes through it.

It removes what must never reach a log or a terminal: image data (data URLs, long base64
runs) and secrets of every shape it knows — Anthropic (``sk-ant-``, OAuth ``sk-ant-oat``),
OpenRouter, OpenAI-style ``sk-`` keys, bearer and basic credentials, Authorization and
``x-api-key`` header values, ``*_API_KEY=`` / ``*_TOKEN=`` / ``*_SECRET=`` / ``*_PASSWORD=``
assignments, GitHub, GitLab, Slack, npm, Hugging Face and Google API tokens, AWS access key
ids, JWTs, PEM private keys and the password in ``scheme://user:password@host`` URLs — and
every literal value registered with ``add_secrets`` (the values of members' credential
variables), whatever its shape. In a mapping, the value of a key named like a credential is
replaced whole. It is deliberately greedy: a false positive costs a few characters of a
diagnostic, a false negative leaks a key. It redacts values, though, never teamctl's own words:
where a credential's name is followed by a placeholder (``ANTHROPIC_API_KEY=...``), a home path,
or a Secret's name (``secret = "claude-key"``), or is itself a file's name in a path
(``~/.aws/credentials: Permission denied``), the text stays as written — the fix teamctl
prints must read as what to type (issue 45).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["REDACTED", "add_secrets", "redact", "redact_value", "secret_name"]

REDACTED = "[REDACTED]"

# Where a credential's name is followed by something that is not its value, the words stay:
# teamctl's own fix text (``ANTHROPIC_API_KEY=...``, ``secret = "claude-key"``, which names a
# Kubernetes Secret) and paths (``~/.aws/credentials: Permission denied``).
_NAME_ENDS = "|".join(f"(?<={word})" for word in (
    "_KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS"))
_ASSIGNMENT = re.compile(
    rf"(?i)\b([A-Z0-9_]*+(?:{_NAME_ENDS}))(\"?\s*[:=]\s*\"?)[^\s\"',}}]+")
# what teamctl tells the operator to write in place of a secret: ..., …, <your token>, $NAME
_PLACEHOLDER = re.compile(r"(?:\.{3}|…)[.…]*|<[^<>\n]{1,40}>|\$\{?[A-Z_][A-Z0-9_]*\}?")
_HOME_PATH = re.compile(r"~/[\w.@%+/-]*")
_VALUE_CHAR = re.compile(r"[^\s\"',}]")  # what the value of an assignment is made of
# a [hosts.NAME] table's ``secret`` names a Secret object (an RFC 1123 label: config.py)
_SECRET_OBJECT = re.compile(r'[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"')


def _assigned(match: re.Match[str]) -> str:
    """``NAME=value`` with the value redacted, or the text as it is where what follows the
    name is no value: a placeholder, a path, a Secret's name, or a name inside a path."""
    text, name_at, value_at = match.string, match.start(1), match.end(2)
    if _in_path(text, name_at) or _not_a_value(text, value_at) or (
            match.group(1) == "secret" and match.group(2) == ' = "'
            and _SECRET_OBJECT.match(text, value_at)):
        return match.group(0)
    return match.group(1) + match.group(2) + REDACTED


def _in_path(text: str, at: int) -> bool:
    """The name at ``at`` is a file's name (``~/.aws/credentials``, ``~/.git-credentials``)."""
    before = text[at - 1] if at else " "
    if before in "/.":
        return True
    if before != "-":  # X-Auth-Token is a header's name; .git-credentials a file's
        return False
    start = max(text.rfind(c, 0, at) for c in " \t\n\"'(=,[") + 1
    return "/" in text[start:at]


def _not_a_value(text: str, at: int) -> bool:
    """What follows ``NAME=`` at ``at`` is a placeholder or a home path, whole: no secret."""
    found = _PLACEHOLDER.match(text, at) or _HOME_PATH.match(text, at)
    if found is None:
        return False
    end = found.end()
    return end == len(text) or not _VALUE_CHAR.match(text, end)

# (pattern, replacement, guards). A pattern runs only if the lowercased text holds one of its
# guards (None: always) — most strings hold no secret, and the scan is then a few substring
# tests. Order matters: the most specific patterns run first so their label survives.
_PATTERNS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str],
                      tuple[str, ...] | None], ...] = (
    (re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w=.+-]+)*,[A-Za-z0-9+/=%_-]*"), "data:[REDACTED]",
     ("data:",)),
    (re.compile(r"(?i)\b(authorization|proxy-authorization)(\"?\s*[:=]\s*\"?)"
                r"(?:(?:bearer|basic|token)\s+)?[^\s\"',}]+"),
     r"\1\2" + REDACTED, ("authorization",)),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + REDACTED,
     ("bearer", "basic")),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
                re.DOTALL), "[PRIVATE KEY REDACTED]", ("private key",)),
    # a name ending like a credential (matched possessively: no quadratic backtracking on long
    # runs of name characters), then = or :, then the value — unless it is no value (_assigned)
    (_ASSIGNMENT, _assigned, ("key", "token", "secret", "passw", "credential")),
    (re.compile(r"\b([a-z][a-z0-9+.-]*://[^/\s:@]+):[^/\s@]+@"), r"\1:" + REDACTED + "@",
     ("://",)),
    (re.compile(r"(?i)\b(x-api-key)(\"?\s*[:=]\s*\"?)[^\s\"',}]+"), r"\1\2" + REDACTED,
     ("x-api-key",)),
    (re.compile(r"sk-ant-[A-Za-z0-9_-]{4,}"), "sk-ant-" + REDACTED, ("sk-ant-",)),
    (re.compile(r"sk-or-v1-[A-Za-z0-9_-]{4,}"), "sk-or-v1-" + REDACTED, ("sk-or-v1-",)),
    (re.compile(r"sk-[A-Za-z0-9_-]{8,}"), "sk-" + REDACTED, ("sk-",)),
    (re.compile(r"\b(?:gh[pousr]_|github_pat_|glpat-|npm_|hf_)[A-Za-z0-9_-]{12,}"), REDACTED,
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "npm_", "hf_")),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9_-]{10,}"), REDACTED, ("xox",)),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), REDACTED, ("aiza",)),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED, ("akia", "asia")),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), REDACTED,
     ("eyj",)),
    # Long base64 runs (image bytes). 80+ characters keeps sha256 hex digests (64) readable.
    (re.compile(r"[A-Za-z0-9+/]{80,}={0,2}"), "[BASE64 REDACTED]", None),
)
_BASE64_MIN_CHARS = 80
_GUARDS = tuple({g for _, _, guards in _PATTERNS for g in guards or ()})


_SECRET_NAME_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH",
                      "COOKIE")
_MIN_SECRET_CHARS = 6
_literals: set[str] = set()
_literal_pattern: re.Pattern[str] | None = None
_generation = 0  # bumped by add_secrets: what was redacted before is looked at again
# names, states and ids recur on every log event: short texts are redacted once per generation
_CACHED_CHARS = 64
_SCALARS = frozenset({int, float, bool})


@functools.lru_cache(maxsize=4096)
def secret_name(name: str) -> bool:
    """True for a variable or field name that says it holds a credential."""
    upper = name.upper()
    return any(word in upper for word in _SECRET_NAME_WORDS)


def add_secrets(values: Iterable[str]) -> None:
    """Register literal secrets (e.g. a member's credential variables): redacted from now on,
    whatever their shape. Values shorter than 6 characters are ignored (too common)."""
    global _literal_pattern, _generation
    fresh = {v for v in values if len(v) >= _MIN_SECRET_CHARS} - _literals
    if not fresh:
        return
    _literals.update(fresh)
    ordered = sorted(_literals, key=len, reverse=True)  # longest first: no partial leftovers
    _literal_pattern = re.compile("|".join(re.escape(v) for v in ordered))
    _generation += 1
    _redact_short.cache_clear()


def redact(text: str) -> str:
    """Return ``text`` with every secret and every run of image data replaced."""
    if len(text) <= _CACHED_CHARS:
        return _redact_short(text, _generation)
    return _redact(text)


# names, states and event keys recur; ids and timestamps never do, and would fill a big cache
# with entries never asked for again (8,192 of them held 0.8 MiB of a 100-member daemon)
@functools.lru_cache(maxsize=1024)
def _redact_short(text: str, _generation: int) -> str:
    """``_redact`` of a short text, remembered; the generation is part of the key, so a result
    computed before a secret was added is never served after."""
    return _redact(text)


def _redact(text: str) -> str:
    if _literal_pattern is not None:
        text = _literal_pattern.sub(REDACTED, text)
    lowered = text.lower()
    present = {guard for guard in _GUARDS if guard in lowered}
    for pattern, replacement, guards in _PATTERNS:
        if guards is None:
            if len(text) < _BASE64_MIN_CHARS:
                continue
        elif present.isdisjoint(guards):
            continue
        text = pattern.sub(replacement, text)
    return text


def redact_value(value: Any) -> Any:
    """Redact strings anywhere inside a JSON-like value (dicts, lists, tuples); in a mapping,
    a string under a credential-like key is replaced whole."""
    if isinstance(value, str):
        return redact(value)
    if value is None or type(value) in _SCALARS:  # most of a log event: no ABC check
        return value
    if isinstance(value, Mapping):
        return {k: REDACTED if isinstance(v, str) and v and isinstance(k, str)
                and secret_name(k) else redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value
