"""Version managers' layouts made on the fly, in the shapes pyenv, asdf, mise and nvm leave in
an operator's home: small enough to build in a test, real enough to run. Each shim ends in a
shell script standing for the interpreter, which prints which version ran and its arguments
(``python3 3.12.1 ran ARGS``), so a test sees the shim resolve. The version each one picks
lives where the real manager keeps it: pyenv's ``version`` file in its root, asdf's and mise's
``~/.tool-versions``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LAYOUTS", "VERSION", "Layout", "asdf", "mise", "nvm", "pyenv", "real_pyenv"]

VERSION = "3.12.1"


@dataclass(frozen=True)
class Layout:
    """A version manager in ``home``: its ``root`` (what must be bound), the directory its
    users put on PATH (``path_dir``), ``program`` (the name a ``#!/usr/bin/env`` line asks
    for), ``files`` outside the root it needs, ``private``: what of it must stay unseen."""

    name: str
    root: Path
    path_dir: Path
    program: str
    files: tuple[Path, ...] = ()
    private: tuple[Path, ...] = ()


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _interpreter(prefix: Path, program: str) -> None:
    """A version's prefix (``bin`` beside ``lib``, as an install has) and its program."""
    (prefix / "lib").mkdir(parents=True, exist_ok=True)
    _executable(prefix / "bin" / program, f'#!/bin/sh\necho "{program} {VERSION} ran $*"\n')


def _tool_versions(home: Path) -> Path:
    path = home / ".tool-versions"
    path.write_text(f"python {VERSION}\n")
    return path


def pyenv(home: Path, python: str | None = None) -> Layout:
    """pyenv: a shim exports PYENV_ROOT and runs ``libexec/pyenv exec``, which reads the
    ``version`` file in the root and runs that version's program (``python``: a link to a
    real interpreter, for a test that runs a Python program through the shim)."""
    root = home / ".pyenv"
    _executable(root / "libexec" / "pyenv",
                '#!/bin/sh\nversion=$(cat "$PYENV_ROOT/version")\nprogram=$2\nshift 2\n'
                'exec "$PYENV_ROOT/versions/$version/bin/$program" "$@"\n')
    _executable(root / "shims" / "python3",
                f'#!/bin/sh\nexport PYENV_ROOT="{root}"\n'
                f'exec "{root}/libexec/pyenv" exec "${{0##*/}}" "$@"\n')
    (root / "version").write_text(f"{VERSION}\n")
    _interpreter(root / "versions" / VERSION, "python3")
    if python is not None:
        (root / "versions" / VERSION / "bin" / "python3").unlink()
        (root / "versions" / VERSION / "bin" / "python3").symlink_to(python)
    return Layout("pyenv", root, root / "shims", "python3")


def real_pyenv() -> Path | None:
    """This machine's pyenv root (``PYENV_ROOT``, else ``~/.pyenv``) when pyenv is installed
    with a ``python3`` shim, else None."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = (root / "libexec" / "pyenv").is_file() and (root / "shims" / "python3").is_file()
    return root if found else None


def asdf(home: Path) -> Layout:
    """asdf: a shim runs ``bin/asdf exec``, which reads ``~/.tool-versions`` and runs the
    installed version's program."""
    root = home / ".asdf"
    _executable(root / "bin" / "asdf",
                '#!/bin/sh\nversion=$(sed -n "s/^python //p" "$HOME/.tool-versions")\n'
                f'program=$2\nshift 2\nexec "{root}/installs/python/$version/bin/$program" '
                '"$@"\n')
    _executable(root / "shims" / "python3",
                f'#!/bin/sh\nexec "{root}/bin/asdf" exec "python3" "$@"\n')
    _interpreter(root / "installs" / "python" / VERSION, "python3")
    return Layout("asdf", root, root / "shims", "python3", files=(_tool_versions(home),))


def mise(home: Path) -> Layout:
    """mise: each shim is a link to the ``mise`` binary (here in ``~/.local/bin``), which reads
    ``~/.tool-versions`` and runs the installed program named as it was called. Its global
    ``config.toml`` holds an ``[env]`` secret: never bound."""
    root = home / ".local" / "share" / "mise"
    binary = _executable(home / ".local" / "bin" / "mise",
                         '#!/bin/sh\nversion=$(sed -n "s/^python //p" "$HOME/.tool-versions")\n'
                         f'exec "{root}/installs/python/$version/bin/${{0##*/}}" "$@"\n')
    (root / "shims").mkdir(parents=True)
    (root / "shims" / "python3").symlink_to(binary)
    _interpreter(root / "installs" / "python" / VERSION, "python3")
    config = home / ".config" / "mise" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[env]\nAPI_TOKEN = "sk-MISE-CONFIG-SECRET"\n')
    return Layout("mise", root, root / "shims", "python3", files=(_tool_versions(home),),
                  private=(config,))


def nvm(home: Path) -> Layout:
    """nvm: no shim — a version's own ``bin`` is on PATH; its prefix is what is bound, not
    the rest of ``~/.nvm``."""
    prefix = home / ".nvm" / "versions" / "node" / "v20.11.0"
    _interpreter(prefix, "node")
    alias = home / ".nvm" / "alias" / "default"
    alias.parent.mkdir(parents=True)
    alias.write_text("20\n")
    return Layout("nvm", prefix, prefix / "bin", "node", private=(alias,))


LAYOUTS = {"pyenv": pyenv, "asdf": asdf, "mise": mise, "nvm": nvm}
