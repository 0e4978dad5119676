"""E2E fixtures: the real CLIs (installed by 'make e2e') and the fake provider APIs. The member
builders on them are tests/support/real_members.py's."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_chat import FakeChat
from tests.support.fake_gemini import FakeGemini
from tests.support.fake_responses import FakeResponses
from tests.support.real_members import CACHE, installed

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path



@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The pinned real CLI. Missing is a failure (run 'make e2e'), never a skip."""
    return installed("TEAMCTL_E2E_CLAUDE", CACHE / "claude/node_modules/.bin/claude")


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return installed("TEAMCTL_E2E_CODEX", CACHE / "codex/node_modules/.bin/codex")


@pytest.fixture
def responses() -> Iterator[FakeResponses]:
    with FakeResponses() as api:
        yield api


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as api:
        yield api


@pytest.fixture(scope="session")
def opencode_bin() -> Path:
    return installed("TEAMCTL_E2E_OPENCODE", CACHE / "opencode/node_modules/.bin/opencode")


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    with FakeChat() as api:
        yield api


@pytest.fixture(scope="session")
def qwen_bin() -> Path:
    return installed("TEAMCTL_E2E_QWEN", CACHE / "qwen/node_modules/.bin/qwen")


@pytest.fixture(scope="session")
def gemini_bin() -> Path:
    return installed("TEAMCTL_E2E_GEMINI", CACHE / "gemini/node_modules/.bin/gemini")


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as api:
        yield api


