"""The team files the README and docs/ show (tests/support/doc_examples.py), in process: each one —
those that need a cluster or a machine included, which tests/integration/test_doc_examples.py
cannot start — launched again while it runs, and again after a daemon restart resumed it, on
runtimes that change what they are handed as Codex's adapter does (issue 45)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest

from orchestrator.config import load_team_file
from orchestrator.runtime_table import RUNTIMES
from tests.support.doc_examples import Example, team_examples
from tests.support.fakes import FakeProcess, FakeRuntime, core, journal_at

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from orchestrator.contracts import LaunchSpec
    from tests.support.fakes import Core

pytestmark = pytest.mark.anyio

EXAMPLES = team_examples()


class DerivingRuntime(FakeRuntime):
    """A fake that adds to the member's ``config`` tables it is handed what it derives, as
    Codex's adapter sets ``features.multi_agent`` in the member's own ``features`` table."""

    @asynccontextmanager
    async def open(self, spec: LaunchSpec) -> AsyncIterator[FakeProcess]:
        features = spec.config.get("features")
        if isinstance(features, dict):
            features.setdefault("multi_agent", False)
        async with super().open(spec) as process:
            yield process


def test_the_docs_show_a_team_file_of_every_runtime_and_say_which_cannot_run_here() -> None:
    """The parser finds the examples (one that found none would pass everything below); the
    ones the fake CLIs run cover every runtime; each other one says why it cannot run here."""
    runnable = [e for e in EXAMPLES if e.offline is None]
    assert {m["runtime"] for e in runnable for m in e.doc["members"]} == \
        {r.name for r in RUNTIMES}
    assert any(e.source.startswith("README.md:") for e in runnable)
    elsewhere = [e for e in EXAMPLES if e.offline is not None]
    assert elsewhere and all("Kubernetes" in str(e.offline) for e in elsewhere)


@asynccontextmanager
async def _daemon(tmp_path: Path) -> AsyncIterator[Core]:
    """A daemon's core over the journal in ``tmp_path`` (one that ends and one that starts
    next share it), every runtime a ``DerivingRuntime``."""
    (tmp_path / "home").mkdir(exist_ok=True)
    runtime = DerivingRuntime()
    async with core(tmp_path, store=journal_at(tmp_path / "home" / "state.db"),
                    runtimes={r.name: runtime for r in RUNTIMES}) as c:
        yield c


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.source)
async def test_a_documented_team_file_launched_again_or_after_a_restart_has_nothing_to_do(
        tmp_path: Path, example: Example) -> None:
    """Compared with what the operator wrote, never with what a runtime derived: the same
    file is "already running", and after the daemon resumed it, "resumed"."""
    path = tmp_path / "team.toml"
    path.write_text(example.text)
    async with _daemon(tmp_path) as first:
        await first.teams.launch(load_team_file(path), str(path), wait=True, timeout=10)
        again = await first.teams.launch(load_team_file(path), str(path), wait=True,
                                         timeout=10)
        assert again.already_running and not again.resumed
    # the core's end stops the members and keeps the team wanted running, as a daemon's
    # SIGTERM does (and a kill -9 leaves it)
    async with _daemon(tmp_path) as restarted:
        assert await restarted.teams.resume_desired() == [example.doc["team"]["name"]]
        resumed = await restarted.teams.launch(load_team_file(path), str(path), wait=True,
                                               timeout=10)
        assert resumed.already_running and resumed.resumed
