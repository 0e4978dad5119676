"""``make soak``: M messages to K fake members while members and the daemon are killed at
random. Prints ``sent``, ``answered``, ``failed``, ``duplicated_after_answer`` and ``lost``.

- sent: messages whose id the daemon returned (journaled before it answered);
- answered / failed: their final delivery state in the journal (failed ones carry a code);
- lost: sent messages that are not in the journal, or not answered/failed at the end;
- duplicated_after_answer: a member received a message again after the journal recorded it
  answered (from the fake runtime's own transcripts, which timestamp every turn it received).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import sys
import threading
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path

from _harness import REPO, figure, home, team_file

from orchestrator import client, protocol
from orchestrator.errors import DaemonUnavailable, TeamctlError
from orchestrator.paths import Home


class Chaos(threading.Thread):
    """Kills a random member every ``member_every`` seconds and the daemon every
    ``daemon_every`` seconds (then starts a new one), until told to stop."""

    def __init__(self, ctl: Home, rng: random.Random, *, member_every: float,
                 daemon_every: float) -> None:
        super().__init__(daemon=True)
        self.ctl, self.rng = ctl, rng
        self.member_every, self.daemon_every = member_every, daemon_every
        self.member_kills = self.daemon_kills = 0
        self.stop = threading.Event()
        self.daemon_up = threading.Event()
        self.daemon_up.set()

    def run(self) -> None:
        next_daemon = time.monotonic() + self.daemon_every
        while not self.stop.wait(self.member_every * self.rng.uniform(0.5, 1.5)):
            try:
                if time.monotonic() >= next_daemon:
                    self.kill_daemon()
                    next_daemon = time.monotonic() + self.daemon_every
                else:
                    self.kill_member()
            except Exception as exc:  # keep the chaos going; say what happened
                print(f"chaos: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                self.daemon_up.set()

    def kill_member(self) -> None:
        try:
            doc = client.call(self.ctl, protocol.STATUS, {}, timeout=10)
        except TeamctlError:
            return
        pids = [m["pid"] for t in doc["teams"] for m in t["members"] if m["pid"]]
        if pids:
            with suppress(ProcessLookupError):
                os.kill(self.rng.choice(pids), signal.SIGKILL)
            self.member_kills += 1

    def kill_daemon(self) -> None:
        pid = int((self.ctl.pid_file).read_text().strip() or 0)
        self.daemon_up.clear()
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self.daemon_kills += 1
        while Path(f"/proc/{pid}").exists() and not _zombie(pid):
            time.sleep(0.01)
        client.ensure_daemon(self.ctl)  # a new daemon resumes the team and its queue
        self.daemon_up.set()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def send_all(ctl: Home, chaos: Chaos, messages: int, members: int) -> dict[str, str]:
    """Send every message (retrying while the daemon is down); text → message id."""
    sent: dict[str, str] = {}
    for n in range(messages):
        text = f"soak message {n}"
        while True:
            chaos.daemon_up.wait(60)
            try:
                result = client.call(ctl, protocol.SEND,
                                     {"member": f"m{n % members}", "text": text}, timeout=30)
                sent[text] = result["id"]
                break
            except DaemonUnavailable:
                time.sleep(0.05)
            except TeamctlError as exc:
                if "no running team" in exc.message or "not_found" in exc.code:
                    time.sleep(0.05)  # the new daemon is still resuming the team
                    continue
                raise
    return sent


def wait_terminal(ctl: Home, ids: set[str], deadline_s: float) -> dict[str, tuple[str, float]]:
    deadline = time.monotonic() + deadline_s
    while True:
        states = journal_states(ctl)
        open_ = [i for i in ids if states.get(i, ("missing", 0))[0] not in ("answered", "failed")]
        if not open_ or time.monotonic() > deadline:
            return states
        time.sleep(0.5)


def journal_states(ctl: Home) -> dict[str, tuple[str, float]]:
    db = sqlite3.connect(f"file:{ctl.database}?mode=ro", uri=True, timeout=10)
    try:
        rows = db.execute("SELECT message_id, state, updated_at FROM deliveries").fetchall()
    finally:
        db.close()
    return {row[0]: (row[1], row[2]) for row in rows}


def runtime_receipts(ctl: Home) -> dict[str, list[float]]:
    """Every turn the fake members received: text → receive times (from their transcripts)."""
    seen: dict[str, list[float]] = {}
    for path in (ctl.root / "members").glob("*/*/config/projects/*/*.jsonl"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("type") == "user":
                for text in str(entry.get("content", "")).split("\n"):
                    seen.setdefault(text, []).append(float(entry.get("t", 0)))
    return seen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--member-kill-every", type=float, default=0.8)
    parser.add_argument("--daemon-kill-every", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with home() as env:
        os.environ["TEAMCTL_HOME"] = env["TEAMCTL_HOME"]
        ctl = Home(Path(env["TEAMCTL_HOME"]))
        team = team_file(Path(env["TEAMCTL_BENCH_DIR"]), "soak", args.members)
        text = team.read_text().replace(
            'model = "claude-sonnet-4-5"',
            'model = "claude-sonnet-4-5"\nbackoff = [0.05, 0.5]\nmax_restarts = 1000\n'
            'env = { FAKE_CLAUDE_TURN_DELAY = "0.01" }')
        team.write_text(text)
        client.ensure_daemon(ctl)
        client.call(ctl, protocol.LAUNCH, {"config": _config(team), "file": str(team)}, timeout=60)
        chaos = Chaos(ctl, rng, member_every=args.member_kill_every,
                      daemon_every=args.daemon_kill_every)
        started = time.monotonic()
        chaos.start()
        sent = send_all(ctl, chaos, args.messages, args.members)
        deadline = time.monotonic() + 300
        while (chaos.member_kills < 20 or chaos.daemon_kills < 5) and \
                time.monotonic() < deadline and chaos.is_alive():
            time.sleep(0.2)
        chaos.stop.set()
        chaos.join()
        states = wait_terminal(ctl, set(sent.values()), 600)
        elapsed = time.monotonic() - started
        receipts = runtime_receipts(ctl)
    final = Counter(states.get(i, ("missing", 0))[0] for i in sent.values())
    lost = sum(n for state, n in final.items() if state not in ("answered", "failed"))
    duplicated = sum(
        1 for text, message_id in sent.items()
        if states.get(message_id, ("", 0))[0] == "answered"
        and any(t > states[message_id][1] for t in receipts.get(text, [])))
    print(f"soak: M={args.messages} K={args.members} member_kills={chaos.member_kills} "
          f"daemon_kills={chaos.daemon_kills} elapsed={elapsed:.0f}s")
    print(f"sent={len(sent)} answered={final['answered']} failed={final['failed']} "
          f"duplicated_after_answer={duplicated} lost={lost}")
    figure("soak_lost", lost)
    figure("soak_duplicated_after_answer", duplicated)


def _config(team: Path) -> dict[str, object]:
    sys.path.insert(0, str(REPO))
    from orchestrator.config import load_team_file

    return load_team_file(team).model_dump(mode="json")


if __name__ == "__main__":
    main()
