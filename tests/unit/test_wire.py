"""The JSON documents: every example in docs/json.md is valid for its model, every model has
an example, and ``teamctl schema`` prints their schemas."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner, Result

from orchestrator.client.cli import cli
from orchestrator.wire import DOCUMENTS
from tests.conftest import REPO

_SECTION = re.compile(r"^## (\S+)\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)
_JSON = re.compile(r"```json\n(.*?)```", re.DOTALL)


def _examples() -> dict[str, str]:
    text = (REPO / "docs" / "json.md").read_text()
    found = {}
    for name, body in _SECTION.findall(text):
        block = _JSON.search(body)
        if block:
            found[name] = block.group(1)
    return found


def test_every_document_has_an_example_in_the_docs() -> None:
    assert set(_examples()) == set(DOCUMENTS)


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_the_example_is_valid_for_its_model(name: str) -> None:
    example = json.loads(_examples()[name])
    DOCUMENTS[name].model_validate(example)


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="extra"):
        DOCUMENTS["stop"].model_validate({"stopped": [], "daemon_stopping": False, "x": 1})


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
