"""Issue 31 figures: documents (docs/documents.md).

(a) Render time per page of a 20-page PDF (text and shapes) at the DPI teamctl renders a
    US-Letter page (150): PDFium through ``read_pdf`` (its child process: start, text, PNG),
    PDFium raw in-process (render only; render + PNG as the worker encodes it), and Debian's
    ``pdftoppm -r 150 -png`` on the same pages — the ratio is PDFium (render + PNG) to pdftoppm.
(b) A 100-page PDF planned (``derive_document``) for a Claude-like member (native: the page
    count is read) and a Codex-like one (pages: 20 rendered, the text of all): time, peak RSS of
    the planning process and of the reader child.
(c) A 5 MB text file planned for each: time, peak RSS.
(d) Each hostile PDF of tests/integration/test_pdf_reader_hostile.py read with the production
    limits: the outcome, wall time and the reader's peak RSS.
(e) A reader's start: a PDF's page count (what a Claude-like member's plan reads) and one page
    read and rendered, each by a reader started afresh and by one forked from the warm fork
    server (pdf_forkserver): the median wall time and the readers' CPU per read.

Each measurement of (b)-(d) runs in a fresh process, so a peak is its own (a child's ru_maxrss
starts at its parent's: the measuring processes are small, and their own peak is printed
beside), with each reader started afresh (``TEAMCTL_PDF_FORKSERVER=0``): a forked reader is a
grandchild, its peak not in this process's count.

Measured in process and in reader children: no member, no daemon.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _harness import REPO, figure, median

if TYPE_CHECKING:
    from collections.abc import Callable

RUNS = 5
PAGES = 20
DPI = 150


def _vmhwm_mib() -> float:
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def _children_peak_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def _in_fresh_process(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                          check=False, cwd=REPO, timeout=900,
                          env={**os.environ, "TEAMCTL_PDF_FORKSERVER": "0"})
    if done.returncode != 0:
        raise SystemExit(f"bench_documents {' '.join(args)} failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.splitlines()[-1]))


# -- (a) render time -----------------------------------------------------------------------------

def render_pdfium(path: str) -> None:
    """ms per page: read_pdf (child process, all included), raw render, raw render + PNG."""
    import io

    import pypdfium2 as pdfium

    from orchestrator.attachments.pdf import PdfLimits, read_pdf

    data = Path(path).read_bytes()
    through, raw, raw_png = list[float](), list[float](), list[float]()
    for _ in range(RUNS):
        start = time.perf_counter()
        reading = read_pdf(data, "bench.pdf", PdfLimits(render_pages=PAGES))
        through.append((time.perf_counter() - start) * 1000 / PAGES)
        assert len(reading.images) == PAGES
        doc = pdfium.PdfDocument(data)
        for samples, encode in ((raw, False), (raw_png, True)):
            start = time.perf_counter()
            for index in range(PAGES):
                page = doc[index]
                bitmap = page.render(scale=DPI / 72, may_draw_forms=False)
                if encode:
                    bitmap.to_pil().save(io.BytesIO(), "PNG", compress_level=1)
                bitmap.close()
                page.close()
            samples.append((time.perf_counter() - start) * 1000 / PAGES)
        doc.close()
    print(json.dumps({"read_pdf": median(through), "raw": median(raw),
                      "raw_png": median(raw_png)}))


def render_pdftoppm(path: Path, out: Path) -> dict[str, float]:
    samples = {"png": list[float](), "ppm": list[float]()}
    for _ in range(RUNS):
        for kind, flags in (("png", ["-png"]), ("ppm", [])):
            start = time.perf_counter()
            subprocess.run(["pdftoppm", "-r", str(DPI), *flags, "-f", "1", "-l", str(PAGES),
                            str(path), str(out / kind)], check=True, timeout=300)
            samples[kind].append((time.perf_counter() - start) * 1000 / PAGES)
    return {kind: median(values) for kind, values in samples.items()}


def bench_render(directory: Path) -> None:
    from tests.support import pdfs

    path = directory / "twenty.pdf"
    path.write_bytes(pdfs.shapes_pdf(PAGES))
    ours = _in_fresh_process("--render", str(path))
    if shutil.which("pdftoppm") is None:
        raise SystemExit("pdftoppm is missing: make system-deps (poppler-utils)")
    theirs = render_pdftoppm(path, directory)
    ratio = float(ours["raw_png"]) / theirs["png"]
    print(f"render, {PAGES} pages of text and shapes at {DPI} DPI, ms per page: read_pdf "
          f"(child process, text, PNG) {ours['read_pdf']:.1f} | PDFium raw render "
          f"{ours['raw']:.1f}, render + PNG {ours['raw_png']:.1f} | pdftoppm -png "
          f"{theirs['png']:.1f}, ppm {theirs['ppm']:.1f} | PDFium/pdftoppm (PNG) {ratio:.2f}")
    figure("documents_render_read_pdf_ms_per_page", float(ours["read_pdf"]))
    figure("documents_render_pdfium_png_ms_per_page", float(ours["raw_png"]))
    figure("documents_render_pdftoppm_png_ms_per_page", theirs["png"])
    figure("documents_render_pdfium_vs_pdftoppm", ratio)


# -- (b), (c) planning ---------------------------------------------------------------------------

def plan(path: str, runtime: str) -> None:
    """Plan one document for a Claude-like or a Codex-like member: ms, peak RSS (MiB)."""
    from orchestrator.attachments.catalog import load_catalog
    from orchestrator.attachments.documents import DocumentRules, Recipient, derive_document
    from orchestrator.attachments.sniff import sniff
    from runtimes.claude.runtime import ClaudeRuntime
    from runtimes.codex.runtime import CodexRuntime

    caps = ClaudeRuntime.capabilities if runtime == "claude" else CodexRuntime.capabilities
    to = Recipient(runtime, "m", caps, load_catalog().lookup(runtime, "default"),
                   DocumentRules(), caps.image_purpose)
    data = Path(path).read_bytes()
    start = time.perf_counter()
    derived = derive_document(data, sniff(data[:1024]), Path(path).name, to)
    elapsed = (time.perf_counter() - start) * 1000
    print(json.dumps({"ms": elapsed, "route": derived.route,
                      "images": len(derived.page_variants), "main_bytes": derived.variant.bytes,
                      "peak_mib": _vmhwm_mib(), "reader_peak_mib": _children_peak_mib()}))


def bench_planning(directory: Path) -> None:
    from tests.support import pdfs

    hundred = directory / "hundred.pdf"
    hundred.write_bytes(pdfs.shapes_pdf(100))
    line = "2026-12-02T03:38:10Z INFO a log line with some words and a number 12345\n"
    text = directory / "five.log"
    text.write_bytes((line * (5_000_000 // len(line) + 1)).encode()[:5_000_000])
    for label, path in (("pdf100", hundred), ("text5mb", text)):
        for runtime in ("claude", "codex"):
            got = _in_fresh_process("--plan", str(path), runtime)
            print(f"{label} ({path.stat().st_size // 1024} KiB) for a {runtime}-like member: "
                  f"route {got['route']}, {got['images']} page images, main variant "
                  f"{got['main_bytes']} B, {got['ms']:.0f} ms, peak RSS {got['peak_mib']:.0f} "
                  f"MiB (planning process), reader child {got['reader_peak_mib']:.0f} MiB")
            figure(f"documents_{label}_{runtime}_plan_ms", float(got["ms"]))
            figure(f"documents_{label}_{runtime}_peak_rss_mib",
                   float(got["peak_mib"]))
            if label == "pdf100":
                figure(f"documents_{label}_{runtime}_reader_peak_rss_mib",
                       float(got["reader_peak_mib"]))


# -- (d) hostile files ---------------------------------------------------------------------------

HOSTILE = ("encrypted", "million_pages", "million_empty_pages", "field_page",
           "field_page_user_unit", "nested_100k", "flate_1gib", "javascript", "embedded_file",
           "corrupt")


def _hostile_pdf(name: str) -> bytes:
    from tests.support import pdfs

    million = pdfs.repeated_kids_pdf(1_000_000)
    makers: dict[str, Callable[[], bytes]] = {
        "encrypted": lambda: pdfs.encrypted_pdf("secret", user_password="pw"),
        "million_pages": lambda: million,
        "million_empty_pages": lambda: million.replace(b"(the same page, again)", b"()"),
        "field_page": lambda: pdfs.huge_page_pdf(14400, 14400),
        "field_page_user_unit": lambda: pdfs.huge_page_pdf(14400, 14400, user_unit=75000),
        "nested_100k": lambda: pdfs.nested_pdf(100_000),
        "flate_1gib": lambda: pdfs.flate_bomb_pdf(1 << 30),
        "javascript": pdfs.javascript_pdf,
        "embedded_file": pdfs.embedded_file_pdf,
        "corrupt": lambda: b"%PDF-1.7\n" + bytes(range(256)) * 40,
    }
    return makers[name]()


def hostile(name: str) -> None:
    """Read one hostile PDF with the production limits (20 pages rendered)."""
    from orchestrator.attachments.failures import AttachmentError
    from orchestrator.attachments.pdf import PdfLimits, read_pdf

    data = _hostile_pdf(name)
    start = time.perf_counter()
    try:
        reading = read_pdf(data, f"{name}.pdf", PdfLimits())
        outcome = (f"read: {reading.pages} pages, {len(reading.images)} rendered, "
                   f"{sum(len(t.encode()) for t in reading.page_texts)} B of text"
                   f"{' (stopped at the budget)' if reading.text_truncated else ''}"
                   f", js {reading.javascript}, embedded {reading.embedded_files}")
    except AttachmentError as exc:
        outcome = f"refused: {exc.failure.code}"
    print(json.dumps({"ms": (time.perf_counter() - start) * 1000, "outcome": outcome,
                      "bytes": len(data), "peak_mib": _vmhwm_mib(),
                      "reader_peak_mib": _children_peak_mib()}))


def bench_hostile() -> None:
    for name in HOSTILE:
        got = _in_fresh_process("--hostile", name)
        print(f"hostile {name} ({got['bytes']} B): {got['outcome']}; {got['ms']:.0f} ms, "
              f"reader peak RSS {got['reader_peak_mib']:.0f} MiB (the measuring process: "
              f"{got['peak_mib']:.0f} MiB)")
        figure(f"documents_hostile_{name}_reader_peak_rss_mib",
               float(got["reader_peak_mib"]))


# -- (e) a reader's start ------------------------------------------------------------------------

READS = 20


def _readers_cpu() -> float:
    """CPU seconds of every reader this process ran: its own reaped children, and those the
    fork server reaped (its children's count in /proc)."""
    from orchestrator.attachments.pdf import FORK_SERVER

    times = os.times()
    total = times.children_user + times.children_system
    if FORK_SERVER.pid is not None:
        fields = Path(f"/proc/{FORK_SERVER.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def bench_reader_start() -> None:
    from orchestrator.attachments.pdf import PdfLimits, read_pdf
    from tests.support import pdfs

    hundred = pdfs.shapes_pdf(100)
    cases = {"count": (hundred, PdfLimits(render_pages=0, max_text_bytes=0)),
             "page": (pdfs.shapes_pdf(1), PdfLimits(render_pages=1))}
    read_pdf(cases["count"][0], "warm.pdf", cases["count"][1])  # the server is up and warm
    for how in ("afresh", "forked"):
        os.environ["TEAMCTL_PDF_FORKSERVER"] = "0" if how == "afresh" else "1"
        for case, (data, limits) in cases.items():
            walls = []
            cpu = _readers_cpu()
            for _ in range(READS):
                start = time.perf_counter()
                read_pdf(data, "bench.pdf", limits)
                walls.append((time.perf_counter() - start) * 1000)
            per_read = (_readers_cpu() - cpu) * 1000 / READS
            print(f"reader {how}, {case}: {median(walls):.1f} ms a read (median of {READS}), "
                  f"readers' CPU {per_read:.0f} ms a read")
            figure(f"documents_read_{case}_{how}_ms", median(walls))
            figure(f"documents_read_{case}_{how}_cpu_ms", per_read)
    os.environ.pop("TEAMCTL_PDF_FORKSERVER")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tc-bench-") as tmp:
        bench_render(Path(tmp))
        bench_planning(Path(tmp))
    bench_hostile()
    bench_reader_start()


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    if len(sys.argv) > 1 and sys.argv[1] == "--render":
        render_pdfium(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "--plan":
        plan(sys.argv[2], sys.argv[3])
    elif len(sys.argv) > 1 and sys.argv[1] == "--hostile":
        hostile(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "--reader-start":
        bench_reader_start()
    else:
        main()
