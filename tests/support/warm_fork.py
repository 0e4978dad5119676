"""Imported last by the CLI calls' fork server (``cli_fork``): what every call or daemon forked
from it would otherwise do again after the fork, done once before it.

Measured over the integration and fault layers (~500 daemons and ~1,800 calls a run, each
forked): a daemon imported ~78 modules after its fork (anyio's asyncio backend, the runtime kit,
the Claude adapter, httpx for ntfy, the forge and telemetry) and parsed the packaged price
table and vision catalog; a ``launch`` imported ~29 (pydantic's plugin loader, which reads
every installed distribution's entry points through ``importlib.metadata``) and built the team
file's models, which the project defers to their first use (``defer_build``). Done here: a
``launch`` 58 -> 18 ms of CPU, a daemon's life ~206 -> ~167 ms. Then ``gc.freeze()``: a
collection in a forked process never walks (and so never copies) the preloaded objects.
What this leaves untested in the integration layer — a fresh interpreter's imports, a model
built at first use — is tested by tests/integration/test_fresh_imports.py, the calls that use
``TEAMCTL_TEST_CLI=exec`` (test_team_lifecycle's launch and the daemon it starts) and the unit
layer, which builds each model at its first use."""

from __future__ import annotations

import gc
import importlib

from pydantic import BaseModel
from pydantic.plugin._loader import get_plugins

from orchestrator.attachments.catalog import load_catalog
from orchestrator.costs.prices import load_prices

_MODULES = [
    # a daemon's, after its fork: its event loop's backend and what a member's start loads
    "anyio._backends._asyncio", "anyio._core._fileio", "anyio._core._signals",
    "anyio._core._subprocesses", "anyio.streams.memory", "anyio.streams.stapled", "argparse",
    "importlib.resources.readers", "queue", "orchestrator.protocol.member_tasks",
    "runtimes.kit.documents", "runtimes.kit.framing", "runtimes.kit.stdio",
    "runtimes.claude", "runtimes.codex", "runtimes.opencode", "runtimes.acp",
    "httpx", "httpcore", "h11", "certifi",  # ntfy's, the forge's and telemetry's client
    # a call's, after its fork: how it reaches the daemon
    "orchestrator.client.calls", "orchestrator.client.progress", "orchestrator.client.task_cli",
]


def _all_models(cls: type[BaseModel]) -> list[type[BaseModel]]:
    found, todo = [], [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.append(sub)
            todo.append(sub)
    return found


def _warm() -> None:
    for name in _MODULES:
        importlib.import_module(name)
    get_plugins()  # cached by pydantic for the process, and so for every fork of it
    load_prices()  # the packaged tables a daemon's start parses (cached for the process)
    load_catalog()
    for model in _all_models(BaseModel):
        if _deferred(model):
            model.model_rebuild()


def _deferred(model: type[BaseModel]) -> bool:
    """A project's model not built yet (``defer_build``: pydantic's stand-in validator)."""
    return model.__module__.startswith(("orchestrator.", "runtimes.")) \
        and type(model.__pydantic_validator__).__name__ == "MockValSer"


_warm()
gc.freeze()
