"""``teamctl ui``: the live view's address (docs/live-view.md). Registered by
``orchestrator.client.cli``.

``--open`` never puts the sign-in token on the browser's command line (``/proc/PID/cmdline`` is
readable by every local user, who could redeem it first): it writes a 0600 page in the 0700
``ui/`` of the home that POSTs the one-time token to the live view, and opens that file. Where
no browser opens (none installed, no display, BROWSER naming a missing program) it says so on
stderr and names that file to open by hand; the URL is printed anyway, so it still exits 0."""

from __future__ import annotations

import os
import shlex
import shutil
from html import escape
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import click

from orchestrator import client, protocol
from orchestrator.client.common import emit_json, handles_errors, say, teamctl_home
from orchestrator.paths import ensure_private_dir, write_private

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.paths import Home

__all__ = ["COMMANDS", "open_in_browser", "sign_in_page"]


@click.command()
@click.option("--open", "open_browser", is_flag=True,
              help="Also open it in the browser (through a private sign-in file).")
@click.option("--port", type=click.IntRange(1024, 65535), default=None,
              help="Serve on this loopback port (default: a free one, on the first call).")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def ui(open_browser: bool, port: int | None, as_json: bool) -> None:
    """The live view: print its URL (with a one-time sign-in token) and return."""
    home = teamctl_home()
    doc = client.call(home, protocol.UI, {"port": port})
    if as_json:
        emit_json(doc)
    else:
        say(doc["url"])
        say("(the link signs one browser in once; run 'teamctl ui' again for another)",
            err=True)
    if open_browser:
        address = sign_in_page(home, doc["url"]).as_uri()
        problem = open_in_browser(address)
        if problem is not None:
            say(f"teamctl: warning: no browser opened: {problem}; open {address} in a "
                "browser on this machine, or the URL printed above (either signs one "
                "browser in, once)", err=True)


def open_in_browser(address: str) -> str | None:
    """Open ``address`` in the user's browser: None, or why none opened (``webbrowser.open``
    answers False when no browser is registered and when BROWSER's program cannot start)."""
    import webbrowser

    chosen = [choice for choice in os.environ.get("BROWSER", "").split(os.pathsep)
              if choice.strip()]
    try:
        if webbrowser.open(address):
            return None
    except webbrowser.Error as exc:
        return f"the browser failed ({exc})"
    missing = [choice for choice in chosen if not _installed(choice)]
    if missing:
        return f"BROWSER names {missing[0]!r}, which is not installed"
    if chosen:
        return f"BROWSER's {chosen[0]!r} failed"
    return "none is installed or this session has no display (set BROWSER to one)"


def _installed(choice: str) -> bool:
    """Whether a BROWSER entry ("firefox %s", "/usr/bin/w3m") names a program found here."""
    try:
        program = shlex.split(choice)[0]
    except (ValueError, IndexError):
        return False
    return shutil.which(program) is not None


def sign_in_page(home: Home, url: str) -> Path:
    """Write the page that signs a browser in with ``url``'s one-time token: 0600, in the 0700
    ``ui/`` of the home, replacing the previous one. Its own address holds no secret."""
    parts = urlsplit(url)
    token = parse_qs(parts.query).get("token", [""])[0]
    action = f"{parts.scheme}://{parts.netloc}/signin"
    page = ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<title>teamctl: signing in</title></head><body>'
            f'<form id="f" method="post" action="{escape(action)}">'
            f'<input type="hidden" name="token" value="{escape(token)}">'
            "<noscript><button>Sign in to the live view</button></noscript></form>"
            '<script>document.getElementById("f").submit()</script></body></html>')
    path = ensure_private_dir(home.root / "ui") / "sign-in.html"
    write_private(path, page.encode())
    return path


COMMANDS = (ui,)
