"""A task's commit pushed to its own branch on the forge (docs/forge.md, "Pull requests"), with
the operator's git credentials as git already has them — and nothing else of git's that runs a
program.

The push runs teamctl's hardened git (``orchestrator/git_run.py``) on the objects of the
repository teamctl recorded (the owner's worktree record's common dir): no hook (the pre-push
one included; a local-path remote's own receive hooks are that repository's owner's), no
fsmonitor, filter or driver, nothing of the repository's configuration. What it takes back from
the operator's own *global* configuration (``~/.gitconfig``, ``~/.config/git/config``, which no
sandboxed member sees) is what authenticates a push: ``credential.*`` (the helper — ``gh auth
git-credential``, a keychain, a store), ``url.*.insteadOf``/``pushInsteadOf`` and
``core.sshCommand``; from the daemon's environment ``SSH_AUTH_SOCK`` (an SSH agent). The
forge's token is never on the command line or in git's environment. Where the push goes is the
team file's (``[forge] remote``, or the repository's URL on GitHub), never a remote a member's
configuration names: the push runs in a scratch bare repository of teamctl's (its own config,
no hooks) that borrows the member's objects (``objects/info/alternates``), so nothing of the
member's configuration is read — a ``url.*.pushInsteadOf`` it planted sent the push elsewhere
when git ran in its repository (tests/unit/test_forge_push.py). Call from a worker thread.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import ForgeError, GitFailed
from orchestrator.git_run import GIT_TIMEOUT, Git, GitPlace, config_env, execute

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["PUSH_TIMEOUT", "operator_credentials", "push"]

PUSH_TIMEOUT = 300.0
_TAKEN = re.compile(r"^(credential\..*|url\..*\.(insteadof|pushinsteadof)|core\.sshcommand)$")
# what git (and GitHub through it) says when the credentials may not push
_USERINFO = re.compile(r"^([a-z+]+://)[^/@]*@", re.IGNORECASE)
_REFUSED = re.compile(r"permission|denied|403|401|authentication failed|could not read "
                      r"username|insufficient permission|not allowed|protected branch|"
                      r"read[- ]only", re.IGNORECASE)


def operator_credentials(environ: Mapping[str, str] = os.environ
                         ) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The push's settings from the operator's global configuration (read, never run) and
    the environment an SSH agent needs."""
    home = environ.get("HOME") or str(Path.home())
    env = {"PATH": environ.get("PATH") or os.defpath, "HOME": home, "LANG": "C",
           "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1", **config_env(())}
    done = execute(["git", "config", "--global", "--null", "--get-regexp",
                    r"^(credential|url|core)\."], env, cwd=Path(home), timeout=GIT_TIMEOUT,
                   check=False, shown=("config", "--global"))
    settings = [("credential.helper", "")]  # the repository's helpers dropped, the operator's
    ssh = "ssh"                             # given again below
    for item in done.stdout.split("\0"):
        key, _, value = item.partition("\n")
        if not _TAKEN.match(key.lower()):
            continue
        if key.lower() == "core.sshcommand":
            ssh = value
        else:
            settings.append((key, value))
    settings.append(("core.sshCommand", ssh))
    agent = {"SSH_AUTH_SOCK": environ["SSH_AUTH_SOCK"]} if environ.get("SSH_AUTH_SOCK") else {}
    return settings, agent


def push(source: Path, url: str, commit: str, branch: str, *, repo: str,
         environ: Mapping[str, str] = os.environ) -> None:
    """``commit`` of the repository at ``source`` (its common dir) pushed to ``branch`` at
    ``url`` (the branch is teamctl's: moved wherever it was). ForgeError
    ``forge_push_refused`` naming the permission when the credentials may not push,
    ``forge_push_failed`` (retryable) for anything else."""
    settings, agent = operator_credentials(environ)
    try:
        with tempfile.TemporaryDirectory(prefix="teamctl-push-") as scratch:
            view = Path(scratch)  # teamctl's own, empty repository: only the objects borrowed
            for part in ("objects/info", "refs"):
                (view / part).mkdir(parents=True)
            (view / "HEAD").write_text("ref: refs/heads/main\n")
            (view / "config").write_text("[core]\n\trepositoryformatversion = 0\n"
                                         "\tbare = true\n")
            (view / "objects" / "info" / "alternates").write_text(
                f"{(source / 'objects').absolute()}\n")
            git = Git(GitPlace(view, view), timeout=PUSH_TIMEOUT, settings=settings)
            done = git.run("push", "--no-verify", "--porcelain", "--", url,
                           f"+{commit}:refs/heads/{branch}",
                           env={**agent, "GIT_TERMINAL_PROMPT": "0"}, check=False)
    except (GitFailed, OSError) as exc:
        why = exc.message if isinstance(exc, GitFailed) else str(exc)
        raise ForgeError("forge_push_failed", f"git push of {branch} did not run: "
                         f"{why}", retryable=True) from None
    if done.returncode == 0:
        return
    said = " ".join(done.stderr.strip().splitlines()[-3:])[-400:] or f"exit {done.returncode}"
    url = _USERINFO.sub(r"\1", url)  # never a password the URL holds
    if _REFUSED.search(said):
        raise ForgeError("forge_push_refused", f"git push of {branch} to {url} was refused "
                         f"({said}): the git credentials need push (write) access to {repo} — "
                         "give the account 'write' on the repository, or set [forge] remote to "
                         "a URL your git credentials may push to")
    raise ForgeError("forge_push_failed", f"git push of {branch} to {url} failed ({said}); it "
                     "is tried again at the next poll", retryable=True)
