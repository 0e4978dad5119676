"""The tests' own layout (docs/dev/testing.md): what tests share lives in tests/support/, so no
test module imports another test module — a helper found in a test module is moved, not reached
for — every module there says in its docstring what it holds, and every switch a fake CLI reads
is in the list of switches."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from tests.support.driver import REPO
from tests.support.import_graph import names_imported
from tests.support.source_facts import facts

if TYPE_CHECKING:
    from pathlib import Path

SUPPORT = REPO / "tests" / "support"
# how a fake CLI reads one of its switches: os.environ.get("FAKE_…"), env_int("FAKE_…"),
# os.environ["FAKE_…"]
_READ = re.compile(r'(?:environ\.get\(|env_int\(|environ\[)"(FAKE_[A-Z0-9_]+)"')


def _python_files() -> list[Path]:
    return sorted(path for root in ("tests", "bench") for path in (REPO / root).rglob("*.py"))


def _test_modules_imported(path: Path, root: Path = REPO) -> list[str]:
    return [f"{path.relative_to(root)}:{line}: {name}"
            for name, line in names_imported(path)
            if name.startswith("tests.") and _is_test_module(name.rpartition(".")[2])]


def _is_test_module(name: str) -> bool:
    """A test module, or a conftest: pytest's own, whose helpers are tests/support/'s."""
    return name.startswith("test_") or name == "conftest"


def test_no_module_of_the_tests_or_the_benchmarks_imports_a_test_module_or_a_conftest(
) -> None:
    wrong = [found for path in _python_files() for found in _test_modules_imported(path)]
    assert wrong == []


def test_the_check_sees_an_import_of_a_test_module_in_every_spelling(tmp_path: Path) -> None:
    source = tmp_path / "test_x.py"
    source.write_text("from tests.unit.test_web import Page\n"
                      "from tests.integration import test_notify\n"
                      "def f():\n    import tests.faults.test_daemon_faults\n"
                      "from tests.support.fakes import core\n"
                      "from tests.e2e.conftest import claude_member\n")
    found = sorted(line.split(": ")[1] for line in _test_modules_imported(source, tmp_path))
    assert found == ["tests.e2e.conftest", "tests.faults.test_daemon_faults",
                     "tests.integration.test_notify", "tests.unit.test_web"]


def _has_docstring(source: bytes, filename: str) -> bool:
    return bool(ast.get_docstring(ast.parse(source, filename=filename)))


def test_every_support_module_says_what_it_holds() -> None:
    bare = [path.name for path in sorted(SUPPORT.glob("*.py"))
            if not facts(path, _has_docstring)]
    assert bare == []


def test_no_test_module_lives_in_support() -> None:
    assert sorted(path.name for path in SUPPORT.glob("test_*.py")) == []


def test_every_switch_a_fake_cli_reads_is_in_the_testing_guides_list() -> None:
    fakes = sorted((REPO / "fixtures").glob("fake_*.py"))
    read = {name for path in fakes for name in _READ.findall(path.read_text())}
    assert len(read) > 40, "the pattern still finds the fakes' reads"
    guide = (REPO / "docs" / "dev" / "testing.md").read_text()
    assert sorted(name for name in read if f"`{name}" not in guide) == []


def test_every_fake_cli_is_a_stub_that_runs_its_module() -> None:
    """fixtures/bin/<name> runs fixtures/fake_<name>.py from its bytecode (fake_main.py): a
    fake's logic written into the stub would be compiled afresh at every start again."""
    modules = {path.stem for path in (REPO / "fixtures").glob("fake_*.py")} - {"fake_main"}
    run = {}
    for stub in sorted((REPO / "fixtures" / "bin").iterdir()):
        text = stub.read_text()
        assert len(text.splitlines()) <= 12, f"{stub.name} is a stub, its logic in a module"
        run[stub.name] = text.rpartition('run("')[2].partition('")')[0]
    assert sorted(run.values()) == sorted(modules), run
