"""The live view's routes (a Starlette app inside the daemon's event loop).

The page is server-rendered fragments, refreshed when the event stream (``/events``, server-sent
events) says the journal changed — the stream waits on ``Changes``, it never polls. Reads go
through the same ``Teams``/``Approvals`` objects as the control socket; a send goes through the
same planner (a refusal comes back as its typed lines). Images are served by content hash, and
only those the page has shown: a message's images and a document's first page image (never a
document's own bytes: a native PDF shows as a box, rendered nowhere in the browser). What the
routes show passes through the same redactor as every answer on the control socket
(``_redacted``). A form's body is counted as it streams and refused past its limit, whatever its
Content-Length says (chunked or not). Every
refusal, of every route (a refused send's typed failures, an unknown path, a bug's 500 too),
is one JSON shape: ``security.error_answer``.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio
import structlog
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.formparsers import FormParser, MultiPartException, MultiPartParser
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from orchestrator.attachments.failures import AttachmentRefused
from orchestrator.daemon.notify import waiting
from orchestrator.daemon.telemetry import TraceJournal, build_trace
from orchestrator.daemon.web import render
from orchestrator.daemon.web.security import (
    COOKIE,
    CSRF_HEADER,
    SECURITY_HEADERS,
    Refusal,
    Sessions,
    error_answer,
)
from orchestrator.daemon.web.waterfall import trace_panel
from orchestrator.errors import NotFound, TeamctlError, UsageError
from orchestrator.limits import (
    APPROVAL_SHA256_PATTERN,
    MAX_PAGE_ROWS,
    REQUEST_LIMIT_BYTES,
    ULID_PATTERN,
)
from orchestrator.protocol.common import OPERATOR, TEAMCTL
from orchestrator.redaction import redact_value

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable

    from starlette.requests import Request

    from orchestrator.attachments.artifacts import ArtifactStore
    from orchestrator.daemon.approvals import Approvals
    from orchestrator.daemon.board import Board
    from orchestrator.daemon.changes import Changes
    from orchestrator.daemon.land import Land
    from orchestrator.daemon.queue import AsyncStore
    from orchestrator.daemon.teams import Teams
    from orchestrator.protocol.board import TaskListDoc
    from orchestrator.protocol.messages import MessageDoc
    from orchestrator.protocol.quota import AccountsDoc
    from orchestrator.protocol.teams import MemberStatus

__all__ = ["MAX_TEXT_BYTES", "MAX_UPLOAD_BYTES", "View", "build_app"]

log = structlog.get_logger("teamctl.web")

MAX_UPLOAD_BYTES = 40 * 2**20  # a whole send form: the composer's files together
MAX_TEXT_BYTES = REQUEST_LIMIT_BYTES  # a message's text: what `teamctl send` may send
MAX_SMALL_FORM_BYTES = 64 * 1024  # an approval's answer, a sign-in
_Doc = TypeVar("_Doc", bound=BaseModel)
STATIC = Path(__file__).parent / "static"
_STATIC_TYPES = {"app.js": "text/javascript", "app.css": "text/css"}
HEARTBEAT = 15.0
_SHA256 = re.compile(APPROVAL_SHA256_PATTERN)
_ULID = re.compile(ULID_PATTERN)


@dataclass
class View:
    """What the routes read and change."""

    teams: Teams
    store: AsyncStore
    approvals: Approvals
    changes: Changes
    artifacts: ArtifactStore
    log_path: Path
    uploads: Path
    sessions: Sessions = field(default_factory=Sessions)
    shown: set[str] = field(default_factory=set)  # artifact hashes of messages on the page
    board: Board | None = None  # the team's board (None: a daemon without one)
    land: Land | None = None  # the merge queue (docs/land.md), shown under each board
    # the quota's accounts (teamctl accounts; None: a daemon without one)
    accounts: Callable[[], AccountsDoc] | None = None


def _guarded(view: View, handler: Callable[[Request], Awaitable[Response]], *,
             changes_state: bool = False) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            view.sessions.check_host(request.headers.get("host"))
            session = request.cookies.get(COOKIE)
            view.sessions.csrf_of(session)
            if changes_state:
                view.sessions.check_csrf(session, request.headers.get(CSRF_HEADER))
            response = await handler(request)
        except Refusal as exc:
            response = exc.response()
        except AttachmentRefused as exc:
            response = error_answer(422, exc.code, exc.message, retryable=exc.retryable,
                                    failures=[f.to_json() for f in exc.failures])
        except TeamctlError as exc:
            response = error_answer(_status_of(exc), exc.code, exc.message,
                                    retryable=exc.retryable)
        response.headers.update(SECURITY_HEADERS)
        return response

    return endpoint


def _status_of(exc: TeamctlError) -> int:
    if isinstance(exc, NotFound):
        return 404
    return 400 if isinstance(exc, UsageError) else 409  # e.g. approval_settled


async def _no_route(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (an unknown path, a wrong method), in the view's one shape."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "usage_error")
    response = error_answer(status, code, f"no {request.method} {request.url.path} here: "
                                          "the live view is at /")
    response.headers.update(SECURITY_HEADERS)
    return response


async def _bug(request: Request, exc: Exception) -> Response:
    """An exception no route expected: a bug. It fails this request only, typed."""
    log.error("ui_request_failed", path=request.url.path, error=type(exc).__name__)
    response = error_answer(500, "internal_error",
                            f"internal error while serving {request.url.path}: "
                            f"{type(exc).__name__}; see 'teamctl logs' (a bug in teamctl)")
    response.headers.update(SECURITY_HEADERS)
    return response


def build_app(view: View) -> Starlette:
    async def index(request: Request) -> Response:
        try:
            view.sessions.check_host(request.headers.get("host"))
            token = request.query_params.get("token")
            if token is not None:
                response: Response = _with_session(view, token,
                                                   RedirectResponse("/", status_code=303))
            else:
                csrf = view.sessions.csrf_of(request.cookies.get(COOKIE))
                response = HTMLResponse(render.page(csrf, await _member_names(view)))
        except Refusal as exc:
            response = exc.response()
        response.headers.update(SECURITY_HEADERS)
        return response

    async def sign_in(request: Request) -> Response:
        """The one-time token POSTed by the sign-in file `teamctl ui --open` writes (never in
        a URL there: a browser's argv is readable by every local user). The answer sends the
        page on with a same-site navigation, so the SameSite=Strict cookie goes with it."""
        try:
            view.sessions.check_host(request.headers.get("host"))
            form = await _form(request, MAX_SMALL_FORM_BYTES, max_files=0, max_fields=1)
            response: Response = _with_session(view, str(form.get("token") or ""),
                                               HTMLResponse(render.signed_in()))
        except Refusal as exc:
            response = exc.response()
        response.headers.update(SECURITY_HEADERS)
        return response

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC_TYPES:
            raise Refusal(404, f"no static file {name!r}", code="not_found")
        return Response((STATIC / name).read_bytes(), media_type=_STATIC_TYPES[name])

    async def needs_you(request: Request) -> Response:
        # what the notifier pushes is read by the same call (docs/notify.md)
        now = await waiting(None, teams=view.teams, approvals=view.approvals, board=None,
                            most=MAX_PAGE_ROWS)
        failed = [(m.name, message) for team, m in now.members
                  for message in await _history(view, team, m.name, 20)
                  if message.state == "failed"]
        return HTMLResponse(render.needs_you(now.approvals, [m for _, m in now.alarms],
                                             failed))

    async def members(request: Request) -> Response:
        rows = await _members(view)
        db = view.store
        turns: dict[str, str] = {}
        for _, m in rows:
            delivery = await db.delivery(m.turn, m.name) if m.turn else None
            if m.turn and delivery is not None:
                turns[m.turn] = delivery.state
        branches = {(t.team, t.member): t.branch
                    for t in await db.worktrees(None)}
        return HTMLResponse(render.members(rows, turns, branches))

    async def accounts(request: Request) -> Response:
        if view.accounts is None:
            return HTMLResponse("")
        return HTMLResponse(render.accounts(_redacted(view.accounts())))

    async def conversation(request: Request) -> Response:
        wanted = request.query_params.get("member")
        rows = await _members(view)
        chosen = next(((t, m) for t, m in rows if f"{t}/{m.name}" == wanted or
                       m.name == wanted), rows[0] if rows else None)
        if chosen is None:
            return HTMLResponse(render.conversation(None, []))
        team, member = chosen
        messages = await _history(view, team, member.name, 30)
        view.shown.update(render.shown_artifacts(messages))
        return HTMLResponse(render.conversation(member.name, messages))

    async def between(request: Request) -> Response:
        found = {m.id: m for team, member in await _members(view)
                 for m in await _history(view, team, member.name, 30)
                 if m.sender not in (OPERATOR, TEAMCTL)}
        return HTMLResponse(render.between([found[k] for k in sorted(found)][-50:]))

    async def board(request: Request) -> Response:
        if view.board is None:
            return HTMLResponse(render.board([]))
        teams = sorted({team for team, _ in await _members(view)})
        queues = {team: _redacted(await view.land.queue(team)) for team in teams} \
            if view.land is not None else {}
        return HTMLResponse(render.board([(team, await _columns(view.board, team))
                                          for team in teams], queues))

    async def task(request: Request) -> Response:
        wanted = request.query_params.get("id", "")
        if view.board is None or not wanted.isdigit() or len(wanted) > 18:
            return HTMLResponse(render.task_page(None, [], None))
        try:
            shown = _redacted(await view.board.get(int(wanted)))
        except NotFound:  # gone with its journal, or a hand-typed id
            return HTMLResponse(render.task_page(None, [], None))
        team, owner = shown.task.team, shown.task.owner
        messages = [m for member in await _member_names_of(view, team)
                    for m in await _history(view, team, member, 50)
                    if m.task_id == shown.task.id]
        trees = {(t.team, t.member) for t in await view.store.worktrees(None)}
        diff = f"teamctl diff --team {team} {owner}" if (team, owner) in trees else None
        return HTMLResponse(render.task_page(shown, messages, diff))

    async def trace(request: Request) -> Response:
        wanted = request.query_params.get("id", "")
        if not _ULID.fullmatch(wanted):
            return HTMLResponse(trace_panel(None))
        rows = await TraceJournal(view.store).rows(wanted)
        doc = None if rows is None else _redacted(build_trace(rows))
        return HTMLResponse(trace_panel(doc))

    async def log_tail(request: Request) -> Response:
        from orchestrator import diagnostics

        events = await anyio.to_thread.run_sync(_tail_events, view.log_path)
        return HTMLResponse(render.log_tail([diagnostics.format_event(e)
                                             for e in events[-40:]]))

    async def artifact(request: Request) -> Response:
        digest = request.path_params["sha256"]
        if digest not in view.shown:
            raise Refusal(404, "not an attachment of a message this page shows",
                          code="not_found")
        data = await anyio.to_thread.run_sync(view.artifacts.get, digest)
        return Response(data, media_type=_sniff(data),
                        headers={"cache-control": "private, max-age=86400, immutable"})

    async def events(request: Request) -> Response:
        session = request.cookies.get(COOKIE)

        async def stream() -> AsyncIterator[bytes]:
            seen = view.changes.version
            yield f"event: change\ndata: {seen}\n\n".encode()
            while True:
                version = await view.changes.wait(seen, HEARTBEAT)
                try:
                    view.sessions.csrf_of(session)  # an expired session's stream ends
                except Refusal:
                    return
                if version == seen:
                    yield b": heartbeat\n\n"
                    continue
                seen = version
                yield f"event: change\ndata: {version}\n\n".encode()

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"x-accel-buffering": "no"})

    async def decide(request: Request) -> Response:
        approval_id, verb = request.path_params["id"], request.path_params["verb"]
        form = await _form(request, MAX_SMALL_FORM_BYTES, max_files=0, max_fields=5)
        text = str(form.get("text") or "") or None
        message = str(form.get("message") or "") or None
        if verb not in ("approve", "deny", "answer"):
            raise Refusal(404, f"no action {verb!r}: approve, deny or answer", code="not_found")
        if verb == "answer" and not text:
            raise Refusal(400, "an answer needs text: write it in the field", code="usage_error")
        sha256 = request.query_params.get("sha256") or None  # the request the page showed
        if sha256 is not None and not _SHA256.fullmatch(sha256):
            raise Refusal(400, "sha256 is 8 to 64 hex digits: the request's, as the page shows "
                               "it", code="usage_error")
        doc = await view.approvals.decide(approval_id, verb, message=message, text=text,
                                          always=request.query_params.get("always") == "1",
                                          sha256=sha256)
        return JSONResponse(doc.model_dump())

    async def send(request: Request) -> Response:
        length = request.headers.get("content-length") or "0"
        if not length.isdigit() or int(length) > MAX_UPLOAD_BYTES:  # early, when it says so
            raise _upload_too_large()
        form = await _form(request, MAX_UPLOAD_BYTES, max_files=16, max_fields=10)
        try:
            return await _send_form(view, form)
        finally:
            await form.close()

    def route(path: str, handler: Callable[[Request], Awaitable[Response]],
              methods: list[str] | None = None) -> Route:
        changes_state = bool(methods and "POST" in methods)
        return Route(path, _guarded(view, handler, changes_state=changes_state),
                     methods=methods or ["GET"])

    return Starlette(exception_handlers={HTTPException: _no_route, Exception: _bug}, routes=[
        Route("/", index),
        Route("/signin", sign_in, methods=["POST"]),
        route("/static/{name}", static),
        route("/fragments/needs-you", needs_you),
        route("/fragments/members", members),
        route("/fragments/accounts", accounts),
        route("/fragments/conversation", conversation),
        route("/fragments/between", between),
        route("/fragments/board", board),
        route("/fragments/task", task),
        route("/fragments/trace", trace),
        route("/fragments/log", log_tail),
        route("/artifacts/{sha256:str}", artifact),
        route("/events", events),
        route("/approvals/{id}/{verb}", decide, ["POST"]),
        route("/send", send, ["POST"]),
    ])


def _with_session(view: View, token: str, response: Response) -> Response:
    """``response`` with the session cookie a valid one-time ``token`` becomes (403 if not)."""
    session, _csrf = view.sessions.redeem(token)
    response.set_cookie(COOKIE, session, httponly=True, samesite="strict", path="/")
    return response


class _TooLarge(Exception):
    """The body passed its limit while it streamed."""


def _upload_too_large() -> Refusal:
    return Refusal(413, f"the upload is over {MAX_UPLOAD_BYTES} bytes; at most "
                        f"{MAX_UPLOAD_BYTES} bytes go in one message", code="request_too_large")


async def _form(request: Request, limit: int, *, max_files: int, max_fields: int) -> FormData:
    """The request's form, its body counted as it streams (a Content-Length is a claim, and a
    chunked body has none): past ``limit`` bytes, or a field past the text limit of `teamctl
    send` (``MAX_TEXT_BYTES``), it is refused with a 413 and nothing is kept."""

    async def body() -> AsyncGenerator[bytes, None]:
        total = 0
        async for chunk in request.stream():
            total += len(chunk)
            if total > limit:
                raise _TooLarge
            yield chunk

    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    stream = body()
    try:
        if kind == "multipart/form-data":
            return await MultiPartParser(request.headers, stream, max_files=max_files,
                                         max_fields=max_fields,
                                         max_part_size=MAX_TEXT_BYTES).parse()
        if kind == "application/x-www-form-urlencoded":
            return await FormParser(request.headers, stream, max_fields=max_fields,
                                    max_part_size=MAX_TEXT_BYTES).parse()
    except _TooLarge:
        raise (_upload_too_large() if limit == MAX_UPLOAD_BYTES else Refusal(
            413, f"this form is at most {limit} bytes", code="request_too_large")) from None
    except MultiPartException as exc:
        if "maximum size" in exc.message:
            raise Refusal(413, f"a message's text is at most {MAX_TEXT_BYTES // 2**20} MiB, "
                               "as teamctl send takes it; put long text in a file the member "
                               "can read and send its path instead",
                          code="request_too_large") from None
        raise Refusal(400, f"a malformed form: {exc.message}", code="usage_error") from None
    finally:
        await stream.aclose()
    return FormData()


async def _send_form(view: View, form: FormData) -> Response:
    """One composer form: its files (images, PDFs, text files: the planner sniffs each) to
    0600 files, then the same planner as `send`."""
    target, text = str(form.get("member") or ""), str(form.get("text") or "")
    team, _, member = target.rpartition("/")
    if not member or not text:
        raise Refusal(400, "pick a member and write a message", code="usage_error")
    paths: list[str] = []
    with tempfile.TemporaryDirectory(dir=view.uploads) as tmp:
        for index, upload in enumerate(form.getlist("files")):
            if isinstance(upload, str) or not upload.filename:
                continue
            folder = Path(tmp) / f"{index:02d}"  # the planner names files by their name
            folder.mkdir(mode=0o700)
            path = folder / (Path(upload.filename).name[:100] or "upload")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(await upload.read())
            paths.append(str(path))
        result = await view.teams.send(team or None, member, text, wait=False,
                                       timeout=60.0, attachments=paths,
                                       dry_run=form.get("preview") == "1")
    return JSONResponse(result.model_dump())


def _tail_events(path: Path, max_bytes: int = 64 * 1024) -> list[dict[str, object]]:
    """The last events of the log: its last ``max_bytes`` only (the page refreshes often and
    the log grows; reading all of it each time made the daemon's memory grow with it)."""
    import json

    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - max_bytes))
            lines = f.read().split(b"\n")[1:]
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _redacted(doc: _Doc) -> _Doc:
    """``doc`` as the control socket would answer it: through the one redactor."""
    return type(doc).model_validate(redact_value(doc.model_dump(mode="json")))


async def _history(view: View, team: str, member: str, limit: int) -> list[MessageDoc]:
    return _redacted(await view.teams.history(team, member, limit=limit)).messages


async def _members(view: View) -> list[tuple[str, MemberStatus]]:
    status = _redacted(await view.teams.status(None))
    return [(team.name, member) for team in status.teams for member in team.members]


async def _member_names_of(view: View, team: str) -> list[str]:
    return [m.name for t, m in await _members(view) if t == team]


_BOARD_ROWS = 50  # a column shows its first tasks and how many more


async def _columns(board: Board, team: str) -> dict[str, TaskListDoc]:
    return {state: _redacted(await board.listing(team, state=state, limit=_BOARD_ROWS))
            for state in ("ready", "blocked", "in_progress", "review", "done")}


async def _member_names(view: View) -> list[str]:
    return [f"{team}/{m.name}" for team, m in await _members(view)]


def _sniff(data: bytes) -> str:
    from orchestrator.attachments.sniff import sniff

    mime = sniff(data[:64]).mime
    return mime if mime.startswith("image/") else "application/octet-stream"
