"""The board in the live view (in process: the ASGI app over the daemon's core, a real
journal): a column per state with a blocked task's blockers, a task's page with its lifetime,
its messages and its diff, a change on the board bumps the change feed the page listens to,
and hostile titles, bodies and notes never reach the page raw."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from orchestrator.attachments.artifacts import ArtifactStore
from orchestrator.daemon.board import OPERATOR
from orchestrator.daemon.board._service import Actor
from orchestrator.daemon.web.app import View, build_app
from tests.support.fakes import core, team_config

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

PORT = 8765
ORIGIN = f"http://127.0.0.1:{PORT}"
HOSTILE = ['<script>alert(1)</script>', '"><img src=x onerror=alert(1)>', "it's & <u>x</u>",
           "abc\u202edcba txt.exe", "zero\u2066width\u2069 \u200f"]


async def test_the_board_column_and_a_tasks_page_escape_every_hostile_text(
        tmp_path: Path) -> None:
    async with core(tmp_path) as c:
        assert c.built is not None
        board = c.built.board
        await c.teams.launch(team_config(tmp_path, {"name": "dev"}, {"name": "ops"}), "t.toml",
                             wait=True, timeout=10)
        uploads = tmp_path / "uploads"
        uploads.mkdir()
        view = View(c.teams, c.store, c.approvals, c.built.changes,
                    ArtifactStore(c.home.artifacts), c.home.logs / "teamctl.jsonl", uploads,
                    board=board)
        view.sessions.port = PORT
        before = c.built.changes.version
        tasks = [await board.create("web", title, body=f"body {title}\n{HOSTILE[0]}",
                                    created_by=OPERATOR) for title in HOSTILE]
        assert c.built.changes.version > before, "a board change bumps the page's feed"
        blocked = await board.create("web", "ship", blocked_by=[tasks[0].id, tasks[1].id],
                                     created_by=OPERATOR)
        epoch = c.supervisor.member("web", "dev").epoch
        await board.claim("web", "dev", epoch=epoch, task_id=tasks[2].id)
        await board.update(tasks[2].id, by=Actor("dev"), note=f"note {HOSTILE[1]}")
        token = c.supervisor.member("web", "dev").token
        assert token is not None
        await c.router.send_message(token, "ops", f"about it {HOSTILE[0]}")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(view)),
                                     base_url=ORIGIN) as client:
            signed = await client.get(f"/?token={view.sessions.new_token()}")
            assert signed.status_code == 303
            page = await client.get("/")
            assert 'data-fragment="/fragments/board"' in page.text
            column = (await client.get("/fragments/board")).text
            shown = (await client.get(f"/fragments/task?id={tasks[2].id}")).text
            missing = (await client.get("/fragments/task?id=999999")).text
            junk = await client.get("/fragments/task?id=1%3Cscript%3E")
    for html in (column, shown):
        assert "<script>" not in html and "<img" not in html and "<u>" not in html
        assert "\u202e" not in html and "\u2066" not in html and "\u200f" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in column
    assert "abc&lt;U+202E&gt;dcba txt.exe" in column
    assert f'data-key="task:{blocked.id}" data-state="blocked"' in column
    assert f"blocked by T{tasks[0].id} (pending), T{tasks[1].id} (pending)" in column
    assert "<h3>ready (4)</h3>" in column and "<h3>in progress (1)</h3>" in column
    assert "note &quot;&gt;&lt;img" in shown, "the lifetime's notes, escaped"
    assert "claimed" in shown and "updated" in shown
    assert "about it &lt;script&gt;" in shown, "the message sent while holding it"
    assert "pick a task" in missing and junk.status_code == 200 and "pick a task" in junk.text


async def test_the_board_shows_the_merge_queue_and_a_tasks_notices_escaped(
        tmp_path: Path) -> None:
    """Under each board, its merge queue (docs/land.md): the entries with their state and
    what happened — a conflict in a file named like markup shown escaped — and a task's page
    lists the notices told about it and to whom."""
    from pathlib import Path as RealPath

    from orchestrator.daemon.board._service import Assignee
    from tests.support.land import commit_in, integrating_team, land_repo, settled_entry

    repo = land_repo(tmp_path / "repo")
    hostile = '<img src=x onerror=alert(1)>.txt'
    async with core(tmp_path) as c:
        assert c.built is not None
        board, land = c.built.board, c.built.land
        await c.teams.launch(integrating_team(repo, "a", "b"), "t.toml", wait=True,
                             timeout=10)
        trees = {m: RealPath(c.supervisor.member("web", m).workdir) for m in ("a", "b")}
        t1 = await board.create("web", "one", created_by=OPERATOR, assignee=Assignee("a", 1))
        t2 = await board.create("web", "two", created_by=OPERATOR, assignee=Assignee("b", 1))
        commit_in(trees["a"], hostile, "a\n")
        commit_in(trees["b"], hostile, "b\n")
        await board.complete(t1.id, by=Actor("a"), summary="s", team="web")
        assert (await settled_entry(c, t1.id)).state == "landed"
        await board.complete(t2.id, by=Actor("b"), summary="s", team="web")
        assert (await settled_entry(c, t2.id)).state == "sent_back"
        uploads = tmp_path / "uploads"
        uploads.mkdir()
        view = View(c.teams, c.store, c.approvals, c.built.changes,
                    ArtifactStore(c.home.artifacts), c.home.logs / "teamctl.jsonl", uploads,
                    board=board, land=land)
        view.sessions.port = PORT
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(view)),
                                     base_url=ORIGIN) as client:
            await client.get(f"/?token={view.sessions.new_token()}")
            column = (await client.get("/fragments/board")).text
            shown = (await client.get(f"/fragments/task?id={t2.id}")).text
    assert "Merge queue → teamctl/web/main" in column
    assert f'data-task-link="{t1.id}">T{t1.id}</a> a <span class="state">landed' in column
    assert 'data-state="sent_back"' in column
    assert "<img" not in column and "&lt;img src=x onerror=alert(1)&gt;.txt" in column
    assert "<h3>Told</h3>" in shown and "integration → <b>b</b>" in shown
