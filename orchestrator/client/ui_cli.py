"""``teamctl ui``: the live view's address (docs/live-view.md). Registered by
``orchestrator.client.cli``."""

from __future__ import annotations

import click

from orchestrator import client
from orchestrator.client.cli import _emit_json, _home, handles_errors

__all__ = ["COMMANDS"]


@click.command()
@click.option("--open", "open_browser", is_flag=True, help="Also open it in the browser.")
@click.option("--port", type=click.IntRange(1024, 65535), default=None,
              help="Serve on this loopback port (default: a free one, on the first call).")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def ui(open_browser: bool, port: int | None, as_json: bool) -> None:
    """The live view: print its URL (with a one-time sign-in token) and return."""
    doc = client.call(_home(), "ui", {"port": port})
    if as_json:
        _emit_json(doc)
    else:
        click.echo(doc["url"])
        click.echo("(the link signs one browser in once; run 'teamctl ui' again for another)",
                   err=True)
    if open_browser:
        import webbrowser

        webbrowser.open(doc["url"])


COMMANDS = (ui,)
