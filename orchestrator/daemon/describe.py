"""Described images for text-only members, by explicit opt-in (``describe_with``).

A member whose model cannot see may name a describer: a runtime and a model the vision catalog
says can see. Every image sent to that member is then planned for the *describer* (its limits,
its variant), described by one side call through the describer's real CLI (no tools, no
session kept, its own deadline: runtimes/describers.py), and the member receives the text in
its place, labelled ``[Image #1, described by MODEL: …]``.

- It happens at send time, before anything is journaled: a failed side call refuses the whole
  message (``attachment_description_failed``, retryable) — an undescribed image is never sent.
- Descriptions are cached by variant hash and describer (journal table ``descriptions``): the
  same screenshot sent again costs no side call. The instruction carries nothing of the
  message, so the cache is exact.
- The description is journaled with the message (``message_attachments.description``), so a
  re-delivery after a crash sends the same text and never calls the describer again.
- A describer that cannot see, or a runtime that cannot describe, is refused at launch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.attachments.documents import DocumentRules
from orchestrator.attachments.failures import AttachmentFailure, AttachmentRefused
from orchestrator.attachments.markers import label
from orchestrator.attachments.planner import Target
from orchestrator.contracts import Description, LaunchSpec, runtime_info
from orchestrator.errors import BudgetReached, TeamctlError, TeamFileError
from orchestrator.paths import ensure_private_dir
from orchestrator.processes import resolve_executable

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from orchestrator.attachments.intake import Original
    from orchestrator.attachments.loader import VariantLoader
    from orchestrator.attachments.planner import Planner
    from orchestrator.attachments.variants import PlannedAttachment
    from orchestrator.config import DescribeWith, MemberConfig, TeamConfig
    from orchestrator.contracts import Capabilities, Host, ImageDescriber
    from orchestrator.daemon.journal import AsyncJournal, Journal, Migrations
    from orchestrator.daemon.ledger import Ledger
    from orchestrator.paths import Home

__all__ = ["INSTRUCTION", "MIGRATIONS", "Described", "DescriptionCache", "Descriptions",
           "described_text", "describer_id"]

log = structlog.get_logger("teamctl.describe")

INSTRUCTION = (
    "Describe this image for a teammate who cannot see it. Transcribe every piece of visible "
    "text exactly, in reading order. Then describe the layout, the controls and their state, "
    "colours, and anything that looks wrong or misaligned. Be factual and complete; do not "
    "guess at what is not visible. Answer with the description only."
)
MAX_DESCRIPTION_CHARS = 20_000

MIGRATIONS: Migrations = {
    # the descriptions a describer made, by variant, reused (issue 18; the description sent
    # with a message is journaled with it: ``message_attachments.description``)
    9: """
    CREATE TABLE descriptions (
        variant_sha256 TEXT NOT NULL,
        describer TEXT NOT NULL,
        text TEXT NOT NULL,
        seconds REAL NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (variant_sha256, describer)
    );
    """,
}


def describer_id(describe: DescribeWith) -> str:
    return f"{describe.runtime}:{describe.model}"


def described_text(number: int, described_by: str, description: str) -> str:
    """What the member receives in place of ``[Image #number]`` (``described_by``: the
    ``runtime:model`` of ``describer_id``; the label names the model)."""
    model = described_by.split(":", 1)[-1]
    return f"{label('image', number)[:-1]}, described by {model}: {description}]"


@dataclass(frozen=True)
class Described:
    """A message's attachments, described; ``made``: the side calls this send made (what the
    ledger charges to the message once it is journaled)."""

    planned: list[PlannedAttachment]
    made: list[Description] = field(default_factory=list)


class Descriptions:
    def __init__(self, store: AsyncJournal, planner: Planner, loader: VariantLoader,
                 describers: Mapping[str, ImageDescriber],
                 capabilities: Mapping[str, Capabilities], home: Home, *,
                 ledger: Ledger | None = None, host: Host) -> None:
        """``host``: this machine's, where describers run (``contracts.Host``)."""
        self._host = host
        self._ledger = ledger
        self._cache = DescriptionCache(store)
        self._planner = planner
        self._loader = loader
        self._describers = describers
        self._capabilities = capabilities
        self._home = home
        self._calls = anyio.CapacityLimiter(2)  # side calls at once, daemon-wide

    def check(self, config: TeamConfig, file: str) -> None:
        """Refuse, at launch, a describer that cannot see or a runtime that cannot describe."""
        problems = []
        for index, member in enumerate(config.members):
            describe = member.describe_with
            if describe is None:
                continue
            where = f"members[{index}] ({member.name}).describe_with"
            if describe.runtime not in self._describers:
                problems.append(f"{where}: the {describe.runtime} runtime cannot describe "
                                f"images yet; use {' or '.join(sorted(self._describers))}")
                continue
            entry = self._planner.vision(self._target(config.name, member.name, describe))
            if entry.image_input is not True:
                seen = "cannot see images" if entry.image_input is False else \
                    "is not known to see images"
                problems.append(f"{where}: {describe.model} ({describe.runtime}) {seen} "
                                f"(source: {entry.source}); name a vision model as describer")
        if problems:
            raise TeamFileError(file, problems)

    def _target(self, team: str, member: str, describe: DescribeWith) -> Target:
        """The describer as the target of the images; documents reach the (text-only) member
        itself as their text, never through the describer (docs/documents.md)."""
        return Target(team, member, describe.runtime, describe.model, None,
                      self._capabilities[describe.runtime], DocumentRules(prefer="text"))

    async def plan(self, config: TeamConfig, member: MemberConfig, text: str,
                   paths: Sequence[Path | Original], *, dry_run: bool) -> Described:
        """The attachments planned for the member's describer, each with its description
        (from the cache, or one side call each; none on a dry run). A member held by its
        budget makes no side call: the message is refused, saying so."""
        describe = member.describe_with
        assert describe is not None
        planned = await self._planner.plan(self._target(config.name, member.name, describe),
                                           text, list(paths))
        who = describer_id(describe)
        known = await self._cache.known([p.variant.sha256 for p in planned], who)
        if dry_run:
            return Described([p if p.kind != "image" else
                              p.with_description(who, known.get(p.variant.sha256))
                              for p in planned])
        failures: list[AttachmentFailure] = []
        described = Described([])
        for attachment in planned:
            if attachment.kind != "image":  # a document's text: the member reads it itself
                described.planned.append(attachment)
                continue
            text_of = known.get(attachment.variant.sha256)
            if text_of is None:
                try:
                    self._affordable(config.name, member.name)
                    made = await self._describe(config, member, describe, attachment)
                    described.made.append(made)
                    text_of = made.text
                except TeamctlError as exc:
                    failures.append(AttachmentFailure(
                        "attachment_description_failed",
                        f"{attachment.name}: {exc.message}; nothing was sent — try again, or "
                        "send the text alone", attachment=attachment.name, member=member.name,
                        may_retry=exc.retryable))
                    continue
                known[attachment.variant.sha256] = text_of
            described.planned.append(attachment.with_description(who, text_of))
        if failures:
            raise AttachmentRefused(failures)
        return described

    def _affordable(self, team: str, member: str) -> None:
        hold = None if self._ledger is None else self._ledger.gate(team, member)
        if hold is not None:
            raise BudgetReached(member, hold.describe())

    async def charge(self, team: str, member: MemberConfig, message_id: str,
                     made: list[Description]) -> None:
        """Charge the side calls a send made to its (now journaled) message."""
        describe = member.describe_with
        if self._ledger is None or describe is None:
            return
        for description in made:
            await self._ledger.charge_side_call(team, member.name, message_id,
                                                describe.runtime, describe.model,
                                                description.usage, description.cost_usd)

    async def _describe(self, config: TeamConfig, member: MemberConfig, describe: DescribeWith,
                        attachment: PlannedAttachment) -> Description:
        spec = self._spec(config, member, describe)
        image = await self._loader.load(attachment.original_sha256, attachment.variant)
        async with self._calls:
            description = await self._describers[describe.runtime].describe(
                spec, image, INSTRUCTION)
        text = description.text[:MAX_DESCRIPTION_CHARS]
        description = replace(description, text=text)
        await self._cache.remember(attachment.variant.sha256, describer_id(describe), text,
                                   description.seconds)
        log.info("image_described", team=config.name, member=member.name,
                 describer=describer_id(describe), sha256=attachment.variant.sha256,
                 seconds=round(description.seconds, 3), chars=len(text),
                 cost_usd=description.cost_usd,
                 tokens=None if description.usage is None else description.usage.total)
        return description

    def _spec(self, config: TeamConfig, member: MemberConfig,
              describe: DescribeWith) -> LaunchSpec:
        info = runtime_info(describe.runtime)
        executable = resolve_executable(member.name, describe.command, env_var=info.env_var,
                                        default=info.default_executable)
        state_dir = ensure_private_dir(self._home.member_dir(config.name, member.name)
                                       / "describer")
        workdir = ensure_private_dir(state_dir / "empty")  # nothing of a project is read
        return LaunchSpec(
            team=config.name, member=member.name, executable=executable, model=describe.model,
            prompt=None, workdir=workdir, state_dir=state_dir, args=tuple(describe.args),
            env=dict(describe.env), turn_idle_timeout=describe.timeout, image_input=True,
            login=describe.login or config.resolved(member).login, permissions="read",
            host=self._host)


class DescriptionCache:
    """The ``descriptions`` table's typed async methods, over the daemon's journal."""

    def __init__(self, journal: AsyncJournal) -> None:
        self._journal = journal

    async def known(self, variants: list[str], describer: str) -> dict[str, str]:
        """The descriptions ``describer`` already made of ``variants``, by variant."""
        return await self._journal.run(_cached, variants, describer)

    async def remember(self, variant: str, describer: str, text: str, seconds: float) -> None:
        await self._journal.run(_remember, variant, describer, text, seconds)


def _cached(journal: Journal, variants: list[str], describer: str) -> dict[str, str]:
    if not variants:
        return {}
    rows = journal.connection.execute(
        f"SELECT variant_sha256, text FROM descriptions WHERE describer = ? AND "
        f"variant_sha256 IN ({','.join('?' * len(variants))})", (describer, *variants),
    ).fetchall()
    return {row["variant_sha256"]: row["text"] for row in rows}


def _remember(journal: Journal, variant: str, describer: str, text: str,
              seconds: float) -> None:
    with journal.transaction() as db:
        db.execute("INSERT OR REPLACE INTO descriptions (variant_sha256, describer, text, "
                   "seconds, created_at) VALUES (?, ?, ?, ?, ?)",
                   (variant, describer, text, seconds, time.time()))
