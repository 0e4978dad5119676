"""The forge's token: read by the daemon from the environment variable the team file names,
held in an object whose ``repr`` and ``str`` never show it, given to the HTTP client's
``Authorization`` header and nowhere else (no log, no argv, no member's environment)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.errors import ForgeError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Token", "read_token"]


class Token:
    """A secret that does not print."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The token itself: for the Authorization header only."""
        return self._value

    def __repr__(self) -> str:
        return "Token(<hidden>)"

    __str__ = __repr__


def read_token(env_name: str, environ: Mapping[str, str]) -> Token:
    """The token in ``environ[env_name]``; ForgeError ``forge_token_missing`` (naming the
    variable, never a value) when it is unset, empty or not one line of printable ASCII."""
    value = environ.get(env_name, "")
    if not value or not value.isascii() or not value.isprintable() or value != value.strip():
        raise ForgeError("forge_token_missing",
                         f"the forge token's environment variable {env_name} is "
                         + ("not set" if not value else "not one line of printable ASCII")
                         + f"; export {env_name} in the environment the daemon starts from "
                         "([forge] github.token_env names another variable)")
    return Token(value)
