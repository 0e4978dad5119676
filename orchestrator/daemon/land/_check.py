"""The integration check (docs/land.md): ``[team] integrate.check`` run in the scratch worktree
on the merged result, **inside the owner's boundary** — the command line the owner's host
gives (``Host.confine`` with the scratch worktree as its workdir): for a sandboxed owner,
bubblewrap with the member's own mounts and network rule, the scratch tree read-write where
its workdir would be; for an unsandboxed one, the command as the member would run it. It runs
what the owner's commits hold (a ``Makefile``, tests), so never with more than the owner's
rights — the board's check gate's rule (daemon/board/_gate.py, whose runner it shares:
shell-like split, never a shell; the minimal environment plus the member's ``env``; its own
process group, killed at the timeout; the end of its output kept, redacted).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.config import check_argv
from orchestrator.contracts import SandboxUnavailable
from orchestrator.daemon.board import minimal_environ, refused_inside, run_check
from orchestrator.errors import CheckRefused
from orchestrator.redaction import redact

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from orchestrator.daemon.members import MemberState

    Environ = Callable[[Mapping[str, str]], dict[str, str]]

__all__ = ["CheckOutcome", "integration_check"]


@dataclass(frozen=True)
class CheckOutcome:
    """How the check ended: passed, or what to tell (``note``); ``refused``: it could not
    run as the owner here (the owner cannot fix that: the operator's)."""

    passed: bool
    note: str
    seconds: float
    refused: bool = False


async def integration_check(state: MemberState, command: str, scratch: Path, *,
                            timeout: float, environ: Environ = minimal_environ) -> CheckOutcome:
    """``command`` in ``scratch`` as ``state``'s member (see the module's doc)."""
    member = state.config.name
    argv = check_argv(command)
    if os.sep in argv[0] and not os.path.isabs(argv[0]):  # the tree's own program
        argv[0] = os.path.join(scratch, argv[0])
    started = time.monotonic()
    try:
        confined = await state.host.confine(argv, env=environ(state.config.env),
                                            workdir=scratch)
        if confined is None:
            raise CheckRefused(member, command, f"{member} runs on another host (an "
                               "integration check runs on this machine, as the owner)",
                               "leave integrate.check unset for a team with such members")
        run = await run_check(list(confined.argv), cwd=scratch, env=confined.env,
                              timeout=timeout)
        if confined.argv != tuple(argv):  # what bubblewrap (not the check) said
            refused_inside(run, member, command, argv[0])
    except SandboxUnavailable as exc:
        return CheckOutcome(False, f"check_refused: the integration check {command!r} did not "
                            f"run as {member}: its sandbox cannot be made here ({exc.reason})",
                            time.monotonic() - started, refused=True)
    except CheckRefused as exc:
        return CheckOutcome(False, f"{exc.code}: {exc.message}", time.monotonic() - started,
                            refused=True)
    except OSError as exc:
        return CheckOutcome(False, f"the integration check {command!r} could not start: "
                            f"{exc.strerror or exc}", time.monotonic() - started, refused=True)
    seconds = time.monotonic() - started
    if run.exit_code == 0:
        return CheckOutcome(True, f"check {command!r} passed", seconds)
    how = (f"did not finish within {timeout:g} s (killed)" if run.timed_out
           else f"failed (exit {run.exit_code})")
    return CheckOutcome(False, redact(f"the integration check {command!r} {how}; the end of "
                                      f"its output:\n{run.output[-4000:]}"), seconds)
