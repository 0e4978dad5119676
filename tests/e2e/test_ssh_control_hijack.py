"""Another local user cannot catch a remote member's secrets at its ssh ControlMaster: the
ControlPath lives in a 0700 directory of the operator's own, never at the old predictable
``/tmp/tc-<uid>-<hash>`` that anyone could create first. Real sshd (tests/support/sshd.py), whose
throwaway user is the second uid that plants the directory and a fake master."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import anyio
import pytest

from runtimes.hosts.ssh import host as ssh
from runtimes.hosts.ssh.host import SshHost, SshTarget
from tests.support.sshd import sshd
from tests.support.xserver import wait_line

pytestmark = pytest.mark.e2e
SECRET = "sk-ant-never-to-another-user-0000"

# the other user's fake master: it listens where teamctl used to put its ControlPath and
# prints every connection and every byte it receives (and what any passed fd carries)
FAKE_MASTER = r"""
import os, socket, sys
folder, name = sys.argv[1:]
os.mkdir(folder, 0o700)
server = socket.socket(socket.AF_UNIX)
server.bind(os.path.join(folder, name))
server.listen(8)
print("listening", flush=True)
while True:
    client, _ = server.accept()
    print("CONNECTION", flush=True)
    client.settimeout(5)
    try:
        while True:
            data, ancillary, _, _ = client.recvmsg(65536, socket.CMSG_SPACE(16))
            if not data:
                break
            print("BYTES", data.hex(), flush=True)
            for _, _, fds in ancillary:
                for fd in memoryview(fds).cast("i"):
                    os.set_blocking(fd, False)
                    try:
                        print("FD", os.read(fd, 65536).hex(), flush=True)
                    except OSError:
                        pass
    except OSError:
        pass
"""


def _predictable(home: Path) -> Path:
    key = hashlib.sha256(str(home).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"tc-{os.getuid()}-{key}"


def test_a_control_master_planted_by_another_user_never_receives_a_members_secret(
        tmp_path: Path) -> None:
    """Another uid creates the old predictable control dir and listens at the ControlPath;
    a remote member then starts (its env holding an API key): the planted master is never
    even connected to, and the member runs through teamctl's own master."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    planted = _predictable(home)
    with sshd() as box:
        assert box.throwaway, "the tests run as root: the host's user is a second uid"
        host = box.host()
        target = SshTarget("box", host["address"], host["user"], host["port"],
                           host["identity_file"], tuple(host["ssh_options"]))
        name = Path(SshHost(target, planted, "h0", "web", "far", state).control_path).name
        fake = subprocess.Popen(["python3", "-c", FAKE_MASTER, str(planted), name],
                                user=box.user, group=box.user, stdout=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, cwd="/")
        assert fake.stdout is not None
        try:
            wait_line(fake.stdout.fileno(), b"listening", "the fake master")
            member = SshHost(target, ssh.control_dir(home), "h0", "web", "far", state)
            assert anyio.run(_start, member) == b"started"
            fake.kill()
            heard = fake.stdout.read().decode()
        finally:
            fake.kill()
            fake.wait()
            fake.stdout.close()
            shutil.rmtree(planted, ignore_errors=True)
    assert "CONNECTION" not in heard and SECRET.encode().hex() not in heard, heard
    chosen = os.lstat(member.control_dir)
    assert (chosen.st_uid, stat.S_IMODE(chosen.st_mode)) == (os.getuid(), 0o700)
    if member.control_dir != home / "ssh":  # the home's path was too long for a socket
        member.control_dir.rmdir()


async def _start(member: SshHost) -> bytes:
    """Start a runtime on the host with a secret in its env; its first line; then stop."""
    process = await member.spawn(["sh", "-c", "echo started; cat >/dev/null"], cwd=Path("~"),
                                 env={"ANTHROPIC_API_KEY": SECRET})
    assert process.stdout is not None and process.stdin is not None
    with anyio.fail_after(30):
        line = b""
        while not line.endswith(b"\n"):
            line += await process.stdout.receive(1)
        await process.stdin.aclose()
        await process.wait()
    await member.close()
    return line.strip()
