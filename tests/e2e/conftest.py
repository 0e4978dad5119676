"""E2E fixtures: the real Claude Code CLI (installed by 'make e2e') and a fake Messages API."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.e2e.fake_anthropic import FakeAnthropic

if TYPE_CHECKING:
    from collections.abc import Iterator

CLAUDE_VERSION = "2.1.332"


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The pinned real CLI. Missing is a failure (run 'make e2e'), never a skip."""
    path = os.environ.get("TEAMCTL_E2E_CLAUDE") or str(
        Path(__file__).resolve().parents[2] / ".cache/e2e/claude/node_modules/.bin/claude"
    )
    assert Path(path).exists(), f"the real claude CLI is not installed at {path}: run 'make e2e'"
    return Path(path)


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as api:
        yield api


def claude_member(name: str, claude_bin: Path, api: FakeAnthropic, **extra: object) -> dict:
    member: dict[str, object] = {
        "name": name, "runtime": "claude", "model": "claude-sonnet-4-5",
        "command": str(claude_bin), "start_timeout": 60.0,
        "prompt": "You are the team's reviewer.",
        "env": {
            "ANTHROPIC_BASE_URL": api.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy-key-0000",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "DISABLE_TELEMETRY": "1",
        },
    }
    member.update(extra)
    return member
