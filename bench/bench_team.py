"""Issue 12: what the real-teammate features cost.

- launch of a 3-member team (fake claude, codex, opencode; operator logins) until every member
  is ready, median of 5 — and what the login preflight itself takes (its checks, timed alone:
  Claude's is the answer to the ``initialize`` handshake that readiness waits for anyway);
- creating a member's git worktree in a repository of 10,000 files, against a plain
  ``git worktree add`` of the same repository.

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member. The worktree figure is git's, in process.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from _harness import REPO, figure, home, median, teamctl

from orchestrator.contracts import LaunchSpec
from orchestrator.daemon import worktrees
from runtimes.codex import _shared as codex
from runtimes.hosts.local.host import LocalHost
from runtimes.opencode import runtime as opencode

FILES = 10_000


def _team(directory: Path) -> Path:
    bin_dir = REPO / "fixtures" / "bin"
    path = directory / "trio.toml"
    path.write_text(f"""[team]
name = "trio"

[[members]]
name = "lead"
runtime = "claude"
model = "claude-sonnet-4-5"
command = "{bin_dir / 'claude'}"

[[members]]
name = "rev"
runtime = "codex"
model = "gpt-5.4-mini"
command = "{bin_dir / 'codex'}"

[[members]]
name = "des"
runtime = "opencode"
model = "openrouter/moonshotai/kimi-k2.6"
command = "{bin_dir / 'opencode'}"
""")
    return path


def launch_time(runs: int = 5) -> None:
    samples = []
    for _ in range(runs):
        with home() as env:
            team = _team(Path(env["TEAMCTL_BENCH_DIR"]))
            start = time.perf_counter()
            teamctl(env, "launch", str(team))
            samples.append((time.perf_counter() - start) * 1000)
    preflight = _preflight_us()
    print(f"launch of a 3-member team until ready (a new daemon each time): median "
          f"{median(samples):.0f} ms over {runs}; the preflight's own checks: {preflight:.0f} µs "
          "(Claude's is the initialize answer readiness already waits for)")
    figure("launch_3_members_ms", median(samples))
    figure("preflight_us", preflight)


def _preflight_us(runs: int = 200) -> float:
    with tempfile.TemporaryDirectory() as tmp, home():
        state = Path(tmp)
        rev = LaunchSpec(team="t", member="rev", executable="codex", model="gpt-5.4-mini",
                         prompt=None, workdir=state, state_dir=state, login="operator",
                         host=LocalHost())
        des = LaunchSpec(team="t", member="des", executable="opencode", prompt=None,
                         model="openrouter/moonshotai/kimi-k2.6", workdir=state,
                         state_dir=state, login="operator", host=LocalHost())
        member_home = codex.codex_member_home(rev)
        opencode.build_env(des, "pw")
        start = time.perf_counter()
        for _ in range(runs):
            codex.check_login(rev, member_home)
            opencode.check_login(des)
        return (time.perf_counter() - start) / runs * 1e6


def worktree_cost(runs: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        _big_repo(repo)
        ours, plain = [], []
        for i in range(runs):
            start = time.perf_counter()
            worktrees.create(Path(tmp) / "trees", "t", f"m{i}", repo, None, None)
            ours.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "-b", f"plain{i}",
                            str(Path(tmp) / f"plain{i}")], check=True, capture_output=True)
            plain.append((time.perf_counter() - start) * 1000)
    print(f"a worktree in a repository of {FILES} files: {median(ours):.0f} ms through teamctl "
          f"(rev-parse, prune, worktree add, .worktreeinclude), {median(plain):.0f} ms for a "
          f"plain 'git worktree add' (median of {runs})")
    figure("worktree_10k_files_ms", median(ours))
    figure("worktree_10k_files_plain_git_ms", median(plain))


def _big_repo(repo: Path) -> None:
    repo.mkdir()
    env = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x", "HOME": str(repo)}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    for i in range(FILES):
        directory = repo / f"pkg{i // 100}"
        directory.mkdir(exist_ok=True)
        (directory / f"module_{i}.py").write_text(f"VALUE = {i}\n" * 20)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "10k files"], check=True,
                   env=env)


if __name__ == "__main__":
    launch_time()
    worktree_cost()
