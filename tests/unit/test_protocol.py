"""The control protocol's table (orchestrator/protocol/): every method has exactly one handler
in the daemon, a member's socket reaches only the member rows, the CLI names methods only by
the table, the JSON documents' examples in docs/json.md are valid for their models, and
``teamctl schema`` prints their schemas."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import pytest
from click.testing import CliRunner, Result

from orchestrator import protocol, rpc
from orchestrator.client.cli import cli
from orchestrator.daemon.board import BoardApi, MemberBoardApi
from orchestrator.daemon.control import ControlServer, _api, dispatch
from orchestrator.daemon.land import LandApi
from orchestrator.daemon.notify import NotifyApi
from orchestrator.daemon.quota import QuotaApi
from orchestrator.daemon.telemetry import TraceApi
from orchestrator.protocol import DOCUMENTS, METHODS, model
from tests.support.driver import REPO
from tests.support.source_facts import facts

_SECTION = re.compile(r"^## (\S+)\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)
_JSON = re.compile(r"```json\n(.*?)```", re.DOTALL)
# operator methods whose answer no command prints as it came: the CLI's liveness check, the
# live feed's wake-up, and launch (the CLI prints its own LaunchResult around the team)
_NOT_PRINTED = {protocol.PING.name, protocol.CHANGES.name, protocol.LAUNCH.name}


def _examples() -> dict[str, str]:
    text = (REPO / "docs" / "json.md").read_text()
    found = {}
    for name, body in _SECTION.findall(text):
        block = _JSON.search(body)
        if block:
            found[name] = block.group(1)
    return found


def _full_server() -> ControlServer:
    """The control server as the daemon builds it: every handler it has (the collaborators
    are never called: building the dispatch only reads the handlers' names)."""
    nothing: Any = None
    return ControlServer(nothing, on_stop_all=lambda: None,
                         board=BoardApi(nothing, nothing, nothing),
                         member_board=MemberBoardApi(nothing, nothing, nothing),
                         more_handlers={**NotifyApi(nothing).handlers(),
                                        **LandApi(nothing).handlers(),
                                        **QuotaApi(nothing, running=nothing, resolve=nothing,
                                                   clock=nothing).handlers(),
                                        **TraceApi(nothing).handlers()})


def test_every_method_has_exactly_one_handler_and_every_handler_one_method() -> None:
    served = _full_server()._methods
    assert list(served) == [row.name for row in METHODS]
    assert len({row.name for row in METHODS}) == len(METHODS)
    assert all(entry.row is protocol.by_name(name) for name, entry in served.items())


def test_a_handler_twice_or_for_no_row_is_refused_at_start() -> None:
    async def handler(_params: Any) -> None:
        return None

    with pytest.raises(ValueError, match="handled twice"):
        dispatch({"ping": handler}, {"ping": handler})
    with pytest.raises(ValueError, match="in no row: \\['pong'\\]"):
        dispatch({"pong": handler})


def test_the_member_rows_are_the_member_methods_and_their_tools() -> None:
    """A member's own socket serves exactly these rows (ControlServer.dispatch)."""
    members = {row.name for row in METHODS if row.caller == "member"}
    assert members == {row.name for row in METHODS if row.name.startswith("member.")}
    assert {f"member.{tool}" for tool in protocol.MEMBER_TASKS} <= members


def test_every_row_names_models_that_exist() -> None:
    for row in METHODS:
        assert model(row.params).model_config.get("extra") == "forbid", row.name
        for result in row.result:
            model(result)


def test_every_printed_answer_is_a_document_with_an_example() -> None:
    documented = set(DOCUMENTS.values())
    for row in METHODS:
        if row.caller == "operator" and row.name not in _NOT_PRINTED:
            assert set(row.result) <= documented, row.name


def test_no_client_module_names_a_method_by_a_string() -> None:
    """The client calls ``call(home, protocol.X, ...)``: a method's name is written once, in
    the table — the benchmarks too, which drive the daemon as the CLI does (a string there
    failed only when ``make bench`` ran: 'str' object has no attribute 'name')."""
    names = {row.name for row in METHODS}
    found = [f"{path.name}: {shown}"
             for path in [*sorted((REPO / "orchestrator" / "client").glob("*.py")),
                          *sorted((REPO / "bench").glob("*.py"))]
             for shown, strings in facts(path, _strings_named)
             if any(text in names or text.startswith("member.") for text in strings)]
    assert found == []


def _strings_named(source: bytes, filename: str) -> list[tuple[str, list[str]]]:
    """Each place that could name a method (kept in tests/support/source_facts.py's cache):
    a call (``call``, ``_call``, ``_ask``) and the strings it is given, a thread's ``target``
    that calls and the strings of its ``args``, a string (or an f-string's start) that may
    build a member method's name (``f"member.{tool}"``)."""
    places = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call):
            called = ast.unparse(node.func).rpartition(".")[2]
            handed = {k.arg: k.value for k in node.keywords}  # Thread(target=call, args=(…))
            given = node.args
            if "target" in handed and ast.unparse(handed["target"]).endswith("call") \
                    and isinstance(handed.get("args"), ast.Tuple):
                args = handed["args"]
                assert isinstance(args, ast.Tuple)
                given = args.elts
            elif called not in {"call", "_call", "_ask"}:
                continue
            strings = [a.value for a in given
                       if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if strings:
                places.append((ast.unparse(node), strings))
        elif isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and str(first.value).startswith("member."):
                places.append((ast.unparse(node), [str(first.value)]))
        elif isinstance(node, ast.Constant) and str(node.value).startswith("member."):
            places.append((ast.unparse(node), [str(node.value)]))
    return places


def test_every_document_has_an_example_in_the_docs() -> None:
    assert set(_examples()) == set(DOCUMENTS)


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_the_example_is_valid_for_its_model(name: str) -> None:
    example = json.loads(_examples()[name])
    model(DOCUMENTS[name]).model_validate(example)


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="extra"):
        model(DOCUMENTS["stop"]).model_validate(
            {"stopped": [], "daemon_stopping": False, "x": 1})


def test_schema_prints_one_or_all() -> None:
    """``teamctl schema`` (the CLI's command, run in this process: nothing of it depends on a
    process of its own)."""
    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, ["schema", *args], prog_name="teamctl")

    one = json.loads(run("history").stdout)
    assert one["title"] == "HistoryDoc" and "messages" in one["properties"]
    assert set(json.loads(run().stdout)) == set(DOCUMENTS)
    bad = run("nope")
    assert bad.exit_code == 2 and "documents: status" in bad.stderr


_METHODS_BLOCK = re.compile(r"<!-- methods: .*? -->\n(.*?)<!-- end of the methods -->",
                            re.DOTALL)


def _methods_table() -> str:
    """docs/json.md's table of the control methods, as the protocol's table has them."""
    lines = ["| method | params | answers | caller |", "|---|---|---|---|"]
    lines += [f"| `{row.name}` | `{row.params}` | {', '.join(f'`{r}`' for r in row.result)} "
              f"| {row.caller} |" for row in METHODS]
    return "\n".join(lines) + "\n"


def test_the_docs_list_every_control_method_as_the_table_has_it() -> None:
    """docs/json.md's "The control methods" is the table itself: a row added, renamed or
    given another model fails here until the page says so (the expected text is shown)."""
    found = _METHODS_BLOCK.search((REPO / "docs" / "json.md").read_text())
    assert found is not None
    assert found.group(1) == _methods_table()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_members_own_socket_reaches_the_member_rows_only(anyio_backend: str) -> None:
    """On a member's socket (``ControlServer.handle_member_connection``) an operator method is
    "method not found"; a member method is reached (here refused for its missing params: the
    handler is never called). On the control socket both are reached."""
    del anyio_backend
    server = _full_server()

    async def code(row: protocol.Method) -> int:
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": row.name, "params": {}})
        answer: dict[str, Any] = json.loads(await server.dispatch(line.encode()))
        found: int = answer["error"]["code"]
        return found

    on_member_socket = _api._SOCKET_MEMBER.set(("web", "dev"))
    try:
        refused = {row.name: await code(row) == rpc.METHOD_NOT_FOUND for row in METHODS}
    finally:
        _api._SOCKET_MEMBER.reset(on_member_socket)
    assert refused == {row.name: row.caller == "operator" for row in METHODS}
    assert await code(protocol.MEMBER_LIST_TEAM) == rpc.INVALID_PARAMS
    assert await code(protocol.TASK_ADD) == rpc.INVALID_PARAMS
