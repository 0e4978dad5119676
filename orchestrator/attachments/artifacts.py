"""The artifact store: content-addressed, private, durable, verified.

Files live at ``artifacts/<sha256[:2]>/<sha256>`` (0600, in 0700 directories) and are written
temp → fsync → rename → fsync dir *before* anything references them. Reads verify the checksum:
a mismatch or a missing file raises ArtifactMissing, so the caller can rebuild the artifact
from the original or fail ``attachment_artifact_missing``. Nothing is deleted automatically.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING

from orchestrator.attachments.failures import AttachmentError
from orchestrator.paths import write_private

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ArtifactMissing", "ArtifactStore"]


class ArtifactMissing(AttachmentError):
    def __init__(self, sha256: str, reason: str) -> None:
        super().__init__(
            "attachment_artifact_missing",
            f"a stored attachment ({sha256[:12]}) is {reason}; attach the file again",
            diagnostic=f"artifact {sha256}: {reason}",
        )
        self.sha256 = sha256


class ArtifactStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def put(self, data: bytes) -> str:
        """Store ``data`` durably; its sha256. Idempotent: existing verified content is kept."""
        digest = hashlib.sha256(data).hexdigest()
        target = self.path(digest)
        if self._present(target, len(data)):
            return digest  # content-addressed: the name is the checksum, verified on read
        try:
            self._write(target, data)
        except OSError as exc:
            raise AttachmentError(
                "attachment_artifact_write_failed",
                f"could not store the attachment ({exc.strerror}); free some disk space or "
                f"check the permissions of {self.root}, then send again",
                diagnostic=f"write {target}: {exc!r}",
            ) from exc
        return digest

    def get(self, sha256: str) -> bytes:
        """The stored bytes, verified; ArtifactMissing if absent or corrupted."""
        try:
            data = self.path(sha256).read_bytes()
        except FileNotFoundError:
            raise ArtifactMissing(sha256, "missing from the store") from None
        except OSError as exc:
            raise ArtifactMissing(sha256, f"unreadable ({exc.strerror})") from None
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ArtifactMissing(sha256, "corrupted on disk (checksum mismatch)")
        return data

    def present(self, sha256: str, size: int) -> bool:
        """Present with the expected size (cheap; the checksum is verified on read)."""
        return self._present(self.path(sha256), size)

    def _present(self, path: Path, size: int) -> bool:
        try:
            return path.stat().st_size == size
        except OSError:
            return False

    def _write(self, target: Path, data: bytes) -> None:
        directory = target.parent
        for path in (self.root, directory):
            if not path.is_dir():
                path.mkdir(mode=0o700, exist_ok=True)
                os.chmod(path, 0o700)  # whatever the umask
        write_private(target, data)
