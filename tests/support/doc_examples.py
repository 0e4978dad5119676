"""The team files the README and docs/ show, read from their fenced ```toml blocks: a block is a
whole team file when it has a ``[team]`` with a name and ``[[members]]`` that each name their
runtime (a block that shows a few keys of a table is not one). Tests launch each as written,
its members' commands pointed at the fake CLIs of fixtures/bin (``for_fakes``)."""

from __future__ import annotations

import json
import re
import textwrap
import tomllib
from dataclasses import dataclass
from typing import Any

from tests.support.driver import REPO, toml_value

__all__ = ["Example", "for_fakes", "team_examples", "toml_text"]

# a fence may be indented (a block inside a list item): its lines are dedented
_FENCED = re.compile(r"^[ \t]*```toml\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)
FAKES = REPO / "fixtures" / "bin"
# the fake CLI that speaks each runtime's protocol
_FAKE = {"claude": "claude", "codex": "codex", "opencode": "opencode", "acp": "fake-acp"}


@dataclass(frozen=True)
class Example:
    """One whole team file of the docs: where it is (``README.md:27``) and its TOML."""

    source: str
    text: str

    @property
    def doc(self) -> dict[str, Any]:
        return tomllib.loads(self.text)

    @property
    def offline(self) -> str | None:
        """Why it cannot run against the fake CLIs on this machine (None: it can)."""
        doc = self.doc
        hosts = doc.get("hosts", {})
        for member in doc["members"]:
            host = member.get("host")
            if host is None:
                continue
            if hosts.get(host, {}).get("kind") == "kubernetes":
                return (f"member {member['name']} runs in a pod of Kubernetes context "
                        f"{hosts[host].get('context', '(current)')!r}: a cluster, not a fake CLI")
            return f"member {member['name']} runs on SSH host {host!r}: a machine, not a fake CLI"
        return None


def _whole(doc: dict[str, Any]) -> bool:
    members = doc.get("members")
    return isinstance(doc.get("team"), dict) and "name" in doc["team"] and \
        isinstance(members, list) and bool(members) and \
        all(isinstance(m, dict) and "name" in m and "runtime" in m for m in members)


def team_examples() -> list[Example]:
    """Every whole team file of README.md and docs/*.md, in the order a reader meets them."""
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        text = path.read_text()
        for block in _FENCED.finditer(text):
            body = textwrap.dedent(block.group(1))
            if _whole(tomllib.loads(body)):
                line = text[:block.start()].count("\n") + 1
                found.append(Example(f"{path.relative_to(REPO)}:{line}", body))
    return found


def for_fakes(doc: dict[str, Any], **member: Any) -> dict[str, Any]:
    """The team file with each member's command the fake CLI of its runtime (an agent preset
    keeps its arguments: the fake takes any; an ACP member's fake lists its MCP tools) and
    ``member``'s keys added to each member."""
    members = []
    for row in doc["members"]:
        fake = str(FAKES / _FAKE[row["runtime"]])
        command = [fake, *row["command"][1:]] if isinstance(row.get("command"), list) else fake
        if row["runtime"] == "acp":  # lists the session's MCP tools, as Qwen Code does at
            # once in the background: a preset that waits for them (qwen) waited out its
            # 15 s deadline at each start (twice a relaunch test)
            row = {**row, "env": {**row.get("env", {}), "FAKE_ACP_MCP_LATE": "0"}}
        members.append({**row, "command": command, **member})
    return {**doc, "members": members}


def _key(name: str) -> str:
    """A table name as TOML writes it: bare where it may be (``box``), else quoted
    (``"claude:operator"``, an account's name)."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def toml_text(doc: dict[str, Any]) -> str:
    """A team file's TOML: top-level keys, then ``[table]``s, ``[table.NAME]``s (hosts) and
    ``[[members]]``, each value inline."""
    lines = [f"{k} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict | list)]
    for key, value in doc.items():
        if isinstance(value, list):
            for row in value:
                lines += ["", f"[[{key}]]", *(f"{k} = {toml_value(v)}" for k, v in row.items())]
        elif isinstance(value, dict) and value and all(isinstance(v, dict)
                                                       for v in value.values()):
            for name, table in value.items():
                lines += ["", f"[{key}.{_key(name)}]", *(f"{k} = {toml_value(v)}"
                                                   for k, v in table.items())]
        elif isinstance(value, dict):
            lines += ["", f"[{key}]", *(f"{k} = {toml_value(v)}" for k, v in value.items())]
    return "\n".join(lines) + "\n"
