"""Where teamctl keeps its state: ``TEAMCTL_HOME`` and its layout (DESIGN §1)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Home", "ensure_private_dir", "remove_temp_socket_dir", "resolve_home",
           "temp_socket_dir", "write_private"]


def resolve_home() -> Path:
    """``$TEAMCTL_HOME``, or the platform's user state dir."""
    env = os.environ.get("TEAMCTL_HOME")
    if env:
        return Path(env).expanduser().absolute()
    import platformdirs  # only here: keeps the CLI's import time down

    return Path(platformdirs.user_state_dir("teamctl")).absolute()


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` and force it to mode 0700; every parent it had to create is 0700 too
    (``mkdir(parents=True)`` would give those the umask's mode)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
    os.chmod(path, 0o700)
    return path


def temp_socket_dir(record: Path, prefix: str) -> Path:
    """A private dir in the temp dir for sockets whose path under teamctl's home would pass
    the kernel's limit: the one ``record`` (a daemon-private file) names when it is still
    this daemon's own (``_own_temp_dir``: a ``kill -9`` left it), else a fresh ``mkdtemp``
    (0700, random name), recorded — so a daemon killed and started again leaves none behind."""
    import tempfile  # only here, as write_private

    try:
        descriptor = os.open(record, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(descriptor) as file:
            recorded = Path(file.read(4096).strip())
        if _own_temp_dir(recorded, prefix):
            return recorded
    except (OSError, ValueError):
        pass
    made = Path(tempfile.mkdtemp(prefix=prefix))
    try:  # without the record a killed daemon's dir is only left behind
        descriptor = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(str(made))
    except OSError:
        pass
    return made


def _own_temp_dir(path: Path, prefix: str) -> bool:
    """``path`` is directly in the temp dir, named ``prefix…``, a real directory (never
    followed) of this uid with mode 0700: one of the daemon's own socket dirs."""
    import stat
    import tempfile

    if path.parent != Path(tempfile.gettempdir()) or not path.name.startswith(prefix):
        return False
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and \
        stat.S_IMODE(found.st_mode) == 0o700


def remove_temp_socket_dir(path: Path, prefix: str) -> bool:
    """Remove ``path`` if it is one of the daemon's own socket dirs in the temp dir
    (``_own_temp_dir``). The sockets left in it go first; anything else there keeps it
    (nothing is followed or recursed into: a member that can see the directory can leave a
    file, never redirect a removal). True when it is gone."""
    import stat

    if not _own_temp_dir(path, prefix):
        return False
    try:
        directory = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for name in os.listdir(directory):
                entry = os.stat(name, dir_fd=directory, follow_symlinks=False)
                if stat.S_ISSOCK(entry.st_mode) and entry.st_uid == os.getuid():
                    os.unlink(name, dir_fd=directory)
        finally:
            os.close(directory)
        os.rmdir(path)
    except OSError:  # not empty, already gone, raced: left as it is
        return False
    return True


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` as a 0600 file, durably and atomically: a temp file beside
    it, fsynced, renamed over it, the directory fsynced (a crash leaves the old file or the
    new one, never half of one)."""
    import tempfile  # only here: every teamctl command imports this module (its start-up)

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@dataclass(frozen=True)
class Home:
    """The state directory and the fixed names inside it."""

    root: Path

    @classmethod
    def from_env(cls) -> Home:
        return cls(resolve_home())

    @property
    def socket(self) -> Path:
        return self.root / "teamctl.sock"

    @property
    def pid_file(self) -> Path:
        return self.root / "daemon.pid"

    @property
    def database(self) -> Path:
        return self.root / "state.db"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def worktrees(self) -> Path:
        """Members' git worktrees (``worktree = true``), outside every repository."""
        return self.root / "worktrees"

    def member_dir(self, team: str, member: str) -> Path:
        """The private directory of one member's runtime state."""
        return self.root / "members" / team / member

    def prepare(self) -> None:
        """Create the home and its private subdirectories (all 0700)."""
        for path in (self.root, self.logs, self.artifacts, self.root / "members"):
            ensure_private_dir(path)
