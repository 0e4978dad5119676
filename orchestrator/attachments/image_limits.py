"""What reaches a model untouched, for one image (``Limits``): the numbers both the
normalizer and the CLIs' rules (``cli_rules``) plan within, below both of them."""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """What reaches a model untouched, for one image: long edge (px), megapixels and encoded
    bytes its API accepts; and what the member's CLI passes through without changing it
    (``cli_rules``): at most ``max_patches`` 32-px patches (codex), at most ``cli_max_bytes``
    (Claude Code re-encodes larger images)."""

    long_edge: int
    megapixels: float
    max_bytes: int
    max_patches: int | None = None
    cli_max_bytes: int | None = None

    @property
    def budget(self) -> int:
        """The bytes a still variant is planned within."""
        return min(self.max_bytes, self.cli_max_bytes or self.max_bytes)

    def key(self) -> str:
        extra = (f"/{self.max_patches}patches" if self.max_patches else "") + (
            f"/cli{self.cli_max_bytes}B" if self.cli_max_bytes else "")
        return f"{self.long_edge}px/{self.megapixels:g}MP/{self.max_bytes}B{extra}"

    def to_json(self) -> str:
        """As the journal keeps it (the CLI fields only when set: older rows stay valid)."""
        fields: list[float | None] = [self.long_edge, self.megapixels, self.max_bytes]
        if self.max_patches is not None or self.cli_max_bytes is not None:
            fields += [self.max_patches, self.cli_max_bytes]
        return json.dumps(fields)

    @classmethod
    def from_json(cls, text: str) -> Limits:
        edge, megapixels, max_bytes, *cli = json.loads(text)
        patches, cli_bytes = [*cli, None, None][:2]
        return cls(int(edge), float(megapixels), int(max_bytes),
                   None if patches is None else int(patches),
                   None if cli_bytes is None else int(cli_bytes))
