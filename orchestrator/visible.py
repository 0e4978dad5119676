"""Text a member wrote, as the operator's terminal, page and phone show it: nothing in it can
move the cursor, set the title, write the clipboard, or reorder or hide the text around it.

A member's text — a reply, a teammate's message, an approval's command, a task's title — is
data, but a terminal takes some characters as orders: ESC starts a sequence (``ESC ] 52``
writes the clipboard, ``ESC ] 0`` the window title, ``ESC ] 8`` a link, ``ESC [ 8 m`` hides
what follows), CR and BS write over what was printed; on a page or a phone the bidi controls
(U+202E …) reorder what follows, and zero-width characters make two different texts look
alike. ``visible`` shows each such character as a mark and every other character as it is:

- a C0 control (U+0000–U+001F) as its Control Picture (U+2400 + its code): ESC ``␛``,
  CR ``␍``, BEL ``␇``, BS ``␈``, NUL ``␀``; DEL as ``␡``;
- anything else that acts or hides — the C1 controls (U+0080–U+009F), the bidi controls,
  zero-width and the other format characters (Unicode's category Cf; the two joiners, which
  join letters and emoji and hide nothing, aside), the line and paragraph separators, lone
  surrogates, and the Hangul fillers that print as nothing — as ``<U+XXXX>``.

Newline and tab stay (text keeps its lines); ``visible_line`` marks them too (``␊``, ``␉``)
for a value that must stay on its line: a table's cell, an approval's summary. Nothing is
dropped: each character becomes itself or one mark. ``clipped`` shows the first part of a
long value with ``… N more characters`` after it — never a silent cut. ``json_text`` writes a
``--json`` document whose strings carry the exact text, every such character as a ``\\u``
escape: a parser reads the same value, a terminal receives nothing it would act on.

Standard library only: the CLI imports it without pydantic.
"""

from __future__ import annotations

import functools
import json
import unicodedata
from typing import Any

__all__ = ["clipped", "is_hidden", "json_text", "visible", "visible_line"]

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_KEPT = frozenset("\n\t\u200c\u200d")  # newline, tab, and the joiners (ZWNJ, ZWJ)
# letters that print as nothing (str.isprintable() says they are printable)
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
_DEL = "\x7f"


def is_hidden(char: str) -> bool:
    """Whether ``char`` acts on a terminal or hides text where it is shown raw (newline and
    tab are not: ``visible_line`` marks them for a one-line value)."""
    if char in _KEPT:
        return False
    return char in _BLANK_LETTERS or unicodedata.category(char) in _HIDDEN_CATEGORIES


@functools.lru_cache(maxsize=4096)
def _mark(char: str) -> str:
    """``char`` itself, or the mark it is shown as."""
    if not is_hidden(char):
        return char
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)
    if char == _DEL:
        return "\u2421"
    return f"<U+{code:04X}>"


def _plain(text: str) -> bool:
    """True when ``text`` holds nothing to mark (checked at C speed: the usual case)."""
    return (text.replace("\n", " ").replace("\t", " ").isprintable()
            and not any(letter in text for letter in _BLANK_LETTERS))


def visible(text: str) -> str:
    """``text`` with every character that acts or hides shown as its mark; newlines and tabs
    kept. The identity on plain text."""
    if _plain(text):
        return text
    return "".join(map(_mark, text))


def visible_line(text: str) -> str:
    """``visible(text)`` on one line: newline shown as ``␊``, tab as ``␉``."""
    return visible(text).replace("\n", "\u240a").replace("\t", "\u2409")


def clipped(text: str, limit: int) -> str:
    """``text`` on one line (``visible_line``): whole when it has at most ``limit``
    characters, else its first ``limit`` and then ``… N more characters``."""
    if len(text) <= limit:
        return visible_line(text)
    return f"{visible_line(text[:limit])} … {len(text) - limit} more characters"


def _escaped(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a JSON \u escape names a UTF-16 unit: a surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON (non-ASCII text as itself), every character ``is_hidden`` names
    written as a ``\\u`` escape: the same value to a parser, nothing a terminal acts on."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    if _plain(text):
        return text
    return "".join(_escaped(c) if is_hidden(c) else c for c in text)
