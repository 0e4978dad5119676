"""Issue 44 figure: a member's attachment read in its own view vs today (read by the daemon with
its own rights), and the other way the lead proposed — a tiny reader run inside the member's own
bubblewrap (``Host.confine``) that writes the bytes to stdout.

On a 4 KiB and a 4 MiB file of a sandboxed member's workdir, median of ``RUNS`` (``INSIDE_RUNS``
for the reader inside, a process each):

- ``today``: ``intake.read_original(path)`` — what the planner did with a member's path;
- ``view``: the member's view asked of its host (``SandboxHost.confine`` + the argv parsed:
  once per message), then ``read_in_view`` (per attachment: ``O_PATH``, the real path, checks,
  the reopen and the bounded read) — what the router does now; and the same for an unsandboxed
  member (``local_view``);
- ``inside``: the reader run in the member's bubblewrap by its ``confine`` argv (this python,
  ``-I -c``: ``O_NONBLOCK``, ``fstat``, bounded), its stdout collected.

Measured in process (the daemon's reads, the member's view) and in the member's own bubblewrap:
no member runtime, no daemon.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from _harness import REPO, figure, median

sys.path.insert(0, str(REPO))

from orchestrator.attachments.intake import read_original
from orchestrator.daemon.members._attachments import read_in_view
from orchestrator.daemon.members._view import MemberView, local_view, sandbox_view
from orchestrator.limits import ORIGINAL_LIMIT_BYTES
from runtimes.hosts.local.host import LocalHost
from runtimes.hosts.sandbox.host import SandboxHost, member_policy

if TYPE_CHECKING:
    from collections.abc import Callable

RUNS = 200
INSIDE_RUNS = 30
SIZES = {"4k": 4 * 1024, "4m": 4 * 1024 * 1024}

_READER = """
import os, stat, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
if not stat.S_ISREG(os.fstat(fd).st_mode):
    sys.exit(3)
limit, out, total = int(sys.argv[2]), sys.stdout.buffer, 0
while total <= limit:
    chunk = os.read(fd, 1 << 20)
    if not chunk:
        break
    out.write(chunk)
    total += len(chunk)
sys.exit(4 if total > limit else 0)
"""


def _ms(action: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return median(samples)


def _host(root: Path) -> SandboxHost:
    policy = member_policy(workdir=root / "work", private=root / "state" / "members" / "a",
                           state_root=root / "state", others=[], runtime="claude",
                           paths={"rw": [], "ro": [], "hide": []}, login="isolated",
                           permissions="full")
    return SandboxHost(LocalHost(), "a", policy, root / "state" / "mcp")


def _inside(host: SandboxHost, path: Path) -> bytes:
    async def confined() -> tuple[str, ...]:
        found = await host.confine([sys.executable, "-I", "-c", _READER, str(path),
                                    str(ORIGINAL_LIMIT_BYTES)], env={"PATH": os.defpath})
        assert found is not None
        return found.argv

    argv = anyio.run(confined)
    done = subprocess.run(argv, capture_output=True, check=False, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"the reader inside failed ({done.returncode}): {done.stderr[-400:]!r}")
    return done.stdout


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tc-bench-view-") as tmp:
        root = Path(tmp)
        for directory in ("work", "state/members/a/runtime", "state/mcp"):
            (root / directory).mkdir(parents=True)
        host = _host(root)

        async def boxed_view() -> MemberView:
            confined = await host.confine(("true",), env={})
            assert confined is not None
            return sandbox_view("a", confined.argv)

        view = anyio.run(boxed_view)
        plain = local_view("a", workdirs=(root / "work",) * 2,
                           runtime_home=root / "state" / "members" / "a" / "runtime",
                           grants=[],
                           state_dir=root / "state")
        async def views() -> float:  # in one event loop, as the daemon asks
            samples = []
            for _ in range(RUNS):
                start = time.perf_counter()
                await boxed_view()
                samples.append((time.perf_counter() - start) * 1000)
            return median(samples)

        figure("member_view_sandboxed_view_ms", anyio.run(views))
        for label, size in SIZES.items():
            path = root / "work" / f"{label}.bin"
            data = os.urandom(size)
            path.write_bytes(data)
            assert read_in_view(view, [str(path)])[0].data == data
            assert _inside(host, path) == data
            figure(f"member_view_{label}_today_ms", _ms(partial(read_original, path), RUNS))
            figure(f"member_view_{label}_in_view_sandboxed_ms",
                   _ms(partial(read_in_view, view, [str(path)]), RUNS))
            figure(f"member_view_{label}_in_view_unsandboxed_ms",
                   _ms(partial(read_in_view, plain, [str(path)]), RUNS))
            figure(f"member_view_{label}_reader_inside_sandbox_ms",
                   _ms(partial(_inside, host, path), INSIDE_RUNS))


if __name__ == "__main__":
    main()
