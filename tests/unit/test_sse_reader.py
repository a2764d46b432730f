"""The event-stream reader yields exactly what httpx-sse yields, however the body is chunked."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import httpx
import pytest
from httpx_sse import EventSource

from agent_core.providers._sse import body_encoding, content_type_problem, read_events
from agent_core.providers._streaming import StreamProtocolError, sse_events

BODIES = [
    b'data: {"a": 1}\n\ndata: [DONE]\n\n',
    b'event: message_start\ndata: {"type": "x"}\n\nevent: ping\ndata: {}\n\n',
    b"data: one\r\ndata: two\r\n\r\n: comment\r\ndata:three\r\rdata: 4\r\n\r\n",
    b"id: 7\n\n\ndata: after id\n\nid:\n\n\n",
    b"retry: 100\n\nretry: x\n\nretry: -5\n\nfield\ndata\n\ndata: x\n\r",
    "data: caf\u00e9 \u2603 \U0001f600\n\ndata: unterminated".encode(),
    b"data: \xff\xfe bad utf8\n\n",
    b"event:\ndata: empty name\n\n:\n\ndata:  two spaces\n\nid: a\x00b\n\n",
    b"",
]


def _response(body: bytes, cuts: list[int], content_type: str = "text/event-stream") -> httpx.Response:
    class Stream(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            start = 0
            for cut in [*cuts, len(body)]:
                if cut > start:
                    yield body[start:cut]
                    start = cut

    return httpx.Response(200, headers={"content-type": content_type}, stream=Stream())


async def _ours(response: httpx.Response) -> list[tuple[str, str]]:
    return [event async for event in read_events(response)]


async def _reference(response: httpx.Response) -> list[tuple[str, str]]:
    return [(sse.event, sse.data) async for sse in EventSource(response).aiter_sse()]


@pytest.mark.parametrize("body", BODIES)
def test_same_events_as_httpx_sse_for_every_chunking(body: bytes) -> None:
    rng = random.Random(len(body))
    chunkings = [[], list(range(1, len(body)))] + [
        sorted(rng.sample(range(1, max(len(body), 2)), min(3, max(len(body) - 1, 0)))) for _ in range(20)
    ]
    for cuts in chunkings:
        expected = asyncio.run(_reference(_response(body, cuts)))
        assert asyncio.run(_ours(_response(body, cuts))) == expected, cuts


def test_not_an_event_stream_is_a_protocol_error() -> None:
    response = _response(b"{}", [], content_type="application/json")
    assert content_type_problem("application/json") is not None
    with pytest.raises(StreamProtocolError, match="text/event-stream"):
        sse_events(response)
    assert content_type_problem("text/event-stream; charset=utf-8") is None


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [("text/event-stream", "utf-8"), ("text/event-stream; charset=latin-1", "latin-1")],
)
def test_body_encoding_is_utf8_unless_a_charset_is_named(content_type: str, expected: str) -> None:
    response = _response(b"", [], content_type)
    assert body_encoding(response, content_type) == expected == (response.encoding or "utf-8")
