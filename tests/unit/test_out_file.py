"""``--out`` files: a new 0600 file written whole, an existing one replaced only with
``force``, a symlink or FIFO never followed or replaced, a file that appears meanwhile kept."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from orchestrator.client import out_file
from orchestrator.client.out_file import OutputExists, OutputNotRegular, write_out

if TYPE_CHECKING:
    from pathlib import Path


def test_an_existing_file_is_a_typed_refusal_unless_forced(tmp_path: Path) -> None:
    """Without force the refusal is typed (code, exit 2, the fix); with force a regular file
    is replaced by a 0600 one and no temp file is left."""
    out = tmp_path / "doc.json"
    out.write_text("precious")
    with pytest.raises(OutputExists) as refused:
        write_out(out, b"new", force=False)
    assert (refused.value.code, refused.value.exit_code) == ("export_target_exists", 2)
    assert "pass --force or choose another path" in refused.value.message
    assert out.read_text() == "precious"
    write_out(out, b"new", force=True)
    assert out.read_bytes() == b"new" and out.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.json"]


@pytest.mark.parametrize("kind", ["symlink", "dangling symlink", "fifo", "directory"])
def test_a_symlink_or_special_file_is_never_followed_or_replaced(tmp_path: Path,
                                                                  kind: str) -> None:
    """Even with force: the typed refusal names what is there; nothing is written anywhere."""
    target = tmp_path / "target"
    out = tmp_path / "out.json"
    if kind == "symlink":
        target.write_text("someone else's")
        out.symlink_to(target)
    elif kind == "dangling symlink":
        out.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(out)
    else:
        out.mkdir()
    for force in (False, True):
        with pytest.raises(OutputNotRegular) as refused:
            write_out(out, b"new", force=force)
        assert refused.value.code == "export_target_not_regular"
        assert "choose another path" in refused.value.message
    assert not target.exists() or target.read_text() == "someone else's"
    assert os.path.lexists(out) and sorted(p.name for p in tmp_path.iterdir()) == sorted(
        {"out.json", *(["target"] if target.exists() else [])})


def test_a_file_that_appears_after_the_check_is_kept(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The new file is linked into place, which fails rather than replace a file created
    between the check and the write."""
    out = tmp_path / "doc.json"
    real = out_file.check_out

    def check_then_race(path: Path, *, force: bool) -> bool:
        answer = real(path, force=force)
        path.write_text("arrived meanwhile")
        return answer

    monkeypatch.setattr(out_file, "check_out", check_then_race)
    with pytest.raises(OutputExists):
        write_out(out, b"new", force=False)
    assert out.read_text() == "arrived meanwhile"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.json"]
