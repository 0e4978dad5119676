"""What one OpenCode turn sends and what its answer says (protocols/opencode.md §5–§7).

The message body: a ``text`` part per text, one ``file`` part per image and per PDF, each a
``data:`` URL (a ``file://`` URL goes through a synthetic Read tool and fails with a 500 when
the file is gone), the member's model as ``providerID``/``modelID``. From the answer: the tool
calls the permission config refused, as notes, and an error body's message. Plain functions of
the ``LaunchSpec``: the server (runtimes/opencode/runtime.py) does the HTTP.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, assert_never

from orchestrator.contracts import DocumentPart, ImagePart, TextPart
from runtimes.kit import denied
from runtimes.kit.documents import refused, safe_name
from runtimes.opencode.launch import split_model

if TYPE_CHECKING:
    import httpx

    from orchestrator.contracts import LaunchSpec, Turn

__all__ = ["denial_notes", "error_message", "message_body"]


def message_body(spec: LaunchSpec, turn: Turn) -> dict[str, Any]:
    """The ``POST /session/{id}/message`` body of ``turn``."""
    parts: list[dict[str, Any]] = []
    for part in turn.parts:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            data = base64.b64encode(part.data).decode("ascii")
            extension = part.mime.split("/")[-1].replace("jpeg", "jpg")
            parts.append({"type": "file", "mime": part.mime,
                          "filename": f"image-{part.sha256[:12]}.{extension}",
                          "url": f"data:{part.mime};base64,{data}"})
        elif isinstance(part, DocumentPart):
            parts.append(_file_part(spec, part))
        else:
            assert_never(part)
    body: dict[str, Any] = {"parts": parts}
    provider, model = split_model(spec.model)
    if provider and model:
        body["model"] = {"providerID": provider, "modelID": model}
    return body


def _file_part(spec: LaunchSpec, part: DocumentPart) -> dict[str, Any]:
    """A PDF as a ``file`` part (a data URL, its safe base name); OpenCode turns a text file
    part into a Read-tool transcript of a path, so a text document never goes this way (it is
    sent derived, as text)."""
    if part.mime != "application/pdf":
        raise refused(spec.member, part, "OpenCode takes PDF documents only")
    data = base64.b64encode(part.data).decode("ascii")
    return {"type": "file", "mime": part.mime, "filename": safe_name(part),
            "url": f"data:{part.mime};base64,{data}"}


def denial_notes(spec: LaunchSpec, parts: list[dict[str, Any]]) -> tuple[str, ...]:
    """Tool calls the permission config refused: a ``deny`` removes the tool, so the call
    becomes the ``invalid`` tool; an ``external_directory`` deny errors the call."""
    notes = []
    for part in parts:
        state = part.get("state") or {}
        if part.get("type") != "tool" or not isinstance(state, dict):
            continue
        error = str(state.get("error") or state.get("output") or "")
        was_refused = state.get("status") == "error" and any(
            word in error.lower() for word in ("permission", "rejected", "denied"))
        if part.get("tool") != "invalid" and not was_refused:
            continue
        notes.append(denied(spec, str(part.get("tool")), message=error))
    return tuple(notes)


def error_message(response: httpx.Response) -> str:
    """What an error answer of the server says, short (its JSON ``data.message`` or name)."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:200]
    if not isinstance(data, dict):
        return ""
    inner = data.get("data")
    message = inner.get("message") if isinstance(inner, dict) else None
    return str(message or data.get("name") or "")[:300]
