"""The scripted models and sessions of ``benchmarks.prefix_reuse`` (issue 33).

:class:`ScenarioServer` is the benchmarks' scripted OpenAI Chat Completions model (``_server.BenchServer``)
keeping every body of the conversation being measured (requests that carry the ``read_file`` tool;
memory jobs answered on the side are not part of it). Its answers by the last real message of a request
(runtime notes such as ``<task_board>`` / ``<system_update>`` are skipped, as a model reads past them):

* a tool result → a short final answer;
* a user turn → one tool call, chosen by :func:`turn_message`'s text: a Task create (``create the Task``)
  or update (``record progress``) in orchestrator mode, an instruction file read (``read AGENTS.md``), a
  memory recall (``recall``), else the read of the file the message names;
* the memory recall selector (no tools) → the first seeded memory; a memory extraction job (its submit
  tool) → a submission with no operation.

:func:`anthropic_answer` is the same plain session for the scripted Anthropic server.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from agent_core.testing import (
    AnthropicWire,
    OpenAIWire,
    Response,
    ScriptedRequest,
    advertised_tool_name,
    stream,
)
from benchmarks._common import FILE_COUNT
from benchmarks._server import BenchServer

MEMORY_ID = "mem_20240101000000_aaaaaa"
_FILE = re.compile(r"notes/file_\d+\.txt")
_NOTES = ("<task_board>", "<system_update")


def turn_message(i: int, scenario: str = "plain") -> str:
    """The user message of turn ``i``: a file read, or the scenario's special turns."""
    if scenario == "orchestrator":
        return "turn 0: create the Task" if i == 0 else f"turn {i}: record progress {i} on the Task"
    if scenario == "recall" and i == 10:
        return f"turn {i}: read AGENTS.md and follow it"
    if scenario == "recall" and i == 20:
        return f"turn {i}: recall what you remember about indentation"
    return f"turn {i}: please read notes/file_{i % FILE_COUNT}.txt and summarise it"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _last_real(messages: list[dict[str, Any]]) -> dict[str, Any]:
    for message in reversed(messages):
        if message.get("role") == "user" and _text(message).startswith(_NOTES):
            continue
        return message
    return messages[-1]


def _tools(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


class ScenarioServer(BenchServer):
    """See the module docstring; ``take()`` returns and clears the kept bodies."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[dict[str, Any]] = []
        self._keep = threading.Lock()

    def take(self) -> list[dict[str, Any]]:
        with self._keep:
            bodies, self.bodies = self.bodies, []
        return bodies

    def answer(self, request: ScriptedRequest) -> Response:
        body = request.json
        tools = _tools(body)
        if not tools:  # the memory recall selector
            return stream(OpenAIWire.text_stream(json.dumps({"memory_ids": [MEMORY_ID]})))
        if any("memory_writer" in name for name in tools):
            return self._extraction(request)
        if any("read_file" in name for name in tools):
            with self._keep:
                self.bodies.append(body)
        if not body.get("stream"):  # the peers' default (non-streaming) call: the plain turns
            return super().answer(request)
        messages = body["messages"]
        last = _last_real(messages)
        if last["role"] == "tool":
            return stream(OpenAIWire.text_stream(f"Done ({len(messages)} messages).", usage=(100, 8)))
        said = _text(last)
        call_id = f"call_{len(messages)}"
        if "create the Task" in said:
            step = {"step_id": "s1", "title": "Work", "summary": "the work", "depends_on_step_ids": []}
            args: dict[str, Any] = {
                "task_id": "t1",
                "wal_name": "t1",
                "title": "The Task",
                "summary": "progress 0",
                "steps": [step],
            }
            return self._call(request, call_id, "task_create", args)
        progress = re.search(r"record progress (\d+)", said)
        if progress is not None:
            update = {"op": "update_task", "summary": f"progress {progress.group(1)}"}
            return self._call(request, call_id, "task_update", {"task_id": "t1", "operations": [update]})
        if "AGENTS.md" in said:
            return self._call(request, call_id, "read_file", {"path": "AGENTS.md"})
        if "recall" in said:
            return self._call(request, call_id, "recall_memory", {"query": "indentation"})
        found = _FILE.search(said)
        path = found.group(0) if found else "notes/file_0.txt"
        return self._call(request, call_id, "read_file", {"path": path})

    @staticmethod
    def _call(request: ScriptedRequest, call_id: str, fragment: str, args: dict[str, Any]) -> Response:
        name = advertised_tool_name(request, fragment)
        return stream(OpenAIWire.tool_stream([(call_id, name, args)], fragments=1, usage=(100, 12)))

    @staticmethod
    def _extraction(request: ScriptedRequest) -> Response:
        if request.json["messages"][-1]["role"] == "tool":
            return stream(OpenAIWire.text_stream("submitted"))
        submit = {"operations": [], "ignored_candidates": [], "duplicate_decisions": [], "conflicts": []}
        return ScenarioServer._call(request, "call_submit", "memory_writer", submit)


def seed_recall(home: Path, project: Path) -> None:
    """An ``AGENTS.md`` in the project and one memory (with its ``MEMORY.md``) in the home."""
    from agent_core._memory.files import MemoryFrontmatter, MemoryStore, render_catalog, render_memory_file

    (project / "AGENTS.md").write_text("# Project rules\nIndent with tabs. Keep answers short.\n", "utf-8")
    front = MemoryFrontmatter.model_validate(
        {
            "id": MEMORY_ID,
            "category": "user",
            "summary": "Prefers tabs for indentation",
            "tags": ["style"],
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
        }
    )
    path = home / "memory" / "user" / f"note-{MEMORY_ID}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_memory_file(front, "The user indents with tabs in every project."), "utf-8")
    store = MemoryStore(memory_dir=home / "memory")
    store.catalog_path.write_text(render_catalog(store.records()), encoding="utf-8")


def anthropic_answer(request: ScriptedRequest) -> Response:
    """The plain session on the Anthropic protocol: read the named file, then answer."""
    messages = request.json["messages"]
    last = messages[-1]["content"]
    if any(block.get("type") == "tool_result" for block in last):
        return stream(AnthropicWire.text_stream(f"Done ({len(messages)} messages)."))
    said = " ".join(str(block.get("text", "")) for block in last if block.get("type") == "text")
    found = _FILE.search(said)
    name = advertised_tool_name(request, "read_file")
    path = found.group(0) if found else "notes/file_0.txt"
    return stream(AnthropicWire.tool_stream([(f"toolu_{len(messages)}", name, {"path": path})]))
