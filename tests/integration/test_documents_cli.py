"""Documents through the real daemon and CLI with the fake runtimes (docs/documents.md): a
3-page PDF and a Markdown file reach each member by its route — natively to Claude, as page
images and page-marked text to Codex and to an OpenCode model without PDF input — with the
planned bytes; markers, a hostile PDF and a lost page artifact are handled, typed."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import signal
from pathlib import Path
from typing import Any

from tests.support import images, pdfs
from tests.support.driver import REPO, LogFollower, Teamctl, queue_behind_a_busy_turn
from tests.support.members import fake_member
from tests.support.processes import children_of

FAKES = REPO / "fixtures" / "bin"
NOTES = "# Notes\n\n- the login form posts to /api/session\n- été: UTF-8 kept\n"


def _documents(teamctl: Teamctl) -> tuple[Path, Path]:
    spec = teamctl.workdir / "spec.pdf"
    spec.write_bytes(pdfs.text_pdf("Page one: the login form", "Page two: the session API",
                          "Page three: errors"))
    notes = teamctl.workdir / "notes.md"
    notes.write_text(NOTES, encoding="utf-8")
    return spec, notes


def _reported(reply: str, kind: str) -> list[dict[str, str]]:
    """What a fake said it received, per ``image:`` or ``document:`` line."""
    return [dict(re.findall(r"(\w+)=(\S+)", line)) for line in reply.splitlines()
            if line.startswith(f"{kind}: ")]


def _sent(teamctl: Teamctl, member: str, *args: str) -> tuple[dict[str, Any], str,
                                                                dict[str, Any]]:
    """The dry-run plan, the reply of the real send (--wait) and its history entry."""
    plan = teamctl.json("send", "--dry-run", *args)
    assert plan["ok"] is True, plan
    done = teamctl.run("send", *args, "--wait")
    assert done.returncode == 0, done.stderr
    [message] = teamctl.json("history", member)["messages"][-1:]
    return plan, done.stdout, message


def _codex(name: str) -> dict[str, Any]:
    return {"name": name, "runtime": "codex", "model": "gpt-5.4-mini",
            "command": str(FAKES / "codex"), "start_timeout": 20.0}


def _opencode(name: str) -> dict[str, Any]:
    return {"name": name, "runtime": "opencode", "model": "openrouter/moonshotai/kimi-k2.6",
            "command": str(FAKES / "opencode"), "start_timeout": 20.0}


def test_a_pdf_and_a_markdown_file_reach_claude_as_document_blocks_with_the_planned_bytes(
        teamctl: Teamctl) -> None:
    """Claude gets each document natively — the PDF as a base64 document block, the notes as
    a text one — and the bytes at the runtime are the planned variants' (dry run, history)."""
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")])))
    spec, notes = _documents(teamctl)
    args = ("--attach", str(spec), "--attach", str(notes), "lead", "read [Doc #1], then [Doc #2]")
    plan, reply, message = _sent(teamctl, "lead", *args)
    planned = [(a["kind"], a["route"], a["pages"], a["variants"][0]["sha256"])
               for a in plan["attachments"]]
    assert planned == [
        ("document", "native", 3, hashlib.sha256(spec.read_bytes()).hexdigest()),
        ("text", "native", None, hashlib.sha256(NOTES.encode()).hexdigest())]
    received = _reported(reply, "document")
    assert [(r["mime"], r["declared_mime"], r["source"], r["title"], r["sha256"])
            for r in received] == [
        ("application/pdf", "application/pdf", "base64", "spec.pdf", planned[0][3]),
        ("text/plain", "text/plain", "text", "notes.md", planned[1][3])]
    assert not _reported(reply, "image"), "nothing rendered for a native PDF"
    assert [(a["number"], a["kind"], a["route"], a["pages"], a["sha256"], a["page_variants"])
            for a in message["attachments"]] == [
        (1, "document", "native", 3, planned[0][3], []),
        (2, "text", "native", None, planned[1][3], [])]


def test_codex_gets_the_pdf_as_its_page_images_and_page_marked_text(teamctl: Teamctl) -> None:
    """Codex takes no PDF: the 3 rendered pages arrive as the planned image files, the text
    page by page under its [Doc #1] header; the notes as text under [Doc #2]."""
    teamctl.run("launch", str(teamctl.write_team("web", [_codex("rev")])))
    spec, notes = _documents(teamctl)
    plan, reply, message = _sent(teamctl, "rev", "--attach", str(spec), "--attach", str(notes),
                                 "rev", "review [Doc #1] against [Doc #2]")
    pdf, text = plan["attachments"]
    assert (pdf["route"], pdf["pages"], text["route"]) == ("pages", 3, "text")
    pages = [v["sha256"] for v in pdf["variants"][1:]]
    assert len(pages) == 3
    assert [r["sha256"] for r in _reported(reply, "image")] == pages
    assert "[Doc #1] spec.pdf (a PDF of 3 pages): pages 1 to 3 are the 3 page images" in reply
    for n, words in enumerate(("Page one: the login form", "Page two: the session API",
                               "Page three: errors"), 1):
        assert f"--- page {n} ---\n{words}\n" in reply
    assert f"[Doc #2] notes.md (a text file):\n{NOTES.rstrip()}\n--- end of [Doc #2] ---" in reply
    journaled = message["attachments"][0]
    assert (journaled["route"], journaled["sha256"]) == ("pages", pdf["variants"][0]["sha256"])
    assert [p["sha256"] for p in journaled["page_variants"]] == pages


def test_an_opencode_model_without_pdf_input_gets_the_pages_never_a_pdf_part(
        teamctl: Teamctl) -> None:
    """kimi-k2.6 sees images but its catalog entry has no pdf: the pages route, the planned
    page images at the fake's API and the text — no PDF file part (OpenCode would replace it
    by an ERROR text the model reads)."""
    teamctl.run("launch", str(teamctl.write_team("web", [_opencode("des")])))
    spec, _ = _documents(teamctl)
    plan, reply, _ = _sent(teamctl, "des", "--attach", str(spec), "des", "lay out [Doc #1]")
    [pdf] = plan["attachments"]
    assert (pdf["route"], pdf["pages"]) == ("pages", 3)
    assert [r["sha256"] for r in _reported(reply, "image")] == [
        v["sha256"] for v in pdf["variants"][1:]]
    assert "--- page 2 ---\nPage two: the session API" in reply
    assert not _reported(reply, "document") and "ERROR" not in reply


def test_a_doc_marker_naming_no_document_is_refused_with_its_code(teamctl: Teamctl) -> None:
    """[Doc #2] with one attachment, and [Image #1] for a PDF, refuse the whole message
    (exit 3, attachment_marker_unknown, the right marker said); nothing is journaled."""
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")])))
    spec, _ = _documents(teamctl)
    for text, said in (("see [Doc #2]", "[Doc #2]"),
                       ("see [Image #1]", "[Image #1] (attachment 1 is [Doc #1])")):
        done = teamctl.run("send", "--json", "--attach", str(spec), "lead", text)
        assert done.returncode == 3, done.stderr
        [failure] = json.loads(done.stdout)["failures"]
        assert failure["code"] == "attachment_marker_unknown"
        assert said in failure["message"]
    assert teamctl.json("history", "lead")["messages"] == []


def test_an_encrypted_or_corrupt_pdf_is_refused_typed_and_the_daemon_answers(
        teamctl: Teamctl) -> None:
    """A PDF that needs a password, and one that is not a PDF past its header: each a typed
    refusal with its code (exit 3), and the daemon goes on answering."""
    teamctl.run("launch", str(teamctl.write_team("web", [_codex("rev")])))
    locked = teamctl.workdir / "locked.pdf"
    locked.write_bytes(pdfs.encrypted_pdf("locked", "secret-pw"))
    broken = teamctl.workdir / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 64)
    for path, code in ((locked, "attachment_document_encrypted"),
                       (broken, "attachment_corrupt_document")):
        done = teamctl.run("send", "--json", "--attach", str(path), "rev", "read it")
        assert done.returncode == 3, done.stdout + done.stderr
        [failure] = json.loads(done.stdout)["failures"]
        assert (failure["code"], failure["attachment"]) == (code, path.name)
        status = teamctl.run("status")
        assert status.returncode == 0 and "running" in status.stdout
    assert teamctl.json("history", "rev")["messages"] == []


def test_a_page_image_deleted_from_the_store_before_delivery_is_rebuilt_with_its_sha256(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """A page variant's artifact lost between send and delivery is made again from the
    original PDF — the same bytes (sha256) reach the member and are back in the store."""
    teamctl.run("launch", str(teamctl.write_team("web", [
        fake_member("lead", documents="pages")])))
    spec, _ = _documents(teamctl)
    queued, release = queue_behind_a_busy_turn(teamctl, follow_logs, "lead", spec)
    [document] = queued["attachments"]
    pages = [p["sha256"] for p in document["page_variants"]]
    assert document["route"] == "pages" and len(pages) == 3
    lost = teamctl.home / "artifacts" / pages[1][:2] / pages[1]
    lost.unlink()
    release()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == queued["id"])
    [answered] = [m for m in teamctl.json("history", "lead")["messages"]
                  if m["id"] == queued["id"]]
    assert [r["sha256"] for r in images.reported(answered["reply"])] == pages
    assert hashlib.sha256(lost.read_bytes()).hexdigest() == pages[1]


def test_dry_run_and_history_print_a_document_by_route_and_export_inlines_what_was_sent(
        teamctl: Teamctl) -> None:
    """The human dry run and history say [Doc #N], the route and the page counts with short
    sha256s (no base64); export inlines the sent text and each page image, verified."""
    teamctl.run("launch", str(teamctl.write_team("web", [_codex("rev")])))
    spec, notes = _documents(teamctl)
    args = ("--attach", str(spec), "--attach", str(notes), "rev", "read [Doc #1]")
    plan = teamctl.run("send", "--dry-run", *args)
    assert plan.returncode == 0, plan.stderr
    lines = plan.stdout.splitlines()
    assert lines[0].startswith("[Doc #1] spec.pdf — pages (pages 3, page images 3): "
                               "text/plain ")
    assert [line.split(":")[0] for line in lines[1:4]] == ["  page 1", "  page 2", "  page 3"]
    assert lines[4].startswith("[Doc #2] notes.md — text: text/plain ")
    assert teamctl.run("send", *args, "--wait").returncode == 0
    history = teamctl.run("history", "rev").stdout
    assert "  @ [Doc #1] spec.pdf — pages (pages 3, page images 3): text/plain" in history
    assert "  @ [Doc #2] notes.md — text: text/plain" in history
    for output in (plan.stdout, history):
        assert not re.search(r"[A-Za-z0-9+/]{80,}", output), "no base64, no full sha256"

    out = teamctl.workdir / "rev.json"
    done = teamctl.run("export", "rev", "--out", str(out))
    assert done.stdout.strip() == (f"exported 1 message, 0 images and 2 documents (inlined) "
                                   f"to {out}")
    [message] = json.loads(out.read_text())["members"][0]["messages"]
    pdf, text = message["attachments"]
    blobs = [pdf, *pdf["page_variants"], text]
    assert [hashlib.sha256(base64.b64decode(b["data"])).hexdigest() for b in blobs] == [
        b["sha256"] for b in blobs]
    assert len(pdf["page_variants"]) == 3
    assert base64.b64decode(text["data"]).decode() == NOTES
    assert "--- page 1 ---" in base64.b64decode(pdf["data"]).decode()
    log = (teamctl.home / "logs" / "teamctl.jsonl").read_text()
    assert not re.search(r"[A-Za-z0-9+/]{200,}", log), "the bytes never reach the log"


def test_an_acp_agent_with_embedded_context_gets_each_document_as_a_resource(
        teamctl: Teamctl) -> None:
    """documents = "native" to an ACP agent that advertises embeddedContext: the PDF as a blob
    resource, the notes as a text one — the planned bytes at the agent, under teamctl: URIs."""
    teamctl.run("launch", str(teamctl.write_team("web", [{
        "name": "qw", "runtime": "acp", "command": [str(FAKES / "fake-acp"), "--acp"],
        "start_timeout": 20.0, "documents": "native"}])))
    spec, notes = _documents(teamctl)
    plan, reply, _ = _sent(teamctl, "qw", "--attach", str(spec), "--attach", str(notes), "qw",
                           "read [Doc #1] and [Doc #2]")
    assert [a["route"] for a in plan["attachments"]] == ["native", "native"]
    received = _reported(reply, "document")
    assert [(r["mime"], r["declared_mime"], r["sha256"]) for r in received] == [
        ("application/pdf", "application/pdf", plan["attachments"][0]["variants"][0]["sha256"]),
        ("text/plain", "text/plain", plan["attachments"][1]["variants"][0]["sha256"])]
    assert all(r["uri"].startswith("teamctl%3A%2F%2Fdoc%2F") for r in received)


def test_an_opencode_model_that_reads_pdfs_gets_a_pdf_file_part_with_the_planned_bytes(
        teamctl: Teamctl) -> None:
    """anthropic/claude-sonnet-4-5 through OpenCode: the catalog's pdf says native, the member's
    generated config lists pdf, and the fake's API gets the PDF file part — no ERROR text."""
    teamctl.run("launch", str(teamctl.write_team("web", [
        dict(_opencode("ocn"), model="anthropic/claude-sonnet-4-5")])))
    spec, _ = _documents(teamctl)
    plan, reply, _ = _sent(teamctl, "ocn", "--attach", str(spec), "ocn", "read [Doc #1]")
    [pdf] = plan["attachments"]
    assert (pdf["route"], pdf["pages"]) == ("native", 3)
    [received] = _reported(reply, "document")
    assert (received["mime"], received["declared_mime"], received["filename"],
            received["sha256"]) == ("application/pdf", "application/pdf", "spec.pdf",
                                    pdf["variants"][0]["sha256"])
    assert "ERROR" not in reply and not _reported(reply, "image")


def _fork_servers(daemon: int) -> list[int]:
    return [pid for pid in children_of(daemon)
            if b"pdf_forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def test_the_daemons_pdf_fork_server_killed_between_sends_is_started_again(
        teamctl: Teamctl) -> None:
    """The PDF readers' fork server is the daemon's child, started by the first PDF: killed
    (the OOM killer, an operator), the next PDF starts another and is read and answered; the
    daemon stays up and both messages are answered once."""
    teamctl.run("launch", str(teamctl.write_team("web", [_codex("rev")])))
    spec, _ = _documents(teamctl)
    plan, _, _ = _sent(teamctl, "rev", "--attach", str(spec), "rev", "first [Doc #1]")
    assert plan["attachments"][0]["route"] == "pages"
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    [server] = _fork_servers(daemon)
    os.kill(server, signal.SIGKILL)
    again, reply, _ = _sent(teamctl, "rev", "--attach", str(spec), "rev", "again [Doc #1]")
    assert again["attachments"][0]["variants"] == plan["attachments"][0]["variants"]
    assert "--- page 1 ---" in reply
    [after] = _fork_servers(daemon)
    assert after != server
    assert teamctl.run("status").returncode == 0
    history = teamctl.json("history", "rev")["messages"]
    assert len(history) == 2 and all(m["state"] == "answered" for m in history)
