"""Issue 33 figures, against the fake Kubernetes API server on loopback (tests/support/k8s_fake.py;
not a cluster). (1) A turn's overhead through the exec stream: ``send --wait`` to the same fake
Claude, local and in a "pod", median of 20. (2) Re-attach after a dropped exec stream: from the
drop to the member ready again (``member_ready``), median of 5. (3) One exec round trip: the
client in process (a side call), ``kubectl exec -i`` and the member's relay process (both with
their start). (4) The daemon's RSS with MEMBERS members placed on the fake cluster.

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from _harness import FAKE_CLAUDE, figure, home, median, rss_mib, teamctl

ROUNDS = 20
CUTS = 5
MEMBERS = int(os.environ.get("BENCH_KUBE_MEMBERS", "100"))  # the figure
NS = "agents"


def _events(env: dict[str, str], name: str) -> list[dict[str, object]]:
    path = Path(env["TEAMCTL_HOME"]) / "logs" / "teamctl.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e.get("event") == name]


def _team(work: Path, fake: object, url: str, pods: list[str], local: list[str]) -> Path:
    from runtimes.hosts.kubernetes.manifests import object_name
    from tests.support.driver import team_toml
    from tests.support.k8s_fake import kubeconfig

    config = kubeconfig(work / "kubeconfig", url)
    base = {"runtime": "claude", "model": "claude-sonnet-4-5", "command": str(FAKE_CLAUDE),
            "backoff": [0.1, 0.5], "max_restarts": 100}
    members = [{"name": n, **base, "env": {"ANTHROPIC_API_KEY": "sk-ant-bench-0000"}}
               for n in local]
    members += [{"name": n, **base, "host": "k8s", "workdir": str(fake.volume(  # type: ignore[attr-defined]
        NS, f"work-{object_name('kb', n)}") / "workspace")} for n in pods]
    team = work / "kb.toml"
    team.write_text(team_toml("kb", members, login="isolated", hosts={"k8s": {
        "kind": "kubernetes", "kubeconfig": str(config), "namespace": NS,
        "image": "agent:bench", "secret": "key", "start_timeout": 60.0}}))
    return team


def turns_and_reattach() -> tuple[list[float], list[float], list[float]]:
    from tests.support.k8s_fake import fake_cluster

    local: list[float] = []
    pod: list[float] = []
    reattach: list[float] = []
    with home() as env, fake_cluster(Path(tempfile.mkdtemp())) as (fake, url):
        fake.secrets[(NS, "key")] = {"ANTHROPIC_API_KEY": "sk-ant-bench-0000"}
        work = Path(env["TEAMCTL_BENCH_DIR"])
        teamctl(env, "launch", str(_team(work, fake, url, ["far"], ["near"])))
        for i in range(ROUNDS + 1):
            for name, into in (("near", local), ("far", pod)):
                start = time.perf_counter()
                teamctl(env, "send", name, f"ping {i}", "--wait")
                if i:
                    into.append((time.perf_counter() - start) * 1000)
        for _ in range(CUTS):
            seen = len(_events(env, "member_ready"))
            cut = time.time()
            fake.drop_exec()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                ready = [e for e in _events(env, "member_ready")[seen:]
                         if e.get("member") == "far"]
                if ready:
                    at = datetime.fromisoformat(str(ready[0]["ts"])).timestamp()
                    reattach.append((at - cut) * 1000)
                    break
                time.sleep(0.02)  # a benchmark polls; tests wait on events
            else:
                raise SystemExit("the member did not come back")
        teamctl(env, "stop")
    return local, pod, reattach


def crash_reattach(crashes: int = 3) -> list[float]:
    """After ``kill -9`` of the daemon: ``teamctl launch`` (a new daemon, the orphan reaper,
    the team resumed, the member back in its Sandbox) and its first ``send --wait``, in ms."""
    import signal

    from tests.support.k8s_fake import fake_cluster

    times = []
    with home() as env, fake_cluster(Path(tempfile.mkdtemp())) as (fake, url):
        fake.secrets[(NS, "key")] = {"ANTHROPIC_API_KEY": "sk-ant-bench-0000"}
        team = str(_team(Path(env["TEAMCTL_BENCH_DIR"]), fake, url, ["far"], []))
        teamctl(env, "launch", team)
        for i in range(crashes):
            pid = int((Path(env["TEAMCTL_HOME"]) / "daemon.pid").read_text().strip())
            os.kill(pid, signal.SIGKILL)
            while Path(f"/proc/{pid}").exists():
                time.sleep(0.01)  # a benchmark polls; tests wait on events
            start = time.perf_counter()
            teamctl(env, "launch", team)
            teamctl(env, "send", "far", f"after crash {i}", "--wait")
            times.append((time.perf_counter() - start) * 1000)
        teamctl(env, "stop")
    return times


def exec_round_trips() -> tuple[float, float | None, float, float]:
    """The round trips; kubectl's only where it is on PATH (Debian has no package of it, so a
    fresh machine has none: the comparison is left out, said where it is printed)."""
    from kubernetes import client

    from runtimes.hosts.kubernetes import exec as kube_exec
    from tests.support.k8s_fake import fake_cluster, kubeconfig

    root = Path(tempfile.mkdtemp())
    with fake_cluster(root, require_token=False) as (_, url):
        config = str(kubeconfig(root / "kc", url))
        api = kube_exec.api_client(config, None)
        client.CoreV1Api(api).create_namespaced_pod("default", client.V1Pod(
            api_version="v1", kind="Pod", metadata=client.V1ObjectMeta(name="p1"),
            spec=client.V1PodSpec(containers=[client.V1Container(name="agent", image="x")])))
        target = kube_exec.ExecTarget(config, None, "default", "p1", "agent")

        def timed(call: object, runs: int) -> float:
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                call()  # type: ignore[operator]
                times.append((time.perf_counter() - start) * 1000)
            return median(times)

        side = timed(lambda: kube_exec.run(api, target, ["cat"], b"ping\n", 10), 20)
        kubectl = None if shutil.which("kubectl") is None else timed(lambda: subprocess.run(
            ["kubectl", "--kubeconfig", config, "exec", "-i", "p1", "-c", "agent", "--", "cat"],
            input=b"ping\n", capture_output=True, timeout=30, check=True), 10)
        line = json.dumps(kube_exec.connection(api, target, ["cat"])).encode() + b"\n"
        relay = timed(lambda: subprocess.run(
            kube_exec.relay_argv(sys.executable), input=line + b"ping\n",
            capture_output=True, timeout=30, check=True), 10)
        resident = relay_rss(kube_exec.relay_argv(sys.executable), line)
    return side, kubectl, relay, resident


def _ms(figure: float | None) -> str:
    return "not measured (kubectl is not on PATH)" if figure is None else f"{figure:.0f} ms"


def relay_rss(argv: list[str], line: bytes) -> float:
    """One relay's resident set once its stream is open and has carried a line."""
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line + b"ping\n")
    process.stdin.flush()
    process.stdout.readline()
    resident = rss_mib(process.pid)
    process.stdin.close()
    process.wait(timeout=30)
    process.stdout.close()
    return resident


def daemon_rss() -> float:
    from tests.support.k8s_fake import fake_cluster

    with home() as env, fake_cluster(Path(tempfile.mkdtemp())) as (fake, url):
        fake.secrets[(NS, "key")] = {"ANTHROPIC_API_KEY": "sk-ant-bench-0000"}
        work = Path(env["TEAMCTL_BENCH_DIR"])
        names = [f"m{i}" for i in range(MEMBERS)]
        started = time.monotonic()
        teamctl(env, "launch", "--timeout", "900", str(_team(work, fake, url, names, [])))
        print(f"launch of {MEMBERS} members in pods: {time.monotonic() - started:.1f} s")
        pid = int((Path(env["TEAMCTL_HOME"]) / "daemon.pid").read_text().strip())
        rss = rss_mib(pid)
        teamctl(env, "stop")
    return rss


def main() -> None:
    if "--crash-only" in sys.argv:  # re-attach after the daemon's kill -9 alone
        times = crash_reattach()
        print(f"launch + first turn after kill -9 of the daemon: median {median(times):.0f} "
              f"ms, max {max(times):.0f} ms ({len(times)} crashes)")
        return
    if "--rss-only" in sys.argv:  # the daemon with BENCH_KUBE_MEMBERS members alone
        print(f"daemon RSS with {MEMBERS} members on the fake cluster: {daemon_rss():.0f} MiB")
        return
    if "--exec-only" in sys.argv:  # the round trips and the relay alone
        side, kubectl, relay, resident = exec_round_trips()
        print(f"exec round trip: client {side:.0f} ms, kubectl {_ms(kubectl)}, relay "
              f"{relay:.0f} ms; relay resident {resident:.1f} MiB")
        return
    local, pod, reattach = turns_and_reattach()
    extra = median(pod) - median(local)
    print(f"send --wait round trip: local {median(local):.0f} ms, in a pod of the fake API "
          f"server {median(pod):.0f} ms (+{extra:.0f} ms; {ROUNDS} turns each)")
    print(f"re-attach after a dropped exec stream: median {median(reattach):.0f} ms, max "
          f"{max(reattach):.0f} ms ({CUTS} drops; backoff 0.1 s)")
    figure("turn_kube_extra_ms", extra)
    figure("kube_reattach_ms", median(reattach))
    side, kubectl, relay, resident = exec_round_trips()
    print(f"one exec round trip: the client in process {side:.0f} ms, kubectl exec -i "
          f"{_ms(kubectl)}, the relay process {relay:.0f} ms (process starts included)")
    print(f"one relay process resident: {resident:.1f} MiB")
    figure("kube_relay_start_ms", relay)
    figure("kube_relay_rss_mib", resident)
    rss = daemon_rss()
    print(f"daemon RSS with {MEMBERS} members on the fake cluster: {rss:.0f} MiB")
    figure("kube_daemon_rss_mib", rss)


if __name__ == "__main__":
    main()
