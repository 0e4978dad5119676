"""Small PDFs for tests and benchmarks, written by hand (no PDF library): deterministic bytes,
text in Helvetica, a correct cross-reference table so any reader (PDFium, poppler) opens them —
and the hostile ones (docs/documents.md "Hostile files"): a million pages in a few KiB, a page
the size of a field, objects nested 100k deep, a 1 GB decompression stream, JavaScript, an
embedded file, encryption (RC4, the standard security handler, written out here too)."""

from __future__ import annotations

import hashlib
import io
import zlib

__all__ = ["LETTER", "STRIP", "build", "embedded_file_pdf", "encrypted_pdf", "flate_bomb_pdf",
           "huge_page_pdf", "image_only_pdf", "javascript_pdf", "many_pages_pdf", "nested_pdf",
           "shapes_pdf", "text_pdf"]

_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
LETTER = (612, 792)  # points
# 5 × 2 in: a line of 24-pt text fits, and it renders at 750×300 px (150 dpi), a ninth of a
# US-Letter page's pixels: for tests about routes, caps and rebuilds rather than drawing
STRIP = (360, 144)


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _stream(content: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d%s >>\nstream\n%s\nendstream" % (len(content), extra, content)


def build(objects: list[bytes], trailer: bytes = b"") -> bytes:
    """A PDF of ``objects`` (object ``i + 1`` is ``objects[i]``; object 1 is the catalog), with
    a cross-reference table and ``trailer`` added to the trailer dictionary."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, trailer, xref)
    return bytes(out)


def _pages(contents: list[bytes], *, catalog: bytes = b"", page: bytes = b"",
           size: tuple[float, float] = LETTER) -> list[bytes]:
    """Catalog, page tree, one page per content stream (Helvetica as /F1), the font last."""
    count = len(contents)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(count))
    font = 3 + 2 * count
    objects = [b"<< /Type /Catalog /Pages 2 0 R%s >>" % catalog,
               f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode()]
    for i, content in enumerate(contents):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %g %g] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 %d 0 R >> >>%s >>"
                       % (size[0], size[1], 4 + 2 * i, font, page))
        objects.append(_stream(content))
    objects.append(_FONT)
    return objects


def _text_content(text: str, top: float = 700) -> bytes:
    return f"BT /F1 24 Tf 72 {top:g} Td ({_escaped(text)}) Tj ET".encode("ascii")


def text_pdf(*pages: str, size: tuple[float, float] = LETTER) -> bytes:
    """A PDF of ``len(pages)`` pages of ``size`` points (US Letter unless told), page ``i``
    showing ``pages[i]`` (ASCII) near its top."""
    return build(_pages([_text_content(text, size[1] - 92) for text in pages], size=size))


def many_pages_pdf(count: int, *, size: tuple[float, float] = LETTER) -> bytes:
    """``count`` pages, page ``n`` saying ``Page n of count``."""
    return text_pdf(*(f"Page {n} of {count}" for n in range(1, count + 1)), size=size)


def shapes_pdf(count: int) -> bytes:
    """``count`` pages of twenty lines of text and a few filled and stroked shapes (a
    benchmark's input: closer to a real document than one line of text)."""
    contents = []
    for n in range(1, count + 1):
        lines = "".join(f"1 0 0 1 72 {700 - 18 * k} Tm (Line {k} of page {n}: the quick brown "
                        "fox jumps over the lazy dog) Tj " for k in range(20))
        contents.append((f"BT /F1 12 Tf {lines}ET "
                         "0.2 0.4 0.8 rg 72 72 200 120 re f "
                         "0.8 0.1 0.1 RG 4 w 320 72 m 540 192 l S "
                         "0 0.6 0.2 rg 430 200 m 500 320 l 360 320 l h f "
                         "0 0 0 RG 1 w 72 40 468 20 re S").encode("ascii"))
    return build(_pages(contents))


def image_only_pdf(pages: int = 1) -> bytes:
    """A scan: each page one image, no text layer (Pillow writes the PDF)."""
    from PIL import Image, ImageDraw

    images = []
    for n in range(pages):
        image = Image.new("RGB", (400, 300), "white")
        ImageDraw.Draw(image).rectangle((40 + 10 * n, 40, 360, 260), outline="black", width=6)
        images.append(image)
    out = io.BytesIO()
    images[0].save(out, "PDF", save_all=True, append_images=images[1:], resolution=72.0)
    return out.getvalue()


def huge_page_pdf(width: float, height: float, *, user_unit: float | None = None,
                  text: str = "a field-sized page") -> bytes:
    """One page of ``width`` × ``height`` points (times ``/UserUnit`` when given)."""
    extra = b" /UserUnit %g" % user_unit if user_unit is not None else b""
    return build(_pages([_text_content(text)], page=extra, size=(width, height)))


def repeated_kids_pdf(pages: int) -> bytes:
    """A page tree of ``pages`` pages in a few KiB: the root's /Kids repeat one intermediate
    node ``pages // 1000`` times, whose /Kids repeat one page object 1000 times."""
    fan = 1000
    outer = pages // fan
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b"3 0 R " * outer, outer * fan),
               b"<< /Type /Pages /Parent 2 0 R /Kids [%s] /Count %d >>" % (b"4 0 R " * fan, fan),
               b"<< /Type /Page /Parent 3 0 R /MediaBox [0 0 612 792] /Contents 5 0 R "
               b"/Resources << /Font << /F1 6 0 R >> >> >>",
               _stream(_text_content("the same page, again")), _FONT]
    return build(objects)


def nested_pdf(depth: int) -> bytes:
    """One page whose dictionary holds arrays and dictionaries nested ``depth`` deep, and whose
    content stream opens ``depth`` arrays (a parser that recurses runs out of stack)."""
    arrays = b"[" * depth + b"]" * depth
    dicts = b"<< /A " * depth + b"1" + b" >>" * depth
    return build(_pages([b"BT /F1 24 Tf 72 700 Td (nested) Tj ET " + arrays + b" pop"],
                        page=b" /Deep " + arrays + b" /Deeper " + dicts))


def flate_bomb_pdf(decompressed: int = 1 << 30, chunk: int = 1 << 24) -> bytes:
    """One page whose content stream inflates to ``decompressed`` zero bytes (a multiple of
    ``chunk``): 1 GiB is a ~1 MB file. Each chunk is compressed after a full flush, so every
    chunk after the first has the same bytes: made in a second, never held inflated."""
    assert decompressed % chunk == 0 and decompressed >= 2 * chunk
    squeeze = zlib.compressobj(9)
    zeros = bytes(chunk)
    first = squeeze.compress(zeros) + squeeze.flush(zlib.Z_FULL_FLUSH)
    again = squeeze.compress(zeros) + squeeze.flush(zlib.Z_FULL_FLUSH)
    adler32 = (decompressed % 65521) << 16 | 1  # of that many zero bytes
    empty_final_block = b"\x03\x00"
    bomb = first + again * (decompressed // chunk - 1) + empty_final_block + adler32.to_bytes(
        4, "big")
    objects = _pages([b""])
    objects[3] = _stream(bomb, b" /Filter /FlateDecode")
    return build(objects)


def javascript_pdf(text: str = "has a script", *, document_level: bool = True) -> bytes:
    """A page of text, with JavaScript run on open (/OpenAction) and, if ``document_level``, a
    document-level script (the /JavaScript name tree) — both must only ever be counted."""
    objects = _pages([_text_content(text)])
    extra = b" /OpenAction %d 0 R" % (len(objects) + 1)
    if document_level:
        extra += b" /Names << /JavaScript %d 0 R >>" % (len(objects) + 2)
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R%s >>" % extra
    objects.append(b"<< /Type /Action /S /JavaScript /JS (app.alert\\('opened'\\);) >>")
    if document_level:
        objects.append(b"<< /Names [(hello) << /S /JavaScript /JS (app.alert\\('doc'\\);) >>] >>")
    return build(objects)


def embedded_file_pdf(text: str = "has an attachment",
                      payload: bytes = b"#!/bin/sh\necho pwned\n") -> bytes:
    """A page of text and an embedded file (the /EmbeddedFiles name tree)."""
    objects = _pages([_text_content(text)])
    base = len(objects)
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R /Names << /EmbeddedFiles %d 0 R >> >>" % (
        base + 1)
    objects.append(b"<< /Names [(run.sh) %d 0 R] >>" % (base + 2))
    objects.append(b"<< /Type /Filespec /F (run.sh) /UF (run.sh) /EF << /F %d 0 R >> >>"
                   % (base + 3))
    objects.append(_stream(payload, b" /Type /EmbeddedFile"))
    return build(objects)


# -- encryption: the standard security handler, revision 2 (RC4, 40-bit), ISO 32000-1 §7.6.3 --

_PAD = bytes.fromhex("28bf4e5e4e758a4164004e56fffa01082e2e00b6d0683e802f0ca9fe6453697a")
_FILE_ID = hashlib.md5(b"teamctl test pdf", usedforsecurity=False).digest()


def _rc4(key: bytes, data: bytes) -> bytes:
    box = list(range(256))
    j = 0
    for i in range(256):
        j = (j + box[i] + key[i % len(key)]) % 256
        box[i], box[j] = box[j], box[i]
    out = bytearray()
    i = j = 0
    for byte in data:
        i = (i + 1) % 256
        j = (j + box[i]) % 256
        box[i], box[j] = box[j], box[i]
        out.append(byte ^ box[(box[i] + box[j]) % 256])
    return bytes(out)


def _md5(data: bytes) -> bytes:
    return hashlib.md5(data, usedforsecurity=False).digest()


def encrypted_pdf(text: str, user_password: str, owner_password: str = "owner") -> bytes:
    """One page showing ``text``, encrypted (RC4 40-bit, revision 2): it opens only with
    ``user_password`` (or the owner's)."""
    permissions = -4
    owner_key = _md5((owner_password.encode() + _PAD)[:32])[:5]
    o_value = _rc4(owner_key, (user_password.encode() + _PAD)[:32])
    key = _md5((user_password.encode() + _PAD)[:32] + o_value
               + permissions.to_bytes(4, "little", signed=True) + _FILE_ID)[:5]
    u_value = _rc4(key, _PAD)
    content = _text_content(text)
    object_key = _md5(key + (4).to_bytes(3, "little") + (0).to_bytes(2, "little"))[:10]
    objects = _pages([content])
    objects[3] = _stream(_rc4(object_key, content))
    objects.append(b"<< /Filter /Standard /V 1 /R 2 /O <%s> /U <%s> /P %d >>" % (
        o_value.hex().encode(), u_value.hex().encode(), permissions))
    trailer = b" /Encrypt %d 0 R /ID [<%s> <%s>]" % (
        len(objects), _FILE_ID.hex().encode(), _FILE_ID.hex().encode())
    return build(objects, trailer)
