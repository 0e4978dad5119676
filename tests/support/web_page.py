"""The live view in process for its tests: a core with one member launched, the view built on
it and an ASGI client signed in through the one-time token as the browser is (``live_page``),
and the fake runtime with Claude's transport, which carries images."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx

from orchestrator.attachments.artifacts import ArtifactStore
from orchestrator.daemon.changes import Changes
from orchestrator.daemon.web.app import View, build_app
from runtimes.claude.runtime import ClaudeRuntime
from tests.support.fakes import FakeRuntime, core, team_config

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from tests.support.fakes import Core

PORT = 8765
ORIGIN = f"http://127.0.0.1:{PORT}"


class SeeingRuntime(FakeRuntime):
    """The fake runtime with Claude's transport: it carries images."""

    capabilities = ClaudeRuntime.capabilities


class Page:
    def __init__(self, c: Core, view: View, client: httpx.AsyncClient) -> None:
        self.core, self.view, self.client = c, view, client
        self.csrf = ""

    async def sign_in(self) -> None:
        token = self.view.sessions.new_token()
        response = await self.client.get(f"/?token={token}")
        assert response.status_code == 303
        cookie = response.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        page = await self.client.get("/")
        assert page.status_code == 200
        self.csrf = page.text.split('name="csrf-token" content="')[1].split('"')[0]

    async def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.client.post(url, headers={"x-csrf-token": self.csrf}, **kwargs)


@asynccontextmanager
async def live_page(tmp_path: Path, runtime: FakeRuntime | None = None, **member: Any
                ) -> AsyncIterator[Page]:
    async with core(tmp_path, runtime) as c:
        config = team_config(tmp_path, {"name": "lead", **member})
        await c.teams.launch(config, "team.toml", wait=True, timeout=10)
        uploads = tmp_path / "uploads"
        uploads.mkdir()
        view = View(c.teams, c.store, c.approvals, Changes(),
                    ArtifactStore(c.home.artifacts),
                    c.home.logs / "teamctl.jsonl", uploads)
        view.sessions.port = PORT
        transport = httpx.ASGITransport(app=build_app(view))
        async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
            yield Page(c, view, client)
