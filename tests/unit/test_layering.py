"""The layout of docs/dev/architecture.md ("Dependency rules"), read from the import graph.

Every module of ``orchestrator/`` and ``runtimes/`` is parsed with ``ast``; every import counts,
the ones inside functions too (a lazy import is still a dependency), except those under
``if TYPE_CHECKING:`` (never run) — but for the check of circles, where a type shared both ways
ties two modules as surely as a call does. A rule broken names the module and the import that
breaks it.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from typing import TYPE_CHECKING, get_args

from orchestrator.client.lazy_commands import LAZY_COMMANDS
from tests.support.driver import REPO
from tests.support.import_graph import (
    Edge,
    circles,
    find_cycle,
    import_graph,
    imports_of,
    loaded_by,
    module_edges,
    modules_under,
    parsed,
    project_modules,
)
from tests.support.source_facts import facts

if TYPE_CHECKING:
    from pathlib import Path

# the shared modules the CLI and the MCP relay may load: they must not pull in pydantic
STDLIB_ONLY = ("orchestrator.client.mcp_bridge", "orchestrator.limits", "orchestrator.protocol",
               "orchestrator.rpc", "orchestrator.visible")
# orchestrator.paths finds the home with platformdirs (pure Python, a few modules)
LIGHT = {"platformdirs"}


def _side(module: str) -> str:
    for prefix, side in (("orchestrator.client", "client"), ("orchestrator.daemon", "daemon"),
                         ("runtimes", "runtimes")):
        if module == prefix or module.startswith(prefix + "."):
            return side
    return "client" if module == "orchestrator.__main__" else "shared"  # the entry point


def _shown(edges: list[Edge]) -> list[str]:
    return [f"{e.source}:{e.line} imports {e.target}" + (" (in a function)" if e.lazy else "")
            for e in edges]


@functools.cache
def project_graph() -> list[Edge]:
    """The graph of this checkout, built once per process when a test first asks (not when
    the module is collected: every test worker collects it)."""
    return import_graph(REPO)


def _crossing(source_side: str, target_side: str) -> list[Edge]:
    return [e for e in project_graph()
            if _side(e.source) == source_side and _side(e.target) == target_side]


def test_no_module_of_orchestrator_or_runtimes_is_part_of_an_import_cycle() -> None:
    """A cycle makes import order matter (a name missing at import time, depending on which
    module a caller loads first) and ties the modules in it into one; the client's command
    modules and ``cli`` once imported each other."""
    assert find_cycle(project_graph()) is None, " -> ".join(find_cycle(project_graph()) or [])


@functools.cache
def typed_graph() -> list[Edge]:
    return import_graph(REPO, typed=True)


def test_no_import_circle_even_counting_the_imports_made_only_for_type_checking() -> None:
    """A type two modules both need lives below both: an ``if TYPE_CHECKING:`` import back up
    ties them into one as surely as a call does (issue 46 counted five such circles)."""
    assert circles(typed_graph()) == []


def test_the_circle_finder_finds_every_circle_and_nothing_else() -> None:
    edges = [Edge("a", "b", lazy=False, line=1), Edge("b", "a", lazy=False, line=1),
             Edge("c", "d", lazy=False, line=1), Edge("d", "e", lazy=False, line=1),
             Edge("e", "c", lazy=False, line=1), Edge("e", "f", lazy=False, line=1)]
    assert circles(edges) == [["a", "b"], ["c", "d", "e"]]
    assert circles(edges[2:4]) == []


def _private_parts(module: str) -> str | None:
    """The daemon's package a private module (``a.b._c``, or under one) belongs to; None: a
    public one, or not the daemon's."""
    if not module.startswith("orchestrator.daemon."):
        return None
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def test_a_package_s_private_modules_are_imported_only_inside_it() -> None:
    """A subsystem is a package with one face: ``daemon/board/__init__.py`` is what the rest of
    the daemon imports, ``board/_offers.py`` and its siblings are the package's own
    (docs/dev/architecture.md, "Layout")."""
    wrong = [e for e in project_graph() + typed_graph()
             if (owner := _private_parts(e.target)) is not None
             and not e.source.startswith(owner + ".") and e.source != owner]
    assert not wrong, _shown(sorted(set(wrong), key=lambda e: (e.source, e.line)))
    assert _private_parts("orchestrator.daemon.board._offers") == "orchestrator.daemon.board"


def _on_another_object(target: ast.expr) -> bool:
    """``x.y`` (x not ``self`` nor ``late``) or ``self.x.y``."""
    base = target.value if isinstance(target, ast.Attribute) else None
    if isinstance(base, ast.Name):
        return base.id not in ("self", "late")
    return isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name)


def _wired_after(tree: ast.AST) -> list[int]:
    """The lines that wire a part after it was built: an attribute of another object assigned
    (``mailbox.on_idle = offers.on_idle``, ``self._sockets.handler = ...``) or a hook list
    appended to (``supervisor.on_exit.append(...)``). A module's own attributes (``self.x``)
    and the late-bound parts of the construction (``late.x``) are not wiring."""
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        found += [node.lineno for target in targets if _on_another_object(target)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("append", "extend") \
                and isinstance(node.func.value, ast.Attribute) \
                and node.func.value.attr.startswith("on_"):
            found.append(node.lineno)
    return sorted(found)


def test_the_core_is_built_whole_no_part_is_wired_after_it_was_built() -> None:
    """``build_core`` (and the composition root around it) reads as the construction, in
    dependency order: each part gets its collaborators when it is built, so no reader has to
    find an ``x.on_y = z`` further down to know what a part calls. The check sees one."""
    for name in ("core", "main"):
        path = REPO / "orchestrator" / "daemon" / f"{name}.py"
        assert _wired_after(parsed(path)) == [], f"{path.name}: {_wired_after(parsed(path))}"
    wired = ast.parse("mailbox.on_idle = offers.on_idle\nself._s.handler = h\n"
                      "supervisor.on_exit.append(leases.exited)\nself.x = 1\nlate.board = b\n")
    assert _wired_after(wired) == [1, 2, 3]


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import() -> None:
    """The check above can fail: two modules importing each other, one inside a function."""
    edges = [Edge("a", "b", lazy=False, line=1), Edge("b", "c", lazy=False, line=1),
             Edge("c", "a", lazy=True, line=9), Edge("c", "d", lazy=False, line=2)]
    assert find_cycle(edges) == ["a", "b", "c", "a"]
    assert find_cycle(edges[:2] + edges[3:]) is None


def test_the_shared_modules_import_neither_side_nor_the_runtimes() -> None:
    """``orchestrator/`` (config, contracts, errors, limits, rpc, protocol, attachments/...) is what
    both sides share: it imports neither the client, the daemon nor a runtime."""
    wrong = [e for e in project_graph()
             if _side(e.source) == "shared" and _side(e.target) != "shared"]
    assert not wrong, _shown(wrong)


def test_a_runtime_imports_only_the_contracts_from_orchestrator() -> None:
    """A runtime knows nothing of SQLite, the CLI, the mailbox or the supervisor: from
    ``orchestrator`` it reads ``contracts`` alone, and never ``orchestrator.daemon`` (the
    registry, which is no runtime, also reads the table of runtime names it registers)."""
    allowed = {("runtimes.registry", "orchestrator.runtime_table")}
    wrong = [e for e in project_graph() if _side(e.source) == "runtimes" and e.target.startswith(
        "orchestrator") and e.target != "orchestrator.contracts"
        and (e.source, e.target) not in allowed]
    assert not wrong, _shown(wrong)


def test_the_daemon_never_imports_the_client() -> None:
    wrong = _crossing("daemon", "client")
    assert not wrong, _shown(wrong)


def test_the_client_reaches_the_daemon_only_through_teamctl_daemons_one_lazy_import() -> None:
    """The CLI stays a thin, fast client: the daemon's code is loaded only by ``teamctl daemon``
    (the process that becomes the daemon), inside that command."""
    into_daemon = _crossing("client", "daemon")
    allowed = [e for e in into_daemon if e.source == "orchestrator.client.cli"
               and e.target == "orchestrator.daemon.main" and e.lazy]
    assert len(allowed) == 1, _shown(into_daemon)
    assert into_daemon == allowed, _shown(into_daemon)


def test_only_the_composition_root_imports_the_runtime_registry() -> None:
    wrong = [e for e in project_graph() if e.target == "runtimes.registry"
             and e.source != "orchestrator.daemon.main"]
    assert not wrong, _shown(wrong)


def test_in_the_client_only_doctor_reads_the_runtimes() -> None:
    """``teamctl doctor`` must look where the members' preflight looks (logins, provider keys,
    the SSH host check); no other client module loads a runtime."""
    wrong = [e for e in _crossing("client", "runtimes") if e.source != "orchestrator.client.doctor"]
    assert not wrong, _shown(wrong)


def _closure(start: str, *, lazy: bool) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        module = todo.pop()
        for edge in module_edges(module):
            if (lazy or not edge.lazy) and edge.target not in seen:
                seen.add(edge.target)
                todo.append(edge.target)
    return seen


def _third_party(modules: set[str]) -> set[str]:
    paths = modules_under(REPO)
    found = set()
    for module in modules:
        for fact in imports_of(paths[module]):
            names = ([] if fact.typed or fact.level else list(fact.names)
                     if fact.module is None else [fact.module])
            found |= {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - {
                "orchestrator", "runtimes"}
    return found


def test_the_mcp_relay_and_the_limits_load_only_the_standard_library() -> None:
    """The MCP relay is started by each member's CLI (one per member: it must start fast and
    small; tests/unit/test_mcp_bridge.py holds what it loads to a list), and the limits are
    read by the CLI: neither may load pydantic (the home's ``platformdirs`` aside)."""
    for module in STDLIB_ONLY:
        assert _third_party(_closure(module, lazy=True)) <= LIGHT, module


def test_the_cli_loads_click_and_the_standard_library_only_when_it_starts() -> None:
    """``teamctl status`` must start fast: what a command loads when it runs (pydantic for
    ``launch``) is imported inside that command — in the CLI and in each command module it
    imports by name when one of their commands runs (``LAZY_COMMANDS``)."""
    # the CLI itself loads platformdirs only when a command asks for the home (not for --help)
    assert _third_party(_closure("orchestrator.client.cli", lazy=False)) == {"click"}
    for module in sorted({r.module for r in LAZY_COMMANDS.values()}):
        assert {"click"} <= _third_party(_closure(module, lazy=False)) <= {"click", *LIGHT}, module


def test_the_core_imports_no_runtime_adapter_only_the_composition_root_does() -> None:
    """``orchestrator/daemon`` names runtimes only through the port (``orchestrator.ports``)
    and the table's capability fields: one module, ``daemon.main``, wires the adapters in (the
    runtime registry, and the hosts wing's, which builds every member's host)."""
    wrong = [e for e in _crossing("daemon", "runtimes") if e.source != "orchestrator.daemon.main"]
    assert not wrong, _shown(wrong)


def _runtime_names_spelt(path: Path) -> list[str]:
    from orchestrator.runtime_table import RuntimeName

    names = set(get_args(RuntimeName))
    return [f"{path.relative_to(REPO)}:{line} {value!r}"
            for line, value in facts(path, _short_words) if value in names]


_WORD = re.compile(r"[a-z][a-z0-9_-]{0,31}")  # what a runtime's name is (the check asserts it)


def _short_words(source: bytes, filename: str) -> list[tuple[int, str]]:
    """Every string constant that could be a runtime's name (a short lower-case word), with
    its line."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source, filename=filename))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and _WORD.fullmatch(node.value)]


def test_no_runtime_name_is_spelt_in_orchestrator_outside_the_runtime_table() -> None:
    """Capabilities, not names: the core asks ``runtime_info(name).reports_cost``, never
    ``runtime == "codex"``; a runtime's name is spelt once, in ``orchestrator.runtime_table``
    (its rows and the team file's ``RuntimeName`` literal)."""
    table = REPO / "orchestrator" / "runtime_table.py"
    spelt = [hit for path in sorted((REPO / "orchestrator").rglob("*.py")) if path != table
             for hit in _runtime_names_spelt(path)]
    assert not spelt, spelt
    assert _runtime_names_spelt(table), "the check finds the names where they are"
    from orchestrator.runtime_table import RuntimeName

    assert all(_WORD.fullmatch(name) for name in get_args(RuntimeName)), "each name is a word"


def _adapter(module: str) -> str | None:
    """The runtime adapter a module belongs to (None: shared by all, or no adapter)."""
    for prefix in ("runtimes.codex.exec", "runtimes.codex.app_server", "runtimes.codex",
                   "runtimes.claude", "runtimes.opencode", "runtimes.acp"):
        if module.startswith(prefix):
            return prefix
    return None


def _across_adapters(edges: list[Edge]) -> list[Edge]:
    """Imports from one adapter into another (the Codex package may pick its transport)."""
    return [e for e in edges if None not in (_adapter(e.source), _adapter(e.target))
            and _adapter(e.source) != _adapter(e.target)
            and _adapter(e.target) != "runtimes.codex"
            and not (_adapter(e.source) == "runtimes.codex" and e.target.startswith(
                "runtimes.codex."))]


def test_no_adapter_imports_another_and_codex_transports_never_each_other() -> None:
    """An adapter is its CLI's protocol on the kit (``runtimes.kit``, ``base``, ``framing``):
    it takes nothing from another adapter, and Codex's exec and app-server transports share
    ``codex._shared``, never each other (``codex`` and ``codex_app`` once imported each
    other). The rule sees such an import."""
    assert not _across_adapters(project_graph()), _shown(_across_adapters(project_graph()))
    wrong = Edge("runtimes.codex.app_server", "runtimes.codex.exec", lazy=True, line=1)
    assert _across_adapters([wrong]) == [wrong]


def test_the_cli_loads_no_command_s_own_modules_at_start() -> None:
    """Every ``teamctl`` call pays the CLI's imports (issue 26's start-up figure, issue 45's
    1.5×): a command's own modules load when it runs — ``notify init``'s operator file
    (tomllib, secrets), the clipboard, the MCP server, the approvals, costs, export, task,
    live-view and notify commands, the socket's client — and nothing of the daemon's
    (pydantic, anyio, structlog)."""
    assert loaded_by("orchestrator.client.cli", (
        "orchestrator.notify_operator", "tomllib", "secrets", "PIL", "pydantic", "anyio",
        "structlog", "httpx", "orchestrator.client.clipboard",
        "orchestrator.client.mcp_bridge", "orchestrator.client.calls", "socket", "tempfile",
        *sorted({row.module for row in LAZY_COMMANDS.values()}))) == []


_ADAPTERS = ("runtimes.claude", "runtimes.opencode", "runtimes.acp", "runtimes.codex",
             "runtimes.kit", "runtimes.describers")


def _asks_a_host_class(tree: ast.AST) -> list[int]:
    """The lines where ``isinstance``/``issubclass``/``type`` is asked of a host."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass", "type") and node.args
            and "host" in ast.unparse(node.args[0]).lower()]


def _host_imports(tree: ast.AST) -> list[int]:
    """The lines importing from the hosts wing, type-only imports among them."""
    return [node.lineno for node in ast.walk(tree)
            if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "runtimes.hosts"))
            or (isinstance(node, ast.Import)
                and any(a.name.startswith("runtimes.hosts") for a in node.names))]


def _asks_or_imports_a_host(source: bytes, filename: str) -> list[int]:
    tree = ast.parse(source, filename=filename)
    return _asks_a_host_class(tree) + _host_imports(tree)


def test_no_adapter_imports_a_host_or_asks_which_host_it_has() -> None:
    """An adapter reads ``spec.host.profile`` (``HostProfile``: ``confines_processes``,
    ``inbound_socket``, ``checks_local_login``, ``pauses``), never the host's class: Codex
    asked ``isinstance(spec.host, SandboxHost)`` and OpenCode ``InboundHost``, both importing
    the sandbox's module. The rule sees such a question and such an import."""
    wrong = [f"{name}:{line}" for name, path in project_modules().items()
             if name.startswith(_ADAPTERS) for line in facts(path, _asks_or_imports_a_host)]
    assert not wrong, wrong
    asked = ast.parse("from runtimes.hosts.sandbox.host import SandboxHost\n"
                      "boxed = isinstance(spec.host, SandboxHost)\n")
    assert _asks_a_host_class(asked) == [2] and _host_imports(asked) == [1]


def test_every_package_of_the_tree_is_in_the_wheel() -> None:
    """pyproject.toml lists its packages by hand (the editable install stays a plain .pth): a
    package missing there is missing from a built wheel — four were (control, members,
    protocol, worktrees) until the daemon's packages were checked against this list."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    tree = {init.parent.relative_to(REPO).as_posix().replace("/", ".")
            for root in ("orchestrator", "runtimes")
            for init in (REPO / root).rglob("__init__.py")}
    assert tree <= listed, sorted(tree - listed)
    assert all((REPO / name.replace(".", "/")).is_dir() for name in listed)
