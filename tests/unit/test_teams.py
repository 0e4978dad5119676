"""The teams operations, in process: resolution, whole-or-nothing sends, launch of a running
team, and recovery on daemon start."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from orchestrator.attachments.failures import AttachmentRefused
from orchestrator.config import TeamConfig
from orchestrator.daemon.journal import _team_records as team_records
from orchestrator.errors import AmbiguousTeam, NotFound, TeamAlreadyRunning
from orchestrator.ids import new_ulid
from tests.support import images
from tests.support.fakes import FakeRuntime, core, journal_at, team_config

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio


async def test_resolution_names_what_exists(tmp_path: Path) -> None:
    async with core(tmp_path) as c:
        with pytest.raises(NotFound, match="running teams: none"):
            c.teams.resolve(None)
        await c.teams.launch(team_config(tmp_path, {"name": "lead"}, {"name": "rev"}),
                             "a.toml", wait=True, timeout=10)
        assert c.teams.resolve(None).name == "web"
        with pytest.raises(NotFound, match="members: lead, rev"):
            c.teams.resolve_member(None, "nobody")
        await c.teams.launch(team_config(tmp_path, {"name": "lead"}, name="other"), "b.toml",
                             wait=True, timeout=10)
        with pytest.raises(AmbiguousTeam, match="web, other"):
            c.teams.resolve(None)
        with pytest.raises(NotFound, match="running teams: web, other"):
            c.teams.resolve("third")


async def test_a_refused_attachment_journals_nothing(tmp_path: Path) -> None:
    """Whole or nothing: one bad attachment refuses the message; no row is written."""
    async with core(tmp_path, FakeRuntime()) as c:
        await c.teams.launch(team_config(tmp_path, {"name": "lead", "model": "claude-sonnet-4-5"}),
                             "a.toml", wait=True, timeout=10)
        good = images.save(images.screenshot(200, 100), tmp_path / "good.png", "PNG")
        bad = tmp_path / "bad.png"
        bad.write_bytes(b"\x00\x01 not an image, not text")
        with pytest.raises(AttachmentRefused):
            await c.teams.send(None, "lead", "look", wait=False, timeout=1,
                               attachments=[str(good), str(bad)])
        assert (await c.teams.history(None, "lead")).messages == []


async def test_launching_a_running_team_again_reports_or_refuses(tmp_path: Path) -> None:
    async with core(tmp_path) as c:
        config = team_config(tmp_path, {"name": "lead"})
        await c.teams.launch(config, "a.toml", wait=True, timeout=10)
        again = await c.teams.launch(config, "a.toml", wait=True, timeout=10)
        assert again.already_running and not again.resumed
        changed = team_config(tmp_path, {"name": "lead", "model": "x"}, {"name": "rev"})
        with pytest.raises(TeamAlreadyRunning) as caught:
            await c.teams.launch(changed, "a.toml", wait=True, timeout=10)
        assert caught.value.details["differences"] == ["members added: rev",
                                                       "lead: model changed"]


async def test_a_relaunch_names_a_changed_section_never_takes_it_for_the_same_file(
        tmp_path: Path) -> None:
    """Only the members and ``[team]`` were compared: a file whose ``[board]`` changed was
    "already running" with the old board. Every section counts, named as the file names it."""
    async with core(tmp_path) as c:
        config = team_config(tmp_path, {"name": "lead"})
        await c.teams.launch(config, "a.toml", wait=True, timeout=10)
        changed = TeamConfig.model_validate({**config.model_dump(mode="json"),
                                             "board": {"check": "make test"}})
        with pytest.raises(TeamAlreadyRunning) as caught:
            await c.teams.launch(changed, "a.toml", wait=True, timeout=10)
        assert caught.value.details["differences"] == ["[board] changed"]


async def test_a_restarted_daemon_resumes_its_teams_and_redelivers(tmp_path: Path) -> None:
    """Recovery on daemon start: in-flight rows go back to the queue, the teams that should run
    start again, and the queue is delivered — an answered message is not touched."""
    (tmp_path / "home").mkdir()
    store = journal_at(tmp_path / "home" / "state.db")
    config = team_config(tmp_path, {"name": "lead"})
    team_records.save_team(store, "web", "a.toml", config.model_dump(mode="json"),
                           [("lead", "claude")])
    cut, waiting = new_ulid(), new_ulid()
    store.add_message(cut, "web", "cut by the crash", ["lead"])
    store.add_message(waiting, "web", "still queued", ["lead"])
    store.claim(cut, "lead")
    store.mark_sent(cut, "lead")  # ... and then the daemon was killed
    recovered = store.recover_in_flight()
    assert [(m, s) for m, _, s in recovered] == [(cut, "queued")]
    runtime = FakeRuntime()
    async with core(tmp_path, runtime, store=store) as c:
        assert await c.teams.resume_desired() == ["web"]
        outcomes = [await c.mailbox.wait_outcome(i, "lead", 10) for i in (cut, waiting)]
        assert [(o.state, o.attempts) for o in outcomes] == [("answered", 2), ("answered", 1)]
        assert [t.message_id for t in runtime.turns] == [cut, waiting]
