"""The layout of docs/architecture.md ("Dependency rules"), read from the import graph.

Every module of ``orchestrator/`` and ``runtimes/`` is parsed with ``ast``; every import counts,
the ones inside functions too (a lazy import is still a dependency), except those under
``if TYPE_CHECKING:`` (never run). A rule broken names the module and the import that breaks it.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard, get_args

from orchestrator.runtime_table import RUNTIMES
from tests.conftest import REPO

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PACKAGES = ("orchestrator", "runtimes")
# the shared modules the CLI and the MCP server may load: they must not pull in pydantic
STDLIB_ONLY = ("orchestrator.client.mcp_server", "orchestrator.limits", "orchestrator.rpc",
               "orchestrator.visible")
# orchestrator.paths finds the home with platformdirs (pure Python, a few modules)
LIGHT = {"platformdirs"}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    lazy: bool  # inside a function: runs when called, not when the module loads
    line: int


def _modules(root: Path) -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _is_type_checking(node: ast.AST) -> TypeGuard[ast.If]:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Each import statement and whether it sits inside a function. Only statements are
    walked (an import is a statement; no expression holds one), and the body of an
    ``if TYPE_CHECKING:`` is not (its ``else`` is)."""
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, lazy = todo.pop()
        for child in _statements(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, lazy
            elif _is_type_checking(child):
                todo.extend((stmt, lazy) for stmt in child.orelse)
            else:
                todo.append((child, lazy or isinstance(child, ast.FunctionDef
                                                        | ast.AsyncFunctionDef)))


_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")  # where statements are held


def _statements(node: ast.AST) -> Iterator[ast.AST]:
    """The statements (and except handlers, match cases) directly inside ``node``: only these
    can hold an import, so expressions are never walked (a third of the graph's time)."""
    for field in _BODIES:
        for child in getattr(node, field, ()):
            if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
                yield child


def _targets(node: ast.Import | ast.ImportFrom, source: str, is_package: bool,
             modules: dict[str, Path]) -> Iterator[str]:
    """The project modules one import statement loads (``from a import b``: ``a.b`` if that is a
    module, else ``a``); standard-library and third-party names are left out."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = source.split(".") if is_package else source.split(".")[:-1]
            package = package[:len(package) - node.level + 1]
            base = ".".join([*package, base] if base else package)
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                 for alias in node.names]
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != source:
            yield name


def _edges_from(source: str, modules: dict[str, Path]) -> set[Edge]:
    path = modules[source]
    return {Edge(source, target, lazy, node.lineno) for node, lazy in _imports(_tree(path))
            for target in _targets(node, source, path.name == "__init__.py", modules)}


def import_graph(root: Path) -> list[Edge]:
    """Every import between the project's modules under ``root``."""
    modules = _modules(root)
    edges = set().union(*(_edges_from(source, modules) for source in modules))
    return sorted(edges, key=lambda e: (e.source, e.line, e.target))


@functools.cache
def module_edges(source: str) -> frozenset[Edge]:
    """The imports of one module of this checkout (only the modules a check reaches are
    parsed, not the whole graph)."""
    return frozenset(_edges_from(source, _project_modules()))


@functools.cache
def _project_modules() -> dict[str, Path]:
    return _modules(REPO)


def find_cycle(edges: list[Edge]) -> list[str] | None:
    """One import cycle as a path (first module repeated at the end), or None."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)) is not None:
            return cycle
    return None


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


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import() -> None:
    """The check above can fail: two modules importing each other, one inside a function."""
    edges = [Edge("a", "b", lazy=False, line=1), Edge("b", "c", lazy=False, line=1),
             Edge("c", "a", lazy=True, line=9), Edge("c", "d", lazy=False, line=2)]
    assert find_cycle(edges) == ["a", "b", "c", "a"]
    assert find_cycle(edges[:2] + edges[3:]) is None


def test_the_shared_modules_import_neither_side_nor_the_runtimes() -> None:
    """``orchestrator/`` (config, contracts, errors, limits, rpc, wire, attachments/...) is what
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
    paths = _modules(REPO)
    found = set()
    for module in modules:
        for node, _lazy in _imports(_tree(paths[module])):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [] if node.level else [node.module or ""])
            found |= {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - {
                "orchestrator", "runtimes"}
    return found


def test_the_mcp_server_and_the_limits_load_only_the_standard_library() -> None:
    """The MCP server is started by each member's CLI (one per member: it must start fast and
    small), and the limits are read by it and by the CLI: neither may load pydantic (the home's
    ``platformdirs`` aside)."""
    for module in STDLIB_ONLY:
        assert _third_party(_closure(module, lazy=True)) <= LIGHT, module


def test_the_cli_loads_click_and_the_standard_library_only_when_it_starts() -> None:
    """``teamctl status`` must start fast: what a command loads when it runs (pydantic for
    ``launch``) is imported inside that command."""
    assert _third_party(_closure("orchestrator.client.cli", lazy=False)) == {"click", *LIGHT}


def test_the_core_imports_no_runtime_adapter_only_the_composition_root_does() -> None:
    """``orchestrator/daemon`` names runtimes only through the port (``orchestrator.ports``)
    and the table's capability fields: one module, ``daemon.main``, wires the adapters in (the
    registry, this machine's and the SSH host)."""
    wrong = [e for e in _crossing("daemon", "runtimes") if e.source != "orchestrator.daemon.main"]
    assert not wrong, _shown(wrong)


def _runtime_names_spelt(path: Path) -> list[str]:
    from orchestrator.runtime_table import RuntimeName

    names = set(get_args(RuntimeName))
    return [f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}"
            for node in ast.walk(_tree(path))
            if isinstance(node, ast.Constant) and node.value in names]


def test_no_runtime_name_is_spelt_in_orchestrator_outside_the_runtime_table() -> None:
    """Capabilities, not names: the core asks ``runtime_info(name).reports_cost``, never
    ``runtime == "codex"``; a runtime's name is spelt once, in ``orchestrator.runtime_table``
    (its rows and the team file's ``RuntimeName`` literal)."""
    table = REPO / "orchestrator" / "runtime_table.py"
    spelt = [hit for path in sorted((REPO / "orchestrator").rglob("*.py")) if path != table
             for hit in _runtime_names_spelt(path)]
    assert not spelt, spelt
    assert _runtime_names_spelt(table), "the check finds the names where they are"


def test_the_daemon_loads_no_runtime_adapter_until_a_member_needs_it() -> None:
    """An adapter is imported when a member of its runtime first starts: a daemon that runs
    no OpenCode member never loads httpx (~4 MiB of its resident memory), nor any adapter;
    uvicorn, Starlette and the page's routes wait for the first ``teamctl ui`` (LazyLiveView);
    Pillow's decoder (~3 MiB) waits for the first image planned."""
    assert _loaded_by("orchestrator.daemon.main", (
        "httpx", "runtimes.opencode", "runtimes.claude", "runtimes.codex",
        "runtimes.describers", "uvicorn", "starlette", "h11", "multipart", "python_multipart",
        "PIL.Image",
        # the daemon runs as ``python -m orchestrator.daemon``: the CLI is not its to carry
        "click", "orchestrator.client.cli",
        # hosts other than this machine, and the egress proxies: for the members that use them
        "runtimes.ssh", "runtimes.sandbox_host", "runtimes.sandbox_network",
        "orchestrator.daemon.egress_proxies")) == []
    from runtimes.registry import default_runtimes

    adapters = default_runtimes()
    assert list(adapters) == [r.name for r in RUNTIMES]  # the names, nothing imported yet
    assert adapters[RUNTIMES[-1].name].name == RUNTIMES[-1].name  # loaded when asked for


def _adapter(module: str) -> str | None:
    """The runtime adapter a module belongs to (None: shared by all, or no adapter)."""
    for prefix in ("runtimes.codex.exec", "runtimes.codex.app_server", "runtimes.codex",
                   "runtimes.claude", "runtimes.opencode"):
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
    """Every ``teamctl`` call pays the CLI's imports (issue 26's start-up figure): a command's
    own modules load when it runs — ``notify init``'s operator file (tomllib, secrets), the
    clipboard, the MCP server — and nothing of the daemon's (pydantic, anyio, structlog)."""
    assert _loaded_by("orchestrator.client.cli", (
        "orchestrator.notify_operator", "tomllib", "secrets", "PIL", "pydantic", "anyio",
        "structlog", "httpx", "orchestrator.client.clipboard",
        "orchestrator.client.mcp_server")) == []


def _loaded_by(module: str, names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` importing ``module`` loads, in a fresh interpreter."""
    probe = (f"import sys, {module}; print('\\n'.join(sorted(n for n in sys.modules "
             f"if n in {names!r})))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    return done.stdout.split()
