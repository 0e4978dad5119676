"""The import graph of ``orchestrator/`` and ``runtimes/``, read with ``ast``: every import
counts, the ones inside functions too (a lazy import is still a dependency), except those under
``if TYPE_CHECKING:`` unless ``typed`` asks for them. What tests/unit/test_layering.py checks
its rules on, and the host tests ask of a module. What a module imports is read once per
content, kept on disk (tests/support/source_facts.py): parsing was the checks' whole cost."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from tests.support.source_facts import facts

if TYPE_CHECKING:
    from collections.abc import Iterator

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("orchestrator", "runtimes")


@dataclass(frozen=True)
class Import:
    """One import statement: ``import a, b`` (``module`` None, ``names`` the modules) or
    ``from module import names`` (``level``: its leading dots)."""

    module: str | None
    names: tuple[str, ...]
    level: int
    line: int
    lazy: bool  # inside a function
    typed: bool  # inside ``if TYPE_CHECKING:`` (never run)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    lazy: bool  # inside a function: runs when called, not when the module loads
    line: int


def modules_under(root: Path) -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


@functools.cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _is_type_checking(node: ast.AST) -> TypeGuard[ast.If]:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_in(tree: ast.AST, *, typed: bool = False
             ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Each import statement and whether it sits inside a function. Only statements are
    walked (an import is a statement; no expression holds one), and the body of an
    ``if TYPE_CHECKING:`` is not (its ``else`` is) unless ``typed``."""
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, lazy = todo.pop()
        for child in _statements(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, lazy
            elif _is_type_checking(child) and not typed:
                todo.extend((stmt, lazy) for stmt in child.orelse)
            else:
                todo.append((child, lazy or isinstance(child, ast.FunctionDef
                                                        | ast.AsyncFunctionDef)))


def _read_imports(source: bytes, filename: str) -> list[dict[str, Any]]:
    tree = ast.parse(source, filename=filename)
    typed_only = {id(node) for node, _lazy in imports_in(tree, typed=True)} - {
        id(node) for node, _lazy in imports_in(tree)}
    return [Import(None if isinstance(node, ast.Import) else node.module,
                   tuple(alias.name for alias in node.names),
                   0 if isinstance(node, ast.Import) else node.level, node.lineno, lazy,
                   id(node) in typed_only).__dict__
            for node, lazy in imports_in(tree, typed=True)]


@functools.cache
def imports_of(path: Path) -> tuple[Import, ...]:
    """Every import statement of ``path``, lazy and type-only ones marked."""
    return tuple(Import(**{**fact, "names": tuple(fact["names"])})
                 for fact in facts(path, _read_imports))


def names_imported(path: Path) -> tuple[tuple[str, int], ...]:
    """Every module an import statement of ``path`` names, with its line — ``from a import b``
    names ``a`` and ``a.b`` (``b`` may be a module) — lazy and ``TYPE_CHECKING`` ones included:
    what the test-layout and system-needs checks read of each test module."""
    found: list[tuple[str, int]] = []
    for fact in imports_of(path):
        if fact.module is None and not fact.level:  # ``import a, b``
            found += [(name, fact.line) for name in fact.names]
        elif fact.module:
            found.append((fact.module, fact.line))
            found += [(f"{fact.module}.{name}", fact.line) for name in fact.names]
    return tuple(found)


_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")  # where statements are held


def _statements(node: ast.AST) -> Iterator[ast.AST]:
    """The statements (and except handlers, match cases) directly inside ``node``: only these
    can hold an import, so expressions are never walked (a third of the graph's time)."""
    for field in _BODIES:
        for child in getattr(node, field, ()):
            if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
                yield child


def _targets(fact: Import, source: str, is_package: bool,
             modules: dict[str, Path]) -> Iterator[str]:
    """The project modules one import statement loads (``from a import b``: ``a.b`` if that is a
    module, else ``a``); standard-library and third-party names are left out."""
    if fact.module is None and not fact.level:
        names = list(fact.names)
    else:
        base = fact.module or ""
        if fact.level:
            package = source.split(".") if is_package else source.split(".")[:-1]
            package = package[:len(package) - fact.level + 1]
            base = ".".join([*package, base] if base else package)
        names = [f"{base}.{name}" if f"{base}.{name}" in modules else base
                 for name in fact.names]
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != source:
            yield name


def _edges_from(source: str, modules: dict[str, Path], *, typed: bool = False) -> set[Edge]:
    path = modules[source]
    return {Edge(source, target, fact.lazy, fact.line)
            for fact in imports_of(path) if typed or not fact.typed
            for target in _targets(fact, source, path.name == "__init__.py", modules)}


def import_graph(root: Path, *, typed: bool = False) -> list[Edge]:
    """Every import between the project's modules under ``root`` (``typed``: those made only
    for type checking too)."""
    modules = modules_under(root)
    edges = set().union(*(_edges_from(source, modules, typed=typed) for source in modules))
    return sorted(edges, key=lambda e: (e.source, e.line, e.target))


@functools.cache
def module_edges(source: str) -> frozenset[Edge]:
    """The imports of one module of this checkout (only the modules a check reaches are
    parsed, not the whole graph)."""
    return frozenset(_edges_from(source, project_modules()))


@functools.cache
def project_modules() -> dict[str, Path]:
    return modules_under(REPO)


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


def circles(edges: list[Edge]) -> list[list[str]]:
    """Every import circle: the modules that reach each other (Tarjan's strongly connected
    components of more than one module), each sorted."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            circle = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(circle) > 1:
                found.append(sorted(circle))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def loaded_by(module: str, names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` importing ``module`` loads, in a fresh interpreter."""
    probe = (f"import sys, {module}; print('\\n'.join(sorted(n for n in sys.modules "
             f"if n in {names!r})))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    return done.stdout.split()
