"""The benchmarks' model: a scripted OpenAI Chat Completions server run in its own process.

``python -m benchmarks._server [--text-deltas N]`` prints ``PORT <n>`` on stdout once it listens on
127.0.0.1 and serves until stdin closes. Every accepted socket gets ``TCP_NODELAY``. The scripted model
answers a request whose last message is a user message with one ``read_file`` tool call (the file named
in the message, ``notes/file_<k>.txt``), and a request ending with a tool result with a short final text
(or ``N`` one-character text deltas with ``--text-deltas N``). ``GET /v1/_last_request`` returns the last
request body, so a benchmark can replay the exact history with raw httpx; ``GET /v1/_arrivals`` the
``time.monotonic()`` arrival time of every model request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import sys
import threading
from collections import deque
from typing import Any

from tests.fixtures.scripted_servers import (
    Response,
    ScriptedOpenAIServer,
    ScriptedRequest,
    json_reply,
    stream,
)
from tests.fixtures.wire_formats import OpenAIWire

_FILE = re.compile(r"notes/file_\d+\.txt")


class BenchServer(ScriptedOpenAIServer):
    """Keeps only the last few requests (a long session would otherwise hold every body)."""

    def __init__(self, text_deltas: int = 0) -> None:
        super().__init__(strict=False)
        self.requests = deque(maxlen=2)  # type: ignore[assignment]
        self.text_deltas = text_deltas
        self.last_body: Any = None
        self.arrivals: list[float] = []
        """``time.monotonic()`` when each model request was fully received (system-wide clock)."""
        self.handler(self.answer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await super()._serve(reader, writer)

    def builtin(self, request: ScriptedRequest) -> Response | None:
        if request.method == "GET" and request.path == "/v1/_last_request":
            return json_reply(self.last_body)
        if request.method == "GET" and request.path == "/v1/_arrivals":
            return json_reply(self.arrivals)
        return None

    def answer(self, request: ScriptedRequest) -> Response:
        self.arrivals.append(request.received_at)
        body = request.json
        self.last_body = body
        messages = body["messages"]
        last = messages[-1]
        if not body.get("stream"):  # the peers' default (non-streaming) Chat Completions call
            return json_reply(_completion(messages, body))
        if last["role"] == "tool":
            if self.text_deltas:
                return stream(OpenAIWire.text_stream(*("x" * self.text_deltas)))
            return stream(OpenAIWire.text_stream(f"Read it ({len(messages)} messages).", usage=(100, 8)))
        path = _requested_file(last)
        name = next(t["function"]["name"] for t in body["tools"] if "read_file" in t["function"]["name"])
        call = (f"call_{len(messages)}", name, {"path": path})
        return stream(OpenAIWire.tool_stream([call], fragments=1, usage=(100, 12)))


def _completion(messages: list[dict[str, Any]], body: dict[str, Any]) -> dict[str, Any]:
    """The same scripted turn as one non-streaming ``chat.completion`` object."""
    message: dict[str, Any]
    if messages[-1]["role"] == "tool":
        message = {"role": "assistant", "content": f"Read it ({len(messages)} messages)."}
        finish, usage = "stop", (100, 8)
    else:
        name = next(t["function"]["name"] for t in body["tools"] if "read_file" in t["function"]["name"])
        arguments = json.dumps({"path": _requested_file(messages[-1])})
        call = {
            "id": f"call_{len(messages)}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish, usage = "tool_calls", (100, 12)
    return {
        "id": f"chatcmpl-{len(messages)}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model", "bench-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def _requested_file(message: dict[str, Any]) -> str:
    text = message.get("content") or ""
    if isinstance(text, list):
        text = "".join(part.get("text", "") for part in text if isinstance(part, dict))
    found = _FILE.search(text)
    return found.group(0) if found else "notes/file_0.txt"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--text-deltas", type=int, default=0)
    args = parser.parse_args()
    server = BenchServer(text_deltas=args.text_deltas).start()
    print(f"PORT {server.port}", flush=True)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    done.wait()
    server.stop()
    if server.errors:
        print(json.dumps(server.errors), file=sys.stderr)


if __name__ == "__main__":
    main()
