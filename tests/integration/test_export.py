"""``teamctl export``: the conversation as one JSON document whose inlined images hash to the
variants that were sent; --all, --redact, a missing artifact, and bad requests."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import TYPE_CHECKING

from tests.support import images
from tests.support.members import fake_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl


def _team_with_images(teamctl: Teamctl) -> list[str]:
    """rev got two screenshots, lead one plain message; the sent variants' sha256."""
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev"),
                                                         fake_member("lead")])))
    shots = [images.save(images.screenshot(320 + 40 * i, 200), teamctl.workdir / f"s{i}.png",
                         "PNG") for i in (1, 2)]
    attach = [a for s in shots for a in ("--attach", str(s))]
    plan = teamctl.json("send", "--dry-run", *attach, "rev", "compare [Image #2]")
    done = teamctl.run("send", *attach, "rev", "compare [Image #2]", "--wait")
    assert done.returncode == 0, done.stderr
    assert teamctl.run("send", "lead", "hello", "--wait").returncode == 0
    return [a["variants"][0]["sha256"] for a in plan["attachments"]]


def test_an_export_stands_alone_with_the_bytes_that_were_sent(teamctl: Teamctl) -> None:
    sent = _team_with_images(teamctl)
    out = teamctl.workdir / "rev.json"
    done = teamctl.run("export", "rev", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"exported 1 message and 2 images (inlined) to {out}"
    assert out.stat().st_mode & 0o777 == 0o600
    doc = json.loads(out.read_text())
    assert (doc["format"], doc["version"], doc["team"], doc["redacted"], doc["missing"]) == (
        "teamctl-export", 1, "web", False, [])
    [member] = doc["members"]
    assert (member["name"], member["runtime"], member["model"]) == (
        "rev", "claude", "claude-sonnet-4-5")
    [message] = member["messages"]
    assert (message["sender"], message["text"], message["state"], message["attempts"]) == (
        "operator", "compare [Image #2]", "answered", 1)
    assert message["reply"].startswith("fake-claude (claude-sonnet-4-5) received: compare")
    assert message["created_at"] and message["updated_at"] >= message["created_at"]
    inlined = [hashlib.sha256(base64.b64decode(a["data"])).hexdigest()
               for a in message["attachments"]]
    assert inlined == sent == [a["sha256"] for a in message["attachments"]]
    assert [a["number"] for a in message["attachments"]] == [1, 2]

    schema = json.loads(teamctl.run("schema", "export").stdout)
    assert schema["title"] == "ExportDoc"


def test_all_members_redact_and_a_missing_artifact(teamctl: Teamctl) -> None:
    sent = _team_with_images(teamctl)
    every = json.loads(teamctl.run("export", "--all").stdout)
    assert [m["name"] for m in every["members"]] == ["rev", "lead"]
    assert every["members"][1]["messages"][0]["text"] == "hello"

    redacted = teamctl.run("export", "--all", "--redact")
    doc = json.loads(redacted.stdout)
    assert doc["redacted"] is True
    attachments = doc["members"][0]["messages"][0]["attachments"]
    assert [a["data"] for a in attachments] == [None, None]
    data = (teamctl.home / "artifacts" / sent[0][:2] / sent[0]).read_bytes()
    assert base64.b64encode(data).decode()[:200] not in redacted.stdout

    (teamctl.home / "artifacts" / sent[0][:2] / sent[0]).unlink()
    partial = json.loads(teamctl.run("export", "rev").stdout)
    assert partial["missing"] == [sent[0]]
    first, second = partial["members"][0]["messages"][0]["attachments"]
    assert (first["missing"], first["data"], first["width"]) == (True, None, 360)
    assert second["missing"] is False and second["data"]


def test_bad_requests_name_what_to_do(teamctl: Teamctl) -> None:
    _team_with_images(teamctl)
    unknown = teamctl.run("export", "nobody")
    assert unknown.returncode == 1
    assert "nobody" in unknown.stderr and "rev" in unknown.stderr and "lead" in unknown.stderr
    for args in ((), ("rev", "--all")):
        both = teamctl.run("export", *args)
        assert both.returncode == 2
        assert "give MEMBER, or --all" in both.stderr
    unwritable = teamctl.run("export", "rev", "--out", str(teamctl.workdir / "no" / "x.json"))
    assert unwritable.returncode == 2
    assert "cannot write" in unwritable.stderr

    assert teamctl.run("stop", "web").returncode == 0
    after = json.loads(teamctl.run("export", "--team", "web", "rev").stdout)
    assert len(after["members"][0]["messages"]) == 1, "a stopped team's journal exports too"


def _team_with_a_message(teamctl: Teamctl) -> None:
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")]))
                       ).returncode == 0
    assert teamctl.run("send", "rev", "hello", "--wait").returncode == 0


def test_export_out_refuses_to_replace_an_existing_file_without_force(
        teamctl: Teamctl) -> None:
    """--out never replaces what is at the path unless --force: a typed refusal that says
    how to go on, the file untouched; with --force a regular file is replaced (0600)."""
    _team_with_a_message(teamctl)
    out = teamctl.workdir / "precious.json"
    out.write_text("precious\n")
    done = teamctl.run("export", "rev", "--out", str(out))
    assert done.returncode == 2
    assert "already exists" in done.stderr and "pass --force or choose another path" in \
        done.stderr
    assert out.read_text() == "precious\n"
    forced = teamctl.run("export", "rev", "--out", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(out.read_text())["members"][0]["messages"][0]["text"] == "hello"
    assert out.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in teamctl.workdir.iterdir() if p.name.startswith(".precious")] == []


def test_export_out_never_follows_or_replaces_a_symlink_or_a_fifo(teamctl: Teamctl) -> None:
    """A symlink at --out is neither followed (its target keeps its bytes) nor replaced, and
    a FIFO is not replaced, even with --force: typed refusals, nothing written."""
    import os

    _team_with_a_message(teamctl)
    target = teamctl.workdir / "target.txt"
    target.write_text("someone else's\n")
    link = teamctl.workdir / "link.json"
    link.symlink_to(target)
    dangling = teamctl.workdir / "dangling.json"
    dangling.symlink_to(teamctl.workdir / "nowhere.json")
    fifo = teamctl.workdir / "fifo.json"
    os.mkfifo(fifo)
    for path in (link, dangling, fifo):
        for force in ((), ("--force",)):
            done = teamctl.run("export", "rev", "--out", str(path), *force, timeout=30)
            assert done.returncode == 2, (path, force, done.stderr)
            assert "not a regular file" in done.stderr and "choose another path" in done.stderr
    assert target.read_text() == "someone else's\n" and link.is_symlink()
    assert dangling.is_symlink() and not (teamctl.workdir / "nowhere.json").exists()
    assert fifo.is_fifo()


def test_export_out_dash_writes_to_standard_output(teamctl: Teamctl) -> None:
    """`--out -` is standard output, not a file named "-"."""
    _team_with_a_message(teamctl)
    done = teamctl.run("export", "rev", "--out", "-")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["members"][0]["messages"][0]["text"] == "hello"
    assert not (teamctl.workdir / "-").exists()
