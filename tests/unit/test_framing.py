"""Bounded NDJSON framing: any chunking gives the same lines; a long line is a typed error."""

from __future__ import annotations

import json

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.errors import LineTooLong, ProtocolError
from runtimes.kit.framing import decode_line, encode_line, iter_lines


class _Chunks:
    """A ByteReceiveStream over fixed chunks."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[bytes](len(chunks) + 1)
        for chunk in chunks:
            self._send.send_nowait(chunk)
        self._send.close()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._receive.receive()

    async def aclose(self) -> None:
        await self._receive.aclose()


async def _collect(chunks: list[bytes], limit: int = 1 << 20) -> list[bytes]:
    stream = _Chunks(chunks)
    try:
        return [line async for line in iter_lines(stream, limit_bytes=limit)]  # type: ignore[arg-type]
    finally:
        await stream.aclose()


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for point in [*points, len(data)]:
        pieces.append(data[last:point])
        last = point
    return [p for p in pieces if p]


@given(lines=st.lists(st.binary().map(lambda b: b.replace(b"\n", b"")), max_size=20),
       cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
       trailing_newline=st.booleans())
def test_any_chunking_yields_the_same_lines(lines: list[bytes], cuts: list[int],
                                            trailing_newline: bool) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    expected = data.split(b"\n")
    if expected and expected[-1] == b"":
        expected.pop()
    assert anyio.run(_collect, _split(data, cuts)) == expected


def test_a_line_past_the_limit_is_a_typed_error() -> None:
    with pytest.raises(LineTooLong) as info:
        anyio.run(_collect, [b"x" * 600, b"x" * 600], 1000)
    assert info.value.code == "protocol_line_too_long"


def test_lines_within_the_limit_pass() -> None:
    assert anyio.run(_collect, [b"a" * 999 + b"\n"], 1000) == [b"a" * 999]


_TEXT = st.text(max_size=30)  # any code point, "\n" and "\u2028" included


@given(obj=st.dictionaries(_TEXT, st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=5),
    max_leaves=12), max_size=6))
def test_encoded_lines_are_one_valid_json_line(obj: dict[str, object]) -> None:
    line = encode_line(obj)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == obj
    assert decode_line(line.rstrip(b"\n")) == obj


def test_noise_is_skipped_and_corrupt_json_is_an_error() -> None:
    assert decode_line(b"") is None
    assert decode_line(b"this is not json") is None
    with pytest.raises(ProtocolError):
        decode_line(b'{"type": "result", ')
    with pytest.raises(ProtocolError):
        decode_line(b"{[1, 2]")


