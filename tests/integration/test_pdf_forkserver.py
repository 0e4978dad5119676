"""The PDF reader's fork server (orchestrator/attachments/pdf_forkserver.py): readers forked
from one process that loaded PDFium once read exactly what a reader started afresh reads; the
server is started once, started again when it went away (between reads or in the middle of
one — that read is not lost), serves readers at once from many threads, leaks no descriptor,
holds none of the daemon's environment, and survives a malformed request. Real processes: the
integration layer's (docs/dev/testing.md)."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from orchestrator.attachments import pdf
from orchestrator.attachments.failures import AttachmentError
from orchestrator.attachments.pdf import PdfLimits, PdfReading, read_pdf
from orchestrator.attachments.pdf_forkserver import ForkedReader, ForkServer
from tests.support import pdfs
from tests.support.processes import children_of

if TYPE_CHECKING:
    from collections.abc import Iterator

LIMITS = PdfLimits(render_pages=2, memory_bytes=512 * 1024 * 1024, cpu_seconds=10,
                   deadline=60.0)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ForkServer]:
    """A fork server of the test's own (the process-wide one is left alone), started by the
    first read; the daemon's environment holds a secret it must not see."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-secret-of-the-daemon")
    monkeypatch.delenv("TEAMCTL_PDF_FORKSERVER", raising=False)
    own = ForkServer([sys.executable, "-E", "-s", "-m", "orchestrator.attachments.pdf_forkserver"],
                     pdf._PACKAGE_ROOT, pdf._worker_env())
    monkeypatch.setattr(pdf, "FORK_SERVER", own)
    yield own
    own.close()


def _fds() -> set[str]:
    return {p.name for p in Path("/proc/self/fd").iterdir()}


def test_a_forked_reader_reads_what_a_reader_started_afresh_reads(
        server: ForkServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same bytes in, same pages, text and page images out, whichever way the reader began
    (the rendered variants byte for byte: the determinism the artifacts' sha256s rest on)."""
    data = pdfs.shapes_pdf(5)
    forked = read_pdf(data, "a.pdf", LIMITS)
    assert server.pid is not None and server.starts == 1
    monkeypatch.setenv("TEAMCTL_PDF_FORKSERVER", "0")
    afresh = read_pdf(data, "a.pdf", LIMITS)
    assert forked == afresh
    assert forked.pages == 5 and len(forked.images) == 2


def test_one_server_serves_every_read_and_a_dead_one_is_started_again(
        server: ForkServer) -> None:
    for n in range(5):
        assert read_pdf(pdfs.text_pdf(f"page {n}"), "a.pdf", LIMITS).page_texts == (f"page {n}",)
    first = server.pid
    assert first is not None and server.starts == 1
    os.kill(first, signal.SIGKILL)  # reaped by its Popen when the next read starts another
    assert read_pdf(pdfs.text_pdf("after"), "a.pdf", LIMITS).page_texts == ("after",)
    assert server.starts == 2 and server.pid not in (None, first)


def test_a_read_whose_server_dies_midway_is_read_again_afresh(
        server: ForkServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server killed once it forked a reader, before the reader has its PDF: the reader (an
    orphan now) still reads and answers, but nobody is left to say how it ended — so the read
    is made again by a reader started afresh, and the caller gets the reading, not an error.
    The next read starts a new server."""
    data = pdfs.shapes_pdf(5)
    expected = read_pdf(data, "a.pdf", LIMITS)
    first = server.pid
    forked = server.reader

    def forked_then_server_killed(job: str) -> ForkedReader | None:
        reader = forked(job)
        assert reader is not None and server._process is not None
        os.kill(server._process.pid, signal.SIGKILL)
        server._process.wait()
        return reader

    read = pdf._read
    ways: list[bool] = []

    def spied(*args: Any, forked: bool) -> PdfReading:
        ways.append(forked)
        return read(*args, forked=forked)

    monkeypatch.setattr(server, "reader", forked_then_server_killed)
    monkeypatch.setattr(pdf, "_read", spied)
    assert read_pdf(data, "a.pdf", LIMITS) == expected
    assert ways == [True, False], "forked, lost, then read again afresh"
    assert server.starts == 1, "not through a new server"
    monkeypatch.setattr(server, "reader", forked)
    assert read_pdf(data, "a.pdf", LIMITS) == expected
    assert server.starts == 2 and server.pid not in (None, first)


def test_readers_run_at_once_from_many_threads(server: ForkServer) -> None:
    texts = [f"document {n}" for n in range(8)]
    got: dict[str, tuple[str, ...]] = {}

    def read(text: str) -> None:
        got[text] = read_pdf(pdfs.text_pdf(text), f"{text}.pdf", LIMITS).page_texts

    threads = [threading.Thread(target=read, args=(t,)) for t in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert got == {t: (t,) for t in texts}
    assert server.starts == 1


def test_reads_and_refusals_leak_no_descriptor(server: ForkServer) -> None:
    read_pdf(pdfs.text_pdf("warm"), "a.pdf", LIMITS)  # the server's own socket is open now
    before = _fds()
    for _ in range(10):
        read_pdf(pdfs.shapes_pdf(4), "a.pdf", LIMITS)
        with pytest.raises(AttachmentError):
            read_pdf(b"%PDF-1.7 not a pdf at all", "bad.pdf", LIMITS)
        with pytest.raises(AttachmentError):  # killed at its deadline
            read_pdf(pdfs.repeated_kids_pdf(1_000_000).replace(b"(the same page, again)", b"()"),
                     "slow.pdf", PdfLimits(render_pages=0, max_text_bytes=1 << 30,
                                           deadline=0.05))
    assert _fds() == before
    assert server.pid is not None and children_of(server.pid) == []


def test_the_server_and_its_readers_hold_none_of_the_daemons_environment(
        server: ForkServer) -> None:
    read_pdf(pdfs.text_pdf("warm"), "a.pdf", LIMITS)
    assert server.pid is not None
    environ = Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
    assert sorted(e.split(b"=")[0] for e in environ if e) == [b"LC_ALL", b"PATH"]


def test_a_malformed_request_is_answered_and_the_server_keeps_serving(
        server: ForkServer) -> None:
    read_pdf(pdfs.text_pdf("warm"), "a.pdf", LIMITS)
    control = server._control
    assert control is not None
    r, w = os.pipe()
    try:
        for fds in ([], [r]):  # no descriptors; one where four are needed
            socket.send_fds(control, [b"{not json"], fds)
            answer, got, _, _ = socket.recv_fds(control, 1024, 1)
            assert b"error" in answer and got == []
    finally:
        os.close(r)
        os.close(w)
    assert read_pdf(pdfs.text_pdf("still"), "a.pdf", LIMITS).page_texts == ("still",)
    assert server.starts == 1


def test_fork_server_off_starts_each_reader_afresh(
        server: ForkServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMCTL_PDF_FORKSERVER", "0")
    assert read_pdf(pdfs.text_pdf("afresh"), "a.pdf", LIMITS).page_texts == ("afresh",)
    assert server.pid is None and server.starts == 0
