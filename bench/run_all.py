"""``make bench``: every benchmark (or those named: ``run_all.py bench_scale.py …``), each
printing its figures and ``bench: name = value`` lines — then the generated table in
docs/dev/performance.md is rewritten: each figure beside the date and the commit it was measured
on, so a published figure can never be older than the run that printed it. A figure a run did
not measure keeps its row (with its own date and commit)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "dev" / "performance.md"
BEGIN, END = "<!-- bench:begin (make bench writes this table) -->", "<!-- bench:end -->"
FIGURE = re.compile(r"^bench: (?P<name>[A-Za-z0-9_.-]+) = (?P<value>\S+)$")
ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| (?P<value>[^|]+) \| (?P<rest>.*) \|$")


def commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True,
                              check=False)
        return done.stdout.strip()

    head = git("rev-parse", "--short=10", "HEAD") or "unknown"
    # "+dirty": code differs from the commit (docs/ do not change a figure: this table is in it)
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs")
    return head + ("+dirty" if changed else "")


def run(script: Path) -> dict[str, str]:
    """Run one benchmark, echoing its output; its figures."""
    print(f"== {script.name}", flush=True)
    figures: dict[str, str] = {}
    with subprocess.Popen([sys.executable, str(script)], cwd=HERE, stdout=subprocess.PIPE,
                          text=True) as process:
        assert process.stdout is not None
        for line in process.stdout:
            print(line, end="", flush=True)
            if (match := FIGURE.match(line.strip())) is not None:
                figures[match["name"]] = match["value"]
    if process.returncode != 0:
        raise SystemExit(f"{script.name} failed (exit {process.returncode})")
    return figures


def rows(text: str) -> dict[str, str]:
    """The generated table's rows, by figure name (the whole line)."""
    if BEGIN not in text:
        return {}
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return {m["name"]: line for line in block.splitlines() if (m := ROW.match(line))}


def table(known: dict[str, str]) -> str:
    head = ["| figure | value | script | measured (UTC) | commit |",
            "| --- | --- | --- | --- | --- |"]
    return "\n".join([BEGIN, *head, *(known[name] for name in sorted(known)), END])


def main(names: list[str]) -> None:
    scripts = [HERE / n for n in names] if names else sorted(HERE.glob("bench_*.py"))
    text = DOC.read_text()
    known = rows(text)
    at, head = time.strftime("%Y-%m-%d %H:%M", time.gmtime()), commit()
    for script in scripts:
        for name, value in run(script).items():
            known[name] = f"| `{name}` | {value} | {script.name} | {at} | {head} |"
        DOC.write_text(_replace(DOC.read_text(), table(known)))  # after each script
    print(f"docs/dev/performance.md: {len(known)} figures, the newest measured at {at} on {head}")


def _replace(text: str, block: str) -> str:
    if BEGIN in text:
        before, rest = text.split(BEGIN, 1)
        return before + block + rest.split(END, 1)[1]
    return text.rstrip("\n") + "\n\n## Every figure, as last measured\n\n" + block + "\n"


if __name__ == "__main__":
    main(sys.argv[1:])
