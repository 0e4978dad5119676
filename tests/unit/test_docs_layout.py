"""docs/: the user guide in ``docs/``, the contributors' in ``docs/dev/``; the Layout of
docs/dev/architecture.md names every package of the tree, and each package's entry names every
module in it — checked against the tree, so a new package or module is placed in the doc when it
is placed in the code."""

from __future__ import annotations

import re

from tests.support.driver import REPO

ROOTS = ("orchestrator", "runtimes")
# a package's line: its name at the start of the line, indented two spaces a level
_ENTRY = re.compile(r"^( *)([a-z_]+)/(?:\s|$)")


def _layout() -> dict[str, str]:
    """Each package the Layout names (``orchestrator/daemon/board``) and its entry's text."""
    text = (REPO / "docs" / "dev" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    entries: dict[str, str] = {}
    stack: list[str] = []
    current = None
    for line in block.splitlines():
        found = _ENTRY.match(line)
        if found:
            depth = len(found.group(1)) // 2
            stack = [*stack[:depth], found.group(2)]
            current = "/".join(stack)
            entries[current] = line[found.end():]
        elif current is not None:
            entries[current] += " " + line
    return entries


def _packages() -> dict[str, list[str]]:
    """Each package of the tree and its modules (the face and ``__main__`` aside)."""
    found: dict[str, list[str]] = {}
    for root in ROOTS:
        for init in sorted((REPO / root).rglob("__init__.py")):
            package = init.parent
            found[package.relative_to(REPO).as_posix()] = sorted(
                p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__"))
    return found


def test_the_layout_names_every_package_and_only_those_of_the_tree() -> None:
    assert set(_layout()) == set(_packages())


def test_each_package_entry_names_every_module_in_it() -> None:
    layout = _layout()
    missing = {package: [m for m in modules
                         if not re.search(rf"(?<![\w.]){re.escape(m)}(?!\w)", layout[package])]
               for package, modules in _packages().items() if package in layout}
    assert {p: m for p, m in missing.items() if m} == {}


def test_the_contributors_docs_are_in_docs_dev_and_the_readme_links_both_guides() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for name in ("architecture", "testing", "performance", "new-command", "new-host",
                 "new-runtime"):
        assert (REPO / "docs" / "dev" / f"{name}.md").is_file(), name
        assert f"(docs/dev/{name}.md)" in readme, name
        assert not (REPO / "docs" / f"{name}.md").exists(), name
    for user_doc in sorted((REPO / "docs").glob("*.md")):
        assert f"(docs/{user_doc.name})" in readme, user_doc.name
