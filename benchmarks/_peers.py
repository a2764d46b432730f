"""Peer harnesses for ``turn_overhead --compare``: the same session driven by other agent SDKs.

Each peer runs the benchmark turn (user message → the model calls a read-file tool → tool result → final
answer) against the same scripted OpenAI Chat Completions server, keeping one growing session:

- OpenAI Agents SDK (``openai-agents``): ``Runner.run`` with a ``SQLiteSession`` in a file (durable
  history, as ours), tracing off, ``@function_tool read_file``.
- pydantic-ai (``pydantic-ai-slim[openai]``): ``Agent.run`` with the history kept in memory
  (``message_history=result.all_messages()``), ``@agent.tool_plain read_file``.

Both use their default (non-streaming) model call; the scripted server answers those with one
``chat.completion`` object. Both packages come with the ``bench`` extra; a peer whose package is missing
is reported as such, not silently skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

INSTRUCTIONS = "You are a coding assistant. Use read_file to read files the user names."


class Peer(Protocol):
    name: str

    async def turn(self, message: str) -> str: ...

    async def close(self) -> None: ...


def _reader(project: Path) -> Any:
    root = project.resolve()

    def read_file(path: str) -> str:
        """Read a UTF-8 text file of the project.

        Args:
            path: file path relative to the project root.
        """
        target = (root / path).resolve()
        if not target.is_relative_to(root):
            raise ValueError("path outside the project")
        return target.read_text(encoding="utf-8")

    return read_file


class OpenAIAgentsPeer:
    name = "OpenAI Agents SDK (SQLiteSession)"

    def __init__(self, base_url: str, project: Path, db_path: Path) -> None:
        from agents import (
            Agent,
            OpenAIChatCompletionsModel,
            SQLiteSession,
            function_tool,
            set_tracing_disabled,
        )
        from openai import AsyncOpenAI

        set_tracing_disabled(True)
        self._client = AsyncOpenAI(base_url=base_url, api_key="sk-bench-peer", max_retries=0)
        model = OpenAIChatCompletionsModel(model="bench-model", openai_client=self._client)
        tool = function_tool(_reader(project), name_override="read_file")
        self._agent = Agent(name="bench", instructions=INSTRUCTIONS, model=model, tools=[tool])
        self._session = SQLiteSession("bench", str(db_path))

    async def turn(self, message: str) -> str:
        from agents import Runner

        result = await Runner.run(self._agent, message, session=self._session)
        return str(result.final_output)

    async def close(self) -> None:
        self._session.close()
        await self._client.close()


class PydanticAIPeer:
    name = "pydantic-ai (history in memory)"

    def __init__(self, base_url: str, project: Path) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        self._provider = OpenAIProvider(base_url=base_url, api_key="sk-bench-peer")
        self._agent: Any = Agent(
            OpenAIChatModel("bench-model", provider=self._provider), instructions=INSTRUCTIONS
        )
        self._agent.tool_plain(_reader(project))
        self._history: list[Any] = []

    async def turn(self, message: str) -> str:
        result = await self._agent.run(message, message_history=self._history)
        self._history = result.all_messages()
        return str(result.output)

    async def close(self) -> None:
        client = getattr(self._provider, "client", None)
        if client is not None:
            await client.close()


def make_peers(base_url: str, project: Path, root: Path) -> tuple[list[Peer], list[str]]:
    """The peers whose packages are installed, and a note per missing one."""
    peers: list[Peer] = []
    missing: list[str] = []
    try:
        peers.append(OpenAIAgentsPeer(base_url, project, root / "openai_agents.sqlite"))
    except ImportError as exc:
        missing.append(f"OpenAI Agents SDK not installed ({exc.name}): pip install -e '.[bench]'")
    try:
        peers.append(PydanticAIPeer(base_url, project))
    except ImportError as exc:
        missing.append(f"pydantic-ai not installed ({exc.name}): pip install -e '.[bench]'")
    return peers, missing
