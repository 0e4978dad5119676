"""Issue 4 figure: the per-turn overhead of a Codex member over calling the same `codex exec`
directly (median of 20 resumed turns each, the real codex 0.171.0 against the fake Responses
API; falls back to the fake codex when the real one is not installed — `make e2e` installs it).

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import REPO, figure, home, inline_toml, median, teamctl, timed_sends

from orchestrator.paths import Home
from tests.support.fake_responses import FakeResponses

RUNS = 20
REAL = REPO / ".cache" / "e2e" / "codex" / "node_modules" / ".bin" / "codex"


def provider_config(api: FakeResponses) -> dict[str, object]:
    return {"model_provider": "fake", "model_providers": {"fake": {
        "name": "fake", "base_url": api.base_url, "wire_api": "responses",
        "env_key": "FAKE_OPENAI_API_KEY", "request_max_retries": 0, "stream_max_retries": 0}},
        "features": {"plugins": False}}


def direct(codex: Path, api: FakeResponses, work: Path) -> list[float]:
    from runtimes.codex._shared import config_args

    env = dict(os.environ, CODEX_HOME=str(work / "direct-home"), FAKE_OPENAI_API_KEY="sk-x")
    (work / "direct-home").mkdir()
    base = [str(codex), "exec", "--json", "--skip-git-repo-check", "-C", str(work),
            "-m", "gpt-5.4-mini", *config_args(provider_config(api))]
    first = subprocess.run([*base, "-"], input="start", capture_output=True, text=True,
                           env=env, check=True)
    thread = json.loads(first.stdout.splitlines()[0])["thread_id"]
    samples = []
    for i in range(RUNS):
        start = time.perf_counter()
        subprocess.run([*base, "resume", thread, "-"], input=f"turn {i}".encode(),
                       capture_output=True, env=env, check=True)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def via_teamctl(codex: Path, api: FakeResponses, work: Path,
                transport: str = "exec") -> list[float]:
    with home() as env:
        team = Path(env["TEAMCTL_BENCH_DIR"]) / "codex.toml"
        team.write_text(
            '[team]\nname = "cx"\nworkdir = "' + str(work) + '"\n\n[[members]]\n'
            f'name = "rev"\nruntime = "codex"\nmodel = "gpt-5.4-mini"\ncommand = "{codex}"\n'
            f'transport = "{transport}"\n'
            'env = { FAKE_OPENAI_API_KEY = "sk-x" }\n'
            f"config = {inline_toml(provider_config(api))}\n")
        teamctl(env, "launch", str(team))
        return timed_sends(Home(Path(env["TEAMCTL_HOME"])), "rev", RUNS)




def main() -> None:
    codex = REAL if REAL.exists() else REPO / "fixtures" / "bin" / "codex"
    print(f"codex: {codex} ({'real' if codex == REAL else 'fake: run make e2e for the real one'})")
    with FakeResponses() as api, tempfile.TemporaryDirectory(prefix="tc-codex-") as tmp:
        work = Path(tmp)
        plain = direct(codex, api, work)
        member = via_teamctl(codex, api, work)
        app = via_teamctl(codex, api, work, transport="app-server")
    overhead = median(member) - median(plain)
    print(f"a member on codex app-server: median {median(app):.1f} ms per turn, "
          f"{median(app) / median(member):.2f}× an exec member (target ≤ 0.6×)")
    figure("codex_turn_app_server_ms", median(app))
    figure("codex_app_server_vs_exec_ratio", median(app) / median(member))
    print(f"codex exec resume directly: median {median(plain):.1f} ms; through a teamctl member "
          f"(send --wait over the socket): median {median(member):.1f} ms; overhead "
          f"{overhead:.1f} ms per turn ({RUNS} turns each)")
    figure("codex_turn_direct_ms", median(plain))
    figure("codex_turn_member_ms", median(member))
    figure("codex_turn_overhead_ms", overhead)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
