"""``teamctl export``: a member's conversation (or every member's) as one JSON document that
stands alone — senders, texts, states, attempts, replies, timestamps, attachments' metadata,
and the bytes that were sent inlined as base64 (the one place teamctl writes base64): each
image's variant, and each document's — the PDF or text itself when it went natively, else its
page-marked text and each rendered page image.

The daemon answers with the journal's side (no bytes: the control socket stays small); the CLI
reads each image from the artifact store itself, verifies it against its sha256 and inlines it.
An artifact that is gone or corrupted keeps its metadata, is marked ``missing`` and listed in
the document's ``missing``. ``--redact`` leaves every attachment's bytes out. Registered by
``orchestrator.client.cli``; the schema is ``teamctl schema export`` (docs/json.md).
"""

from __future__ import annotations

import base64
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orchestrator import client, protocol
from orchestrator.client import completion
from orchestrator.client.common import check_name, handles_errors, say, teamctl_home
from orchestrator.client.out_file import check_out, write_out
from orchestrator.errors import UsageError
from orchestrator.visible import json_text

if TYPE_CHECKING:
    from orchestrator.attachments.artifacts import ArtifactStore

__all__ = ["COMMANDS", "inline_images"]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@click.command()
@click.option("--team", default=None, callback=check_name, shell_complete=completion.teams)
@click.argument("member", required=False, callback=check_name, shell_complete=completion.members)
@click.option("--all", "every", is_flag=True, help="Every member of the team.")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the document to FILE (0600, a new file; - is standard output) "
                   "instead of standard output.")
@click.option("--force", is_flag=True,
              help="With --out: replace an existing regular file (never a symlink or FIFO).")
@click.option("--redact", is_flag=True,
              help="Leave the attachments' bytes out (metadata only).")
@handles_errors
def export(team: str | None, member: str | None, every: bool, out: Path | None,
           force: bool, redact: bool) -> None:
    """Export MEMBER's conversation (or --all members') as JSON with its attachments
    (images, documents) inlined."""
    if (member is None) == (not every):
        raise click.UsageError("give MEMBER, or --all for every member (not both)")
    target = None if out is None or str(out) == "-" else out.expanduser().absolute()
    if target is not None:
        check_out(target, force=force)  # refused before the daemon is asked
    doc: dict[str, Any] = client.call(teamctl_home(), protocol.EXPORT,
                                      {"team": team, "member": member}, timeout=120.0)
    from orchestrator.attachments.artifacts import ArtifactStore  # only here: a lean CLI start

    counts = inline_images(doc, ArtifactStore(teamctl_home().artifacts), redact=redact)
    text = json_text(doc, indent=1) + "\n"
    if target is None:
        sys.stdout.write(text)
        return
    try:
        write_out(target, text.encode("utf-8"), force=force)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror}; choose another --out") from None
    messages = sum(len(m["messages"]) for m in doc["members"])
    gone = f", {counts.missing} missing from the store" if counts.missing else ""
    kept = "metadata only (--redact)" if redact else "inlined"
    say(f"exported {_counted(messages, 'message', counts)} ({kept}{gone}) to {out}")


def _counted(messages: int, word: str, counts: Inlined) -> str:
    """``3 messages and 2 images``, or ``3 messages, 2 images and 1 document``."""
    parts = [f"{n} {what}{'s' * (n != 1)}" for n, what in (
        (messages, word), (counts.images, "image"), (counts.documents, "document"))
        if n or what != "document"]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


@dataclass(frozen=True)
class Inlined:
    """What an export inlined: images, documents, and the artifacts missing from the store."""

    images: int
    documents: int
    missing: int


def inline_images(doc: dict[str, Any], store: ArtifactStore, *, redact: bool) -> Inlined:
    """Fill each attachment's ``data`` — and each of a document's page images' — (or leave
    them out with ``redact``)."""
    doc["redacted"] = redact
    images, documents, missing = 0, 0, list[str]()
    for member in doc["members"]:
        for message in member["messages"]:
            for attachment in message["attachments"]:
                if attachment.get("kind", "image") == "image":
                    images += 1
                else:
                    documents += 1
                if redact:
                    continue
                for blob in (attachment, *(attachment.get("page_variants") or ())):
                    _inline(blob, store, missing)
    doc["missing"] = missing
    return Inlined(images, documents, len(missing))


def _inline(blob: dict[str, Any], store: ArtifactStore, missing: list[str]) -> None:
    """``blob["data"]``: the artifact of ``blob["sha256"]``, verified (``missing`` if not)."""
    from orchestrator.attachments.artifacts import ArtifactMissing

    sha256 = str(blob["sha256"])
    try:
        if not _SHA256.match(sha256):
            raise ArtifactMissing(sha256, "not a sha256")
        blob["data"] = base64.b64encode(store.get(sha256)).decode("ascii")
    except ArtifactMissing:
        blob["missing"] = True
        if sha256 not in missing:
            missing.append(sha256)


COMMANDS = (export,)
