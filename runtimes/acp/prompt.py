"""An ACP prompt from a turn's parts (docs/runtimes.md § ACP): a ``text`` block per text part,
an ``image`` block per image (the planned variant's bytes, base64), an embedded ``resource``
per native document — and what the agent does with them together.

The agents change what they are given, so the blocks follow each one's captured rule rather
than the protocol's promise: Gemini CLI 0.61.0 rebuilds a prompt that carries an embedded
resource from its text and its resources alone and drops every image block of it, with no word
to the client; its resources' bytes reach the API unchanged (captured against the fake Gemini
API). To such an agent (its preset's ``images_beside_resources`` false) the images of a prompt
with a document go as resources too — a ``BlobResourceContents`` with the image's MIME, which
it sends as the same ``inlineData`` part an image block would have been.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, assert_never
from urllib.parse import quote

from orchestrator.contracts import DocumentPart, ImagePart, TextPart, TurnFailed
from runtimes.kit.documents import refused, safe_name, utf8_text

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["PromptRules", "image_resource_block", "prompt_blocks", "resource_block"]

_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif",
               "image/webp": "webp"}


@dataclass(frozen=True)
class PromptRules:
    """What the agent takes: its ``promptCapabilities`` (``image``, ``embeddedContext``), as it
    said at ``initialize``, and whether its image blocks survive beside a resource (its
    preset's rule). ``agent``: its name, for the failure messages."""

    member: str
    agent: str
    images: bool
    resources: bool
    images_beside_resources: bool = True


def prompt_blocks(parts: Sequence[TextPart | ImagePart | DocumentPart],
                  rules: PromptRules) -> list[dict[str, Any]]:
    """The ``session/prompt`` blocks of a turn, in its order; TurnFailed (not retried) before
    anything is sent when the agent takes no images or no documents and the turn has some."""
    images_as_resources = not rules.images_beside_resources and any(
        isinstance(part, DocumentPart) for part in parts)
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            blocks.append(_text_block(part, blocks))
        elif isinstance(part, ImagePart):
            _check_images(rules)
            blocks.append(image_resource_block(part) if images_as_resources
                          else _image_block(part))
        elif isinstance(part, DocumentPart):
            if not rules.resources:
                raise refused(rules.member, part, f"the agent ({rules.agent}) does not take "
                              "documents (its promptCapabilities has no embeddedContext)")
            blocks.append(resource_block(part, rules.member))
        else:
            assert_never(part)
    return blocks


def _text_block(part: TextPart, before: list[dict[str, Any]]) -> dict[str, Any]:
    """Qwen Code joins the text blocks and the resources' ``@<uri>`` mentions with nothing
    between them: a text after another block starts its own paragraph."""
    after = any(block["type"] in ("text", "resource") for block in before)
    return {"type": "text", "text": f"\n\n{part.text}" if after else part.text}


def _check_images(rules: PromptRules) -> None:
    if not rules.images:
        raise TurnFailed(rules.member, f"the agent ({rules.agent}) does not take images (its "
                         "promptCapabilities has no image): send text, or use describe_with",
                         api_status=None, retryable=False)


def _image_block(part: ImagePart) -> dict[str, Any]:
    return {"type": "image", "mimeType": part.mime,
            "data": base64.b64encode(part.data).decode("ascii")}


def image_resource_block(part: ImagePart) -> dict[str, Any]:
    """An image as an embedded resource (``BlobResourceContents``), for an agent that drops
    image blocks beside a resource. Its URI names it as the text does: ``image-<N>`` for
    ``[Image #N]``, ``doc-<N>-page-<P>`` for a rendered page of ``[Doc #N]``."""
    name = (f"doc-{part.number}-page-{part.page}" if part.page is not None
            else f"image-{part.number}")
    uri = f"teamctl://image/{part.sha256[:12]}/{name}.{_EXTENSIONS.get(part.mime, 'img')}"
    return {"type": "resource", "resource": {
        "uri": uri, "mimeType": part.mime, "blob": base64.b64encode(part.data).decode("ascii")}}


def resource_block(part: DocumentPart, member: str) -> dict[str, Any]:
    """An ACP embedded resource (``EmbeddedResource``: ``TextResourceContents`` with the text,
    ``BlobResourceContents`` with base64 bytes). Its ``uri`` only names it — the content is
    embedded — so it is a ``teamctl:`` URI, never a ``file:`` one an agent would try to open
    (the document is in teamctl's store, not in the member's workdir)."""
    uri = f"teamctl://doc/{part.sha256[:12]}/{quote(safe_name(part), safe='')}"
    resource: dict[str, Any] = {"uri": uri, "mimeType": part.mime}
    if part.mime == "text/plain":
        resource["text"] = utf8_text(member, part)
    else:
        resource["blob"] = base64.b64encode(part.data).decode("ascii")
    return {"type": "resource", "resource": resource}
