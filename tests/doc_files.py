"""Documents for tests, written by hand (no library): small valid PDFs, and hostile ones."""

from __future__ import annotations

__all__ = ["encrypted_pdf", "pdf"]


def pdf(*pages: str) -> bytes:
    """A PDF of one US-Letter page per text (ASCII, in Helvetica), with a correct xref."""
    count = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(count))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode()]
    for i, text in enumerate(pages):
        shown = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 24 Tf 72 700 Td ({shown}) Tj ET".encode()
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
                       f"<< /Font << /F1 {3 + 2 * count} 0 R >> >> /Contents {4 + 2 * i} 0 R >>"
                       .encode())
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref)
    return bytes(out)


def encrypted_pdf() -> bytes:
    """A PDF under the standard security handler whose user password is not empty: its
    /U entry matches no empty password, so a reader asks for one."""
    plain = pdf("secret")  # the same objects, with an /Encrypt dictionary in the trailer
    encrypt = (b"/Encrypt << /Filter /Standard /V 1 /R 2 /Length 40 /P -4 "
               b"/O <" + b"11" * 32 + b"> /U <" + b"22" * 32 + b"> >> "
               b"/ID [<00112233445566778899aabbccddeeff> <00112233445566778899aabbccddeeff>] ")
    return plain.replace(b"/Root 1 0 R ", b"/Root 1 0 R " + encrypt)
