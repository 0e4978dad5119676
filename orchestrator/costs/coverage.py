"""Whose usage figures leave some of its API calls out (docs/costs.md, "A lower bound").

The ledger charges what a runtime reports. An ACP agent reports the usage it chooses, and two
were captured making model calls they never report (against the fake APIs of tests/e2e, five
turns each, the requests counted at the API):

- Qwen Code 0.24.4 reports each turn's own call (``_meta.usage`` on its last chunk), never its
  side requests: a "managed memory extraction" sub-agent after every turn and a next-prompt
  suggestion after most — 9 of 14 API calls.
- Gemini CLI 0.61.0 with no model named routes every prompt with a call to a small model
  (``generateContent`` on ``gemini-3.5-flash-lite``) that its ``_meta.quota`` leaves out: 5 of
  10 calls. With a model named (``GEMINI_MODEL``, which teamctl sets from ``model``) there is
  no routing call, and the 5 turns' calls were all reported.

For such a member, ``usage``, ``status``, ``budget`` and the live view show its figures as a
lower bound (``≥``) and say why; a budget bounds what it reports. An ACP agent without a preset
was not captured: its figures are a lower bound too, said as unknown. Claude, Codex and
OpenCode report each turn's calls in their own totals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.runtime_table import runtime_info

if TYPE_CHECKING:
    from orchestrator.runtime_table import RuntimeName

__all__ = ["unreported"]

QWEN = ("Qwen Code reports only its turns' own model calls: its side requests (memory "
        "extraction after each turn, next-prompt suggestions) are in no usage it reports "
        "(9 of 14 API calls in a five-turn run of 0.24.4)")
GEMINI_ROUTED = ("Gemini CLI with no model named routes each prompt with a model call its "
                 "usage leaves out (1 of 2 API calls a turn in 0.61.0); name a model to count "
                 "them all")
UNKNOWN_AGENT = ("an ACP agent reports the usage it chooses, and whether this one's own side "
                 "requests are in it was never captured (a preset's was)")


def unreported(runtime: RuntimeName, acp_agent: str | None, model: str | None) -> str | None:
    """Why a member's usage leaves some of its API calls out, or None when every call it
    makes is in what it reports (as far as captured). Only a runtime that runs an agent the
    team file names (``agent_presets``: ACP) reports what that agent chooses."""
    if not runtime_info(runtime).agent_presets:
        return None
    if acp_agent == "qwen":
        return QWEN
    if acp_agent == "gemini":
        return GEMINI_ROUTED if model is None else None
    return UNKNOWN_AGENT
