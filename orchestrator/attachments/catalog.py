"""The vision catalog: can this member's *model* see images? (DESIGN §5.6)

A reviewed data file in the package (``vision_catalog.toml``), keyed by runtime and model id
(OpenCode ids keep their provider prefix). A member's ``vision = true|false`` overrides it and
is recorded as source "operator". A model that is not listed is unknown — and unknown is refused,
with a message naming the override. Provider support is never taken for model support.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from orchestrator.attachments.normalize import Limits

__all__ = ["Catalog", "VisionEntry", "load_catalog"]

_SNAPSHOT_SUFFIX = re.compile(r"(?:-\d{8}|@\d{8}|-latest)$")


@dataclass(frozen=True)
class VisionEntry:
    runtime: str
    model: str
    image_input: bool | None  # None: unknown
    limits: Limits
    source: str
    checked: str | None
    # documents: does the model read a PDF sent natively (None: unknown), and who says so
    pdf: bool | None = None
    pdf_source: str = "unknown"

    @property
    def known(self) -> bool:
        return self.image_input is not None


class Catalog:
    def __init__(self, data: dict[str, Any]) -> None:
        self.checked = str(data.get("checked", "unknown"))
        self.sources: dict[str, str] = dict(data.get("sources", {}))
        self._defaults = {rt: _limits(v, None) for rt, v in data.get("defaults", {}).items()}
        self._pdf_defaults: dict[str, dict[str, Any]] = {
            rt: {k: v[k] for k in ("pdf", "pdf_source") if k in v}
            for rt, v in data.get("defaults", {}).items()}
        self._models: dict[str, dict[str, dict[str, Any]]] = {
            runtime: dict(data.get(runtime, {})) for runtime in self._defaults
        }

    def default_limits(self, runtime: str) -> Limits:
        return self._defaults.get(runtime) or Limits(2000, 4.0, 15 * 1024 * 1024)

    def lookup(self, runtime: str, model: str | None, *,
               operator_vision: bool | None = None) -> VisionEntry:
        """The catalog's answer for this runtime and model, the operator's override applied."""
        key = model or "default"
        raw = self._find(runtime, key)
        limits = _limits(raw or {}, self.default_limits(runtime))
        documents = {**self._pdf_defaults.get(runtime, {}),
                     **{k: v for k, v in (raw or {}).items() if k in ("pdf", "pdf_source")}}
        pdf = None if "pdf" not in documents else bool(documents["pdf"])
        pdf_source = str(documents.get("pdf_source", "catalog" if pdf is not None else
                                       "unknown"))
        if operator_vision is not None:
            return VisionEntry(runtime, key, operator_vision, limits, "operator", None, pdf,
                               pdf_source)
        if raw is None:
            return VisionEntry(runtime, key, None, limits, "unknown", None, pdf, pdf_source)
        return VisionEntry(runtime, key, bool(raw["image_input"]), limits,
                           str(raw.get("source", "catalog")),
                           str(raw.get("checked", self.checked)), pdf, pdf_source)

    def entries(self) -> int:
        return sum(len(models) for models in self._models.values())

    def _find(self, runtime: str, key: str) -> dict[str, Any] | None:
        models = self._models.get(runtime, {})
        if key in models:
            return models[key]
        base = _SNAPSHOT_SUFFIX.sub("", key)
        return models.get(base)


def _limits(raw: dict[str, Any], fallback: Limits | None) -> Limits:
    base = fallback or Limits(2000, 4.0, 15 * 1024 * 1024)
    patches = raw.get("max_patches", base.max_patches)
    cli_bytes = raw.get("cli_max_bytes", base.cli_max_bytes)
    return Limits(
        long_edge=int(raw.get("long_edge", base.long_edge)),
        megapixels=float(raw.get("megapixels", base.megapixels)),
        max_bytes=int(raw.get("max_bytes", base.max_bytes)),
        max_patches=None if patches is None else int(patches),
        cli_max_bytes=None if cli_bytes is None else int(cli_bytes),
    )


@cache
def load_catalog() -> Catalog:
    """The packaged catalog (parsed once per process)."""
    text = resources.files("orchestrator.attachments").joinpath("vision_catalog.toml").read_text(
        encoding="utf-8")
    return Catalog(tomllib.loads(text))
