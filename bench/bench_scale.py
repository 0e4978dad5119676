"""Issue 7: what a team costs. Each figure is printed with its baseline, then as
``bench: <name> = <value>`` (targets in docs/dev/performance.md).

Members are driven as the operator drives them (requests on the daemon's socket, the CLI);
nothing calls as a member."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from _harness import FAKE_CLAUDE, REPO, figure, home, median, percentile, rss_mib, team_file
from PIL import ImageDraw

from orchestrator import client, protocol
from orchestrator.paths import Home


def launch(env: dict[str, str], members: int, name: str = "t") -> Home:
    ctl = Home(Path(env["TEAMCTL_HOME"]))
    client.ensure_daemon(ctl)
    from orchestrator.config import load_team_file

    path = team_file(Path(env["TEAMCTL_BENCH_DIR"]), name, members)
    config = load_team_file(path).model_dump(mode="json")
    client.call(ctl, protocol.LAUNCH, {"config": config, "file": str(path)}, timeout=600)
    return ctl


def daemon_pid(ctl: Home) -> int:
    return int(ctl.pid_file.read_text().strip())


def events(ctl: Home) -> list[dict[str, object]]:
    path = ctl.logs / "teamctl.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def send_internal(runs: int = 500) -> None:
    with home() as env:
        ctl = launch(env, 1)
        for i in range(runs):
            client.call(ctl, protocol.SEND, {"member": "m0", "text": f"ping {i}", "wait": True,
                                      "timeout": 30.0}, timeout=60)
        sent = [e for e in events(ctl)
                if e["event"] == "delivery_sent" and e.get("journal_to_stdin_ms") is not None]
        samples = [float(e["journal_to_stdin_ms"]) for e in sent]  # type: ignore[arg-type]
        durable = [float(e["durable_to_stdin_ms"]) for e in sent]  # type: ignore[arg-type]
        disk = fsync_ms(Path(env["TEAMCTL_HOME"]))
    baseline = direct_write_us()
    print(f"journal write → line on the member's stdin: p50 {median(samples):.3f} ms, "
          f"p99 {percentile(samples, 99):.3f} ms ({len(samples)} messages); of it, after the "
          f"write was durable: p50 {median(durable):.3f} ms, p99 {percentile(durable, 99):.3f} "
          f"ms; baseline: one fsync on this disk p50 {disk:.3f} ms, writing the same line to a "
          f"claude stdin directly {baseline:.1f} µs")
    figure("send_internal_p50_ms", median(samples))
    figure("send_internal_p99_ms", percentile(samples, 99))
    figure("send_internal_durable_to_stdin_p50_ms", median(durable))
    figure("fsync_p50_ms", disk)


def fsync_ms(directory: Path, runs: int = 200) -> float:
    """One 4 KiB append and its fsync on the journal's disk (what a durable commit waits on)."""
    import os

    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    samples = []
    try:
        for _ in range(runs):
            os.write(fd, b"x" * 4096)
            start = time.perf_counter()
            os.fsync(fd)
            samples.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return median(samples)


def direct_write_us(runs: int = 500) -> float:
    line = (json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": "ping"}]}, "parent_tool_use_id": None, "session_id": ""},
        separators=(",", ":")) + "\n").encode()
    process = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert process.stdin is not None
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        process.stdin.write(line)
        process.stdin.flush()
        samples.append((time.perf_counter() - start) * 1e6)
    process.stdin.close()
    process.wait()
    return median(samples)


def scale_and_throughput() -> None:
    for members in (1, 10, 50):
        with home() as env:
            ctl = launch(env, members)
            for i in range(members):
                client.call(ctl, protocol.SEND, {"member": f"m{i}", "text": "warm", "wait": True,
                                          "timeout": 30.0}, timeout=60)
            value = rss_mib(daemon_pid(ctl))
            print(f"daemon RSS with {members} fake members: {value:.1f} MiB")
            figure(f"daemon_rss_{members}_members_mib", value)
    with home() as env:
        ctl = launch(env, 100)
        start = time.perf_counter()
        ids: list[str] = []

        def sender(offset: int) -> None:  # four operators sending at once
            ids.extend(client.call(ctl, protocol.SEND,
                                   {"member": f"m{n % 100}", "text": f"fan {n}"},
                                   timeout=60)["id"] for n in range(offset, 1000, 4))

        senders = [threading.Thread(target=sender, args=(k,)) for k in range(4)]
        for thread in senders:
            thread.start()
        for thread in senders:
            thread.join()
        sent_s = time.perf_counter() - start
        wait_all_answered(ctl, len(ids))
        elapsed = time.perf_counter() - start
        rate = len(ids) / elapsed
        print(f"1000 messages across 100 fake members: {rate:.0f} msgs/s ({elapsed:.2f} s; "
              f"journaling alone {len(ids) / sent_s:.0f} msgs/s)")
        figure("throughput_msgs_per_s", rate)
        pid = daemon_pid(ctl)
        value = rss_mib(pid)
        print(f"daemon RSS with 100 fake members (after 1000 messages): {value:.1f} MiB")
        figure("daemon_rss_100_members_mib", value)
        idle_cpu(pid)
        # the same daemon after the idle window: the burst's cycles collected and the heap
        # trimmed once the change feed went still (orchestrator/daemon/heap.py)
        value = rss_mib(pid)
        print(f"daemon RSS with 100 fake members, once quiet (after the idle window): "
              f"{value:.1f} MiB")
        figure("daemon_rss_100_members_quiet_mib", value)


def wait_all_answered(ctl: Home, count: int) -> None:
    """Wait until ``count`` deliveries are answered, reading only what the log gained since the
    last look (re-parsing the whole log every 50 ms took most of a core from the daemon it
    measures, on a two-core machine)."""
    path = ctl.logs / "teamctl.jsonl"
    deadline = time.monotonic() + 600
    offset, answered, partial = 0, 0, b""
    while time.monotonic() < deadline:
        with path.open("rb") as file:
            file.seek(offset)
            chunk = file.read()
        offset += len(chunk)
        *lines, partial = (partial + chunk).split(b"\n")
        answered += sum(1 for line in lines if b'"delivery_answered"' in line
                        and json.loads(line)["event"] == "delivery_answered")
        if answered >= count:
            return
        time.sleep(0.05)
    raise SystemExit("not all messages were answered")


def idle_cpu(pid: int, seconds: float = 30.0) -> None:
    """The daemon's CPU while its 100 members idle (their liveness probes are its only
    work): the scheduler's own count of every thread's time on a CPU (schedstat, in ns) —
    clock ticks count in 10 ms steps, and 0.1 % of 30 s is 30 ms."""
    def on_cpu_ns() -> dict[str, int]:  # by thread
        times = {}
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                times[task.name] = int((task / "schedstat").read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError):  # a worker thread that ended
                continue
        return times

    time.sleep(5)  # the fan-out's last writes and checkpoints settle first
    before, start = on_cpu_ns(), time.monotonic()
    time.sleep(seconds)
    after, elapsed = on_cpu_ns(), time.monotonic() - start
    # a thread born since counts whole; one that ended since (an idle worker thread of the
    # fan-out, retired after 10 s) took its last few microseconds with it
    used = sum(ns - before.get(tid, 0) for tid, ns in after.items())
    pct = used / 1e9 / elapsed * 100
    print(f"daemon CPU over {seconds:.0f} s idle with 100 members (probed every 15 s): "
          f"{pct:.3f} % of one core")
    figure("idle_cpu_100_members_pct", pct)


def status_under_attachment_load(sends: int = 20) -> None:
    sys.path.insert(0, str(REPO))
    from tests.support import images

    with home() as env:
        ctl = launch(env, 4)
        work = Path(env["TEAMCTL_BENCH_DIR"])
        shots = []
        for i in range(sends):
            image = images.screenshot()
            ImageDraw.Draw(image).text((100, 100 + i), f"variant {i}", fill="red")
            shots.append(images.save(image, work / f"shot{i}.png", "PNG"))
        idle = time_status(ctl, 50)
        done = threading.Event()

        def sender(index: int) -> None:
            client.call(ctl, protocol.SEND, {"member": f"m{index % 4}", "text": "look",
                                      "attachments": [str(shots[index])]}, timeout=300)

        threads = [threading.Thread(target=sender, args=(i,)) for i in range(sends)]
        for thread in threads:
            thread.start()
        loaded: list[float] = []
        while any(t.is_alive() for t in threads):
            loaded += time_status(ctl, 1)
        for thread in threads:
            thread.join()
        done.set()
    print(f"status while {sends} sends with 4K screenshots normalize: p50 {median(loaded):.1f} "
          f"ms, p99 {percentile(loaded, 99):.1f} ms ({len(loaded)} calls); idle p99 "
          f"{percentile(idle, 99):.1f} ms")
    figure("status_p99_under_attachment_load_ms", percentile(loaded, 99))


def time_status(ctl: Home, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        client.call(ctl, protocol.STATUS, {}, timeout=60)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def cli_startup(runs: int = 30) -> None:
    """``teamctl --help`` and ``teamctl status`` (a daemon with one member) against ``python -c
    "import click"``: the three in turn, ``runs`` rounds, each the median of its rounds — a
    machine whose load drifts during the run moves all three alike (measured one after the
    other, a shared machine's drift alone moved the ratio by 0.2)."""
    teamctl = str(Path(sys.executable).parent / "teamctl")  # the console script users run
    with home() as env:
        launch(env, 1)
        argvs = {"click": [sys.executable, "-c", "import click"], "help": [teamctl, "--help"],
                 "status": [teamctl, "status"]}
        samples: dict[str, list[float]] = {name: [] for name in argvs}
        for _ in range(runs):
            for name, argv in argvs.items():
                start = time.perf_counter()
                subprocess.run(argv, capture_output=True, check=True, env=env)
                samples[name].append((time.perf_counter() - start) * 1000)
    click_ms, help_ms, status_ms = (median(samples[n]) for n in ("click", "help", "status"))
    print(f"python -c 'import click' {click_ms:.1f} ms; teamctl --help {help_ms:.1f} ms "
          f"({help_ms / click_ms:.2f}×); teamctl status {status_ms:.1f} ms "
          f"({status_ms / click_ms:.2f}×), medians of {runs} interleaved rounds")
    figure("cli_help_vs_click_ratio", help_ms / click_ms)
    figure("cli_status_vs_click_ratio", status_ms / click_ms)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    assert FAKE_CLAUDE.exists()
    which = sys.argv[1:] or ["send", "scale", "status", "cli"]
    if "send" in which:
        send_internal()
    if "scale" in which:
        scale_and_throughput()
    if "status" in which:
        status_under_attachment_load()
    if "cli" in which:
        cli_startup()
