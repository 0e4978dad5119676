"""What an attachment's name claims, beside what its bytes are.

teamctl decides a file's format from its bytes only (``sniff``): a text file named
``notes.png`` is sent as text, a PDF named ``scan.jpg`` as a PDF. The sender meant something
else, so the plan says so — on the dry-run and on the message's receipt (``send``, ``history``,
``--json``): ``notes.png holds text: sent as text``. Only a name that claims another *kind*
(image, PDF, text) is worth a word: a JPEG named ``.png`` still goes as an image. A name with
no extension, or one this table does not know (``.dat``), claims nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.visible import visible_line

if TYPE_CHECKING:
    from orchestrator.attachments.sniff import Kind

__all__ = ["name_warning"]

_IMAGE = ("png", "jpg", "jpeg", "gif", "webp", "bmp", "tif", "tiff", "heic", "heif", "avif",
          "svg")
_TEXT = ("txt", "text", "md", "markdown", "rst", "csv", "tsv", "log", "json", "yaml", "yml",
         "toml", "xml", "html", "htm")
_CLAIMS: dict[str, Kind] = {**dict.fromkeys(_IMAGE, "image"), "pdf": "document",
                            **dict.fromkeys(_TEXT, "text")}
_IMAGE_NAMES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF",
                "image/webp": "WebP", "image/bmp": "BMP", "image/tiff": "TIFF"}


def _claimed(name: str) -> Kind | None:
    """The kind ``name``'s extension claims (None: no extension, or one not in the table)."""
    stem, dot, extension = name.rpartition(".")
    return _CLAIMS.get(extension.lower()) if dot and stem else None


def _holds(kind: Kind, mime: str) -> tuple[str, str]:
    """What the bytes are, and what they are sent as, in words."""
    if kind == "text":
        return "text", "text"
    if kind == "document":
        return "a PDF", "a PDF"
    return f"a {_IMAGE_NAMES.get(mime, mime)} image", "an image"


def name_warning(name: str, kind: Kind, mime: str) -> str | None:
    """``notes.png holds text: sent as text`` when ``name`` claims another kind than the
    bytes' (``kind``, ``mime``: sniffed), else None. The name is shown on one line, its
    control characters as marks (it is the sender's, or a teammate's, text)."""
    claimed = _claimed(name)
    if claimed is None or claimed == kind:
        return None
    holds, sent = _holds(kind, mime)
    return f"{visible_line(name)} holds {holds}: sent as {sent}"
