"""``teamctl export``: a member's conversation (or every member's) as one JSON document that
stands alone — senders, texts, states, attempts, replies, timestamps, attachments' metadata,
and each image's bytes inlined as base64 (the one place teamctl writes base64).

The daemon answers with the journal's side (no bytes: the control socket stays small); the CLI
reads each image from the artifact store itself, verifies it against its sha256 and inlines it.
An artifact that is gone or corrupted keeps its metadata, is marked ``missing`` and listed in
the document's ``missing``. ``--redact`` leaves every image's bytes out. Registered by
``orchestrator.client.cli``; the schema is ``teamctl schema export`` (docs/json.md).
"""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orchestrator import client
from orchestrator.client.common import check_name, handles_errors, teamctl_home
from orchestrator.client.out_file import check_out, write_out
from orchestrator.errors import UsageError

if TYPE_CHECKING:
    from orchestrator.attachments.artifacts import ArtifactStore

__all__ = ["COMMANDS", "inline_images"]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@click.command()
@click.option("--team", default=None, callback=check_name)
@click.argument("member", required=False, callback=check_name)
@click.option("--all", "every", is_flag=True, help="Every member of the team.")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the document to FILE (0600, a new file; - is standard output) "
                   "instead of standard output.")
@click.option("--force", is_flag=True,
              help="With --out: replace an existing regular file (never a symlink or FIFO).")
@click.option("--redact", is_flag=True, help="Leave the image bytes out (metadata only).")
@handles_errors
def export(team: str | None, member: str | None, every: bool, out: Path | None,
           force: bool, redact: bool) -> None:
    """Export MEMBER's conversation (or --all members') as JSON with its images inlined."""
    if (member is None) == (not every):
        raise click.UsageError("give MEMBER, or --all for every member (not both)")
    target = None if out is None or str(out) == "-" else out.expanduser().absolute()
    if target is not None:
        check_out(target, force=force)  # refused before the daemon is asked
    doc: dict[str, Any] = client.call(teamctl_home(), "export", {"team": team, "member": member},
                                      timeout=120.0)
    from orchestrator.attachments.artifacts import ArtifactStore  # only here: a lean CLI start

    images, missing = inline_images(doc, ArtifactStore(teamctl_home().artifacts), redact=redact)
    text = json.dumps(doc, ensure_ascii=False, indent=1) + "\n"
    if target is None:
        sys.stdout.write(text)
        return
    try:
        write_out(target, text.encode("utf-8"), force=force)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror}; choose another --out") from None
    messages = sum(len(m["messages"]) for m in doc["members"])
    gone = f", {missing} missing from the store" if missing else ""
    kept = "metadata only (--redact)" if redact else "inlined"
    click.echo(f"exported {messages} message{'s' * (messages != 1)} and {images} "
               f"image{'s' * (images != 1)} ({kept}{gone}) to {out}")


def inline_images(doc: dict[str, Any], store: ArtifactStore, *,
                  redact: bool) -> tuple[int, int]:
    """Fill each attachment's ``data`` (or leave it out with ``redact``); the number of
    images and of those missing from the store."""
    from orchestrator.attachments.artifacts import ArtifactMissing

    doc["redacted"] = redact
    count, missing = 0, []
    for member in doc["members"]:
        for message in member["messages"]:
            for attachment in message["attachments"]:
                count += 1
                if redact:
                    continue
                sha256 = str(attachment["sha256"])
                try:
                    if not _SHA256.match(sha256):
                        raise ArtifactMissing(sha256, "not a sha256")
                    attachment["data"] = base64.b64encode(store.get(sha256)).decode("ascii")
                except ArtifactMissing:
                    attachment["missing"] = True
                    if sha256 not in missing:
                        missing.append(sha256)
    doc["missing"] = missing
    return count, len(missing)


COMMANDS = (export,)
