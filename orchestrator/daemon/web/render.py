"""The live view's HTML, server-rendered: the page shell and one fragment per panel. Every value
is escaped here; nothing is a template language's job (no dependency, no build step). Every
value is also shown visibly (orchestrator/visible.py): a control, bidi or zero-width character
a member wrote is a mark on the page (``<U+202E>``, ``␛``), so nothing can reorder or hide the
text around it — an approval's command least of all. An approval's row shows the first part of
its command with ``… N more characters``, the whole one in its detail, and the short sha256 of
the exact request, which its buttons send back (a decision applies to that request or to none).

Every row a fragment lists carries a stable ``data-key`` (an approval's id, a member's
team/name, a message's id): the page patches its panels by these keys (static/app.js), so a
row that stays is never re-created — the text typed in its field, the focus and the caret stay
with it."""

from __future__ import annotations

import time
from html import escape
from typing import TYPE_CHECKING

from orchestrator.costs.text import cost_text, lower_bound_note
from orchestrator.limits import APPROVAL_SHA256_SHOWN, APPROVAL_SHOWN_CHARS
from orchestrator.visible import clipped, visible

if TYPE_CHECKING:
    from collections.abc import Mapping

    from orchestrator.protocol.approvals import ApprovalDoc
    from orchestrator.protocol.board import TaskDoc, TaskListDoc, TaskShowDoc
    from orchestrator.protocol.land import QueueDoc
    from orchestrator.protocol.messages import AttachmentRef, MessageDoc
    from orchestrator.protocol.quota import AccountDoc, AccountsDoc
    from orchestrator.protocol.teams import MemberStatus

__all__ = ["accounts", "between", "board", "conversation", "log_tail", "members", "needs_you",
           "page", "shown_artifacts", "signed_in", "task_page"]

_ALARM = {"fatal", "backoff"}


def _e(value: object) -> str:
    """A value on the page: its control, bidi and format characters shown as marks, then
    HTML-escaped."""
    return escape(visible("" if value is None else str(value)), quote=True)


# what the composer's file picker offers: images, PDFs and text files (the daemon sniffs each
# by its bytes, whatever it is called; this only narrows the picker)
ACCEPT = ("image/*,application/pdf,.pdf,text/*,.txt,.md,.markdown,.csv,.tsv,.json,.log,.yaml,"
          ".yml,.toml,.xml,.py,.js,.ts,.go,.rs,.java,.c,.h,.cpp,.sh,.sql,.diff,.patch")


def page(csrf: str, member_names: list[str]) -> str:
    options = "".join(f'<option value="{_e(n)}">{_e(n)}</option>' for n in member_names)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="{_e(csrf)}">
<title>teamctl</title><link rel="stylesheet" href="/static/app.css">
<script src="/static/app.js" defer></script></head>
<body>
<header><h1>teamctl</h1><span id="stream" data-state="connecting">connecting…</span>
<span id="action-result" role="alert"></span></header>
<main>
<section id="needs-you" data-fragment="/fragments/needs-you" aria-live="polite"></section>
<section id="members" data-fragment="/fragments/members"></section>
<section id="accounts" data-fragment="/fragments/accounts"></section>
<section id="composer">
<h2>Send</h2>
<form id="send-form">
<label>to <select name="member" id="send-member">{options}</select></label>
<textarea name="text" id="send-text" rows="3"
 placeholder="message (paste or drop images, PDFs, text files)" required></textarea>
<input type="file" name="files" id="send-files" accept="{_e(ACCEPT)}" multiple>
<button type="submit" id="send-button">Send</button>
<button type="button" id="preview-button">Preview</button>
</form>
<div id="send-result" role="status"></div>
</section>
<section id="board" data-fragment="/fragments/board"></section>
<section id="task" data-fragment="/fragments/task"></section>
<section id="conversation" data-fragment="/fragments/conversation"></section>
<section id="trace" data-fragment="/fragments/trace"></section>
<section id="between" data-fragment="/fragments/between"></section>
<section id="log" data-fragment="/fragments/log"></section>
</main></body></html>"""


def signed_in() -> str:
    """After a POSTed sign-in: on to the page by a navigation of this origin's own (a cross-site
    redirect would leave the SameSite=Strict cookie behind)."""
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta http-equiv="refresh" content="0;url=/"><title>teamctl</title></head>'
            '<body><p>Signed in. <a href="/">Open the live view</a>.</p></body></html>')


def needs_you(approvals: list[ApprovalDoc], alarms: list[MemberStatus],
              failed: list[tuple[str, MessageDoc]]) -> str:
    rows = [_approval(row) for row in approvals]
    rows += [f'<li class="alarm" data-key="alarm:{_e(member.name)}" '
             f'data-member="{_e(member.name)}"><b>{_e(member.name)}'
             f'</b> is <span class="launch">{_e(member.launch)}</span>'
             f'{": " + _e(member.error) if member.error else ""}</li>' for member in alarms
             if not member.hold]
    rows += [f'<li class="held" data-key="held:{_e(member.name)}" '
             f'data-member="{_e(member.name)}"><b>{_e(member.name)}</b> is '
             f'paused — <span class="hold">{_e(member.hold)}</span>, {member.queued} queued'
             + (f' (<code>teamctl budget {_e(member.name)} --add USD</code>)'
                if "budget reached" in member.hold else "") + "</li>"
             for member in alarms if member.hold]
    for name, message in failed:
        error = message.error
        rows.append(f'<li class="failed" data-key="failed:{_e(message.id)}"><b>{_e(name)}</b>: '
                    f'message {_e(message.id)} failed'
                    f' — {_e(error.code if error else "")}: {_e(error.message if error else "")}'
                    '</li>')
    body = "".join(rows) or '<li class="calm" data-key="calm">nothing waits on you</li>'
    return f"<h2>Needs you</h2><ul>{body}</ul>"


def _approval(row: ApprovalDoc) -> str:
    """A request that waits: what it asks (its first part, ``… N more characters``), its
    whole text in a detail when that is more, its short sha256, and the buttons — each
    bound to the request shown by its sha256."""
    text = row.summary if row.kind == "permission" else " | ".join(row.questions) or row.summary
    what = (f"{_e(clipped(row.tool, 60))}: " if row.kind == "permission" else "question: ") \
        + _e(clipped(text, APPROVAL_SHOWN_CHARS))
    whole = (f'<details class="whole"><summary>the whole request ({len(text):,} characters)'
             f'</summary><pre>{_e(text)}</pre></details>'
             if len(text) > APPROVAL_SHOWN_CHARS or "\n" in text else "")
    sha = (f' <code class="sha256" title="{_e(row.sha256)}">sha256 '
           f"{_e(row.sha256[:APPROVAL_SHA256_SHOWN])}</code>" if row.sha256 else "")
    bound = f"sha256={_e(row.sha256)}" if row.sha256 else ""
    base = f"/approvals/{_e(row.id)}"
    controls = (
        f'<form class="answer" data-action="{base}/answer?{bound}">'
        '<input name="text" required placeholder="your answer"><button>Answer</button>'
        '</form>' if row.kind == "question" else
        f'<button data-post="{base}/approve?{bound}">Approve</button>'
        f'<button data-post="{base}/approve?always=1&amp;{bound}">Always</button>'
        f'<form class="deny" data-action="{base}/deny?{bound}">'
        '<input name="message" placeholder="why (the model sees it)">'
        '<button>Deny</button></form>')
    return (f'<li class="approval" id="{_e(row.id)}" data-key="{_e(row.id)}" '
            f'data-member="{_e(row.member)}">'
            f'<b>{_e(row.member)}</b> ({_e(row.runtime)}) asks — {what}{sha} '
            f'<time>{_e(time.strftime("%H:%M:%S", time.localtime(row.asked_at)))}'
            f'</time> {controls}{whole}</li>')


def members(rows: list[tuple[str, MemberStatus]], turns: dict[str, str],
            branches: dict[tuple[str, str], str]) -> str:
    """``turns``: the delivery state of each turn in flight; ``branches``: worktree branches."""
    cells = []
    for team, m in rows:
        cls = "alarm" if m.launch in _ALARM else ""
        turn = (f'<span class="turn">{_e(m.turn[-6:])} {_e(turns.get(m.turn, ""))}</span>'
                if m.turn else "")
        branch = branches.get((team, m.name), "")
        cells.append(
            f'<tr class="{cls}" data-key="member:{_e(team)}/{_e(m.name)}" '
            f'data-member="{_e(m.name)}"><td class="who">{_e(team)}/{_e(m.name)}</td>'
            f"<td data-label=\"runtime\">{_e(m.runtime)}{_e(' @' + m.host if m.host else '')}"
            f"{_e(_sandbox(m))}</td>"
            f'<td data-label="model">{_e(m.model)}</td>'
            f'<td class="launch" data-label="launch">{_e(m.launch)}</td>'
            f'<td data-label="liveness">{_e(m.liveness)}</td>'
            f'<td class="readiness" data-label="readiness">{_e(m.readiness)}</td>'
            f'<td class="delivery" data-label="turn">{turn}</td>'
            f'<td data-label="activity">{_e(m.waiting or m.activity or "")}</td>'
            f'<td data-label="queued">{m.queued}</td>'
            f'<td data-label="restarts">{m.restarts}</td>'
            f'<td class="cost" data-label="cost">{_e(_cost(m))}</td>'
            f'<td data-label="worktree">{_e(branch)}</td>'
            f'<td class="slots" data-label="slots">{_e(_slots(m))}</td>'
            f'<td><a href="#conversation" data-member-link="{_e(m.name)}">conversation</a>'
            "</td></tr>")
    head = ("<tr><th>member</th><th>runtime</th><th>model</th><th>launch</th>"
            "<th>liveness</th><th>readiness</th><th>turn</th><th>activity</th>"
            "<th>queued</th><th>restarts</th><th>cost</th><th>worktree</th><th>slots</th>"
            "<th></th></tr>")
    body = "".join(cells) or '<tr><td colspan="14">no team runs</td></tr>'
    notes = "".join(f'<p class="note">{_e(team)}/{_e(m.name)}: {_e(note)}</p>'
                    for team, m in rows if m.spend is not None
                    and (note := lower_bound_note(m.spend.model_dump())))
    return f"<h2>Team</h2><table>{head}{body}</table>{notes}"


def accounts(doc: AccountsDoc) -> str:
    """Each quota account (docs/costs.md, "Quota windows"): its window's use, its hold with a
    countdown to the reset (``data-until``: the page ticks it), and who is paused why."""
    rows = [_account(a, doc.now) for a in doc.accounts]
    body = "".join(rows) or '<li data-key="no-accounts">no account reported yet</li>'
    return f'<h2>Accounts</h2><ul class="accounts">{body}</ul>'


def _account(account: AccountDoc, now: float) -> str:
    window, held = account.window, account.held
    used = ("nothing reported yet" if window is None else
            f"{(window.window or 'usage').replace('_', '-')} window "
            + (f"{round(window.used * 100)}% used" if window.used is not None else "")
            + f" ({window.status})")
    resets = (_countdown(window.resets_at, now, "resets")
              if window is not None and window.resets_at else "")
    hold = (f' <span class="hold">held{_countdown(held.until, now, "until")}'
            + ("" if held.named else ", then one member tries it") + "</span>"
            if held is not None else "")
    paused = "".join(f'<li data-key="paused:{_e(m.team)}/{_e(m.member)}">{_e(m.team)}/'
                     f'{_e(m.member)}: {_e(m.paused)}</li>'
                     for m in account.members if m.paused)
    members = ", ".join(f"{m.team}/{m.member}" for m in account.members)
    return (f'<li data-key="account:{_e(account.name)}"><b>{_e(account.name)}</b> '
            f'({_e(members)}): {_e(used)}{resets}{hold}'
            + (f"<ul>{paused}</ul>" if paused else "") + "</li>")


def _countdown(at: float, now: float, word: str) -> str:
    """``until 15:34 <time data-until=…>(in 12m 3s)</time>``: the page ticks the time."""
    left = max(int(at - now), 0)
    hours, rest = divmod(left, 3600)
    span = f"{hours}h {rest // 60}m" if hours else f"{rest // 60}m {rest % 60}s"
    return (f' {word} {_e(time.strftime("%H:%M", time.localtime(at)))} '
            f'<time data-until="{at:.0f}">(in {_e(span)})</time>')


def _sandbox(m: MemberStatus) -> str:
    """`` [sandbox process, network off; egress 12 allowed, 1 denied]`` (as ``status`` says
    it), or nothing for a member without one."""
    if not m.sandbox:
        return ""
    egress = (f"; egress {m.egress.allowed} allowed, {m.egress.denied} denied"
              if m.egress is not None else "")
    return f" [sandbox {m.sandbox}{egress}]"


def _slots(m: MemberStatus) -> str:
    """``PORT=20001 DB_NAME=web_lead`` (as ``status`` says it), or nothing."""
    return " ".join(f"{var}={value}" for var, value in m.slots.items())


def _cost(member: MemberStatus) -> str:
    return "" if member.spend is None else cost_text(member.spend.model_dump())


def conversation(member: str | None, messages: list[MessageDoc]) -> str:
    if member is None:
        return "<h2>Conversation</h2><p>no member</p>"
    items = []
    for message in messages:
        thumbs = "".join(_attachment(a) for a in message.attachments)
        notes = "".join(f'<p class="note">{_e(n)}</p>' for n in message.notes)
        reply = f'<p class="reply">{_e(message.reply)}</p>' if message.reply else ""
        error = (f'<p class="error">{_e(message.error.code)}: {_e(message.error.message)}</p>'
                 if message.error else "")
        items.append(
            f'<li class="message" id="m-{_e(message.id)}" data-key="m-{_e(message.id)}" '
            f'data-state="{_e(message.state)}">'
            f"<p><b>{_e(message.sender)}</b> → {_e(message.to)} "
            f'<span class="state">{_e(message.state)}</span> attempts {message.attempts}'
            f'{" depth " + str(message.depth) if message.depth else ""} '
            f'<a href="#trace" data-trace-link="{_e(message.id)}">trace</a></p>'
            f'<p class="text">{_e(message.text)}</p>{thumbs}{reply}{notes}{error}</li>')
    body = "".join(items) or "<li>no messages yet</li>"
    return (f'<h2>Conversation with {_e(member)}</h2>'
            f'<ol data-key="conversation:{_e(member)}" data-member="{_e(member)}">{body}</ol>')


def shown_artifacts(messages: list[MessageDoc]) -> set[str]:
    """The artifacts ``conversation`` shows of ``messages`` (the only ones /artifacts serves):
    each image, and a document's first page image — never a document's own bytes."""
    shown = set()
    for message in messages:
        for a in message.attachments:
            if a.kind == "image":
                shown.add(a.sha256)
            elif a.page_variants:
                shown.add(a.page_variants[0].sha256)
    return shown


def _attachment(a: AttachmentRef) -> str:
    """An image as its thumbnail; a document as its first page's thumbnail when its pages
    were rendered, else a box (nothing rendered in the browser): name, pages, route."""
    if a.kind == "image":
        return (f'<figure><img class="thumb" src="/artifacts/{_e(a.sha256)}" alt="{_e(a.name)}"'
                f' width="{min(a.width, 240)}"><figcaption>{_e(a.name)} {a.width}×{a.height} '
                f"{_e(a.mime)}, {_e(a.cli_transform or 'as sent')} (passed the vision gate)"
                "</figcaption></figure>")
    label = f"[Doc #{a.number}]"
    if a.pages is None:  # a text file: the text as sent, its size
        what = f"text, {a.bytes or 0:,} bytes"
    else:
        what = f"PDF, {a.pages} page{'s' * (a.pages != 1)}"
    route = {"native": "sent as the document itself",
             "pages": f"sent as {len(a.page_variants)} page image"
                      f"{'s' * (len(a.page_variants) != 1)} and its text",
             "text": "sent as its text"}.get(a.route or "", _e(a.route))
    if a.page_variants:
        first = a.page_variants[0]
        face = (f'<img class="thumb" src="/artifacts/{_e(first.sha256)}" '
                f'alt="{_e(a.name)}, page 1" width="{min(first.width, 160)}">')
    else:
        face = f'<span class="doc-icon">{"PDF" if a.pages is not None else "TXT"}</span>'
    return (f'<figure class="document" data-route="{_e(a.route)}">{face}<figcaption>'
            f"{_e(label)} {_e(a.name)} — {_e(what)}, {_e(route)}</figcaption></figure>")


def between(messages: list[MessageDoc]) -> str:
    """Teammates' messages to each other, newest last: who → whom, chain depth, state."""
    items = [f'<li data-key="m-{_e(m.id)}" data-chain="{_e(m.chain_id)}"><b>{_e(m.sender)}'
             f'</b> → <b>{_e(m.to)}</b>'
             f'{" (reply)" if m.kind == "reply" else ""} depth {m.depth} '
             f'<span class="state">{_e(m.state)}</span>: {_e(clipped(m.text, 300))}</li>'
             for m in messages]
    body = "".join(items) or "<li>no messages between teammates yet</li>"
    return f"<h2>Between teammates</h2><ol>{body}</ol>"


def log_tail(lines: list[str]) -> str:
    return "<h2>Log</h2><pre>" + _e("\n".join(lines)) + "</pre>"



# -- the board (docs/board.md) ------------------------------------------------------------------

_COLUMNS = (("ready", "ready"), ("blocked", "blocked"), ("in_progress", "in progress"),
            ("review", "review"), ("done", "done"))


def board(pages: list[tuple[str, dict[str, TaskListDoc]]],
          queues: Mapping[str, QueueDoc] | None = None) -> str:
    """Each running team's board: a column per state (its first tasks and how many), a
    blocked task with what blocks it, and its merge queue (what waits, runs, landed or went
    back); every title escaped."""
    teams = []
    for team, columns in pages:
        cells = []
        for state, label in _COLUMNS:
            page = columns[state]
            rows = "".join(_task_row(t) for t in page.tasks)
            more = (f'<li class="more" data-key="more:{_e(state)}">… {page.total - len(page.tasks)}'
                    " more (teamctl task list)</li>" if page.total > len(page.tasks) else "")
            cells.append(f'<div class="column" data-key="col:{_e(team)}/{state}">'
                         f"<h3>{label} ({page.total})</h3><ul>{rows}{more}</ul></div>")
        queue = (queues or {}).get(team)
        teams.append(f'<div class="board" data-key="board:{_e(team)}"><h3>{_e(team)}</h3>'
                     f'{"".join(cells)}{_queue(team, queue) if queue else ""}</div>')
    body = "".join(teams) or "<p>no team runs</p>"
    return f"<h2>Board</h2>{body}"


def _queue(team: str, queue: QueueDoc) -> str:
    """The team's merge queue under its board (nothing when it has none)."""
    if queue.branch is None:
        return ""
    rows = [*([queue.running] if queue.running else []), *queue.waiting[:20],
            *queue.recent[:10]]
    items = "".join(
        f'<li data-key="entry:{e.id}" data-state="{_e(e.state)}">'
        f'<a href="#task" data-task-link="{e.task}">T{e.task}</a> {_e(e.owner)} '
        f'<span class="state">{_e(e.state)}{" (" + _e(e.phase) + ")" if e.phase else ""}'
        f"</span> {_e(clipped(e.note or '', 160))}</li>" for e in rows) or "<li>empty</li>"
    paused = " — paused" if queue.paused else ""
    return (f'<div class="queue" data-key="queue:{_e(team)}"><h3>Merge queue → '
            f"{_e(queue.branch)}{paused}</h3><ul>{items}</ul></div>")


def _task_row(task: TaskDoc) -> str:
    owner = f' <span class="owner">{_e(task.owner)}</span>' if task.owner else ""
    blocked = f' <span class="blocked">{_e(task.blocked)}</span>' if task.blocked else ""
    return (f'<li class="task" data-key="task:{task.id}" data-state="{_e(task.state)}">'
            f'<a href="#task" data-task-link="{task.id}">T{task.id}</a> '
            f'<span class="title">{_e(task.title)}</span>{owner}{blocked}</li>')


def task_page(shown: TaskShowDoc | None, messages: list[MessageDoc],
              diff: str | None) -> str:
    """One task: its state, body, lifetime (who did what, with the gate's output in its
    notes), its messages, and its worktree diff (the command that shows it)."""
    if shown is None:
        return "<h2>Task</h2><p>pick a task on the board</p>"
    task = shown.task
    events = "".join(
        f'<li data-key="ev:{index}"><time>{_e(time.strftime("%H:%M:%S", time.localtime(e.at)))}'
        f"</time> <b>{_e(e.actor)}</b> {_e(e.kind)}"
        + (f'<pre class="note">{_e(e.note)}</pre>' if e.note else "") + "</li>"
        for index, e in enumerate(shown.events))
    said = "".join(f'<li data-key="m-{_e(m.id)}"><b>{_e(m.sender)}</b> → {_e(m.to)} '
                   f'<span class="state">{_e(m.state)}</span>: {_e(clipped(m.text, 300))}</li>'
                   for m in messages) or "<li>no messages about it yet</li>"
    worktree = (f'<p class="diff">its diff: <code>{_e(diff)}</code></p>' if diff else "")
    notices = "".join(
        f'<li data-key="nt:{_e(n.source)}"><time>'
        f'{_e(time.strftime("%H:%M:%S", time.localtime(n.at)))}</time> {_e(n.kind)} → '
        f"<b>{_e(n.member or 'nobody yet')}</b> "
        f'<span class="state">{_e(n.delivery or "-")}</span></li>'
        for n in shown.notices) or "<li>none</li>"
    return (f'<h2>T{task.id} <span class="title">{_e(task.title)}</span></h2>'
            f'<div data-key="task-{task.id}"><p><span class="state">{_e(task.state)}</span>'
            f"{' — ' + _e(task.owner) if task.owner else ''}"
            f"{' — ' + _e(task.blocked) if task.blocked else ''}</p>"
            f'<pre class="body">{_e(task.body)}</pre>{worktree}'
            f"<h3>Lifetime</h3><ol>{events}</ol><h3>Told</h3><ol>{notices}</ol>"
            f"<h3>Messages</h3><ol>{said}</ol></div>")
