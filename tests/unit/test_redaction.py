"""The one redactor: no data URL, base64 run, API key or bearer token survives it."""

from __future__ import annotations

import base64
import string

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.diagnostics import redact_event
from orchestrator.redaction import redact, redact_value

_TOKEN = st.text(string.ascii_letters + string.digits + "_-", min_size=16, max_size=64)
_NOISE = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80)


@given(prefix=_NOISE, suffix=_NOISE, data=st.binary(min_size=60, max_size=4000),
       mime=st.sampled_from(["image/png", "image/jpeg", "image/webp", "application/pdf"]))
def test_no_data_url_survives(prefix: str, suffix: str, data: bytes, mime: str) -> None:
    payload = base64.b64encode(data).decode()
    out = redact(f"{prefix}data:{mime};base64,{payload}{suffix}")
    assert payload not in out
    assert f"data:{mime};base64," not in out


@given(prefix=_NOISE, suffix=_NOISE, data=st.binary(min_size=60, max_size=4000))
def test_no_long_base64_run_survives(prefix: str, suffix: str, data: bytes) -> None:
    payload = base64.b64encode(data).decode()
    out = redact(f"{prefix} {payload} {suffix}")
    assert payload not in out


@given(prefix=_NOISE, token=_TOKEN,
       kind=st.sampled_from(["sk-ant-api03-", "sk-or-v1-", "sk-proj-", "sk-", "ghp_",
                             "github_pat_11A"]))
def test_no_api_key_survives(prefix: str, token: str, kind: str) -> None:
    secret = kind + token
    out = redact(f"{prefix} {secret} trailing")
    assert secret not in out
    assert token not in out or token in prefix


@given(token=_TOKEN, style=st.sampled_from([
    "Authorization: Bearer {t}", "authorization={t}", '"Authorization": "Basic {t}"',
    "Bearer {t}", "OPENAI_API_KEY={t}", "ANTHROPIC_API_KEY: {t}", '"x-api-key": "{t}"',
    "OPENCODE_SERVER_PASSWORD={t}",
]))
def test_no_bearer_or_header_value_survives(token: str, style: str) -> None:
    assert token not in redact(style.format(t=token))


def test_safe_fields_stay_readable() -> None:
    digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    line = f"mime=image/png width=1568 height=882 sha256={digest} member=lead code=runtime_exited"
    assert redact(line) == line


def test_redact_value_walks_nested_events() -> None:
    event = {"event": "x", "env": {"ANTHROPIC_API_KEY": "sk-ant-abcdefgh"},
             "lines": ["Bearer abcdefghijklmnop"], "count": 3}
    out = redact_value(event)
    assert "sk-ant-abcdefgh" not in str(out) and "abcdefghijklmnop" not in str(out)
    assert out["count"] == 3
    assert redact_event(None, "info", event) == out
